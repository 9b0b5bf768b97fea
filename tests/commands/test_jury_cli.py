"""`scijudge jury` on a PoLL-shaped fixture (several LLM judges, three human ratings per item), then
`scijudge calibrate` on the members and the jury; the help's example on the bundled panel; bad input."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from scijudge.cli import app
from scijudge.metrics.jury import jury_vs_best_member
from scijudge.records import JudgeResult
from scijudge.run.store import Run

JUDGE = "yescieval.qa.correctness"
REPO = Path(__file__).resolve().parents[2]
MEMBERS = {  # bias, noise sd, abstain rate, cost per judgment
    "gpt-4-turbo": (0.35, 0.75, 0.02, 0.010), "command-r": (-0.2, 0.85, 0.06, 0.0015),
    "haiku": (0.1, 0.9, 0.04, 0.0005),
}


@pytest.fixture(scope="module")
def poll(tmp_path_factory):
    """PoLL-shaped: 120 items, 3 human raters each, 3 LLM judges in their own run stores (spec hash of the
    shipped correctness spec is not needed: the scale comes from the likert family)."""
    base = tmp_path_factory.mktemp("poll")
    rng = np.random.default_rng(3)
    labels, rows = [], {m: [] for m in MEMBERS}
    for i in range(120):
        q = rng.uniform(1, 5)
        item = f"q{i:04d}"
        for a in range(3):
            labels.append({"item_id": item, "judge": JUDGE, "annotator": f"rater{a}",
                           "score": int(np.clip(np.rint(q + rng.normal(0, 0.55)), 1, 5))})
        for m, (bias, sd, p_ab, cost) in MEMBERS.items():
            ab = rng.random() < p_ab
            rows[m].append(JudgeResult(item_id=item, judge=JUDGE, family="likert", spec_hash="spec-correctness-v1",
                                       model=m, status="abstained" if ab else "ok", reason="parse_error" if ab else None,
                                       score=None if ab else float(np.clip(np.rint(q + bias + rng.normal(0, sd)), 1, 5)),
                                       cost=cost, input_hash=f"in-{item}"))
    for m, results in rows.items():
        with Run(base / f"{m}.sqlite") as run:
            for r in results:
                run.record(r)
    (base / "labels.jsonl").write_text("".join(json.dumps(x) + "\n" for x in labels))
    return base


@pytest.mark.slow
def test_jury_then_calibrate_shows_the_jury_row(poll):
    runner = CliRunner()
    stores = [str(poll / f"{m}.sqlite") for m in MEMBERS]
    done = runner.invoke(app, ["jury", *stores, *sum((["--member", m] for m in MEMBERS), []), "--method", "mean",
                               "--name", "poll", "--out", str(poll / "jury.sqlite")])
    assert done.exit_code == 0, done.output
    assert "jury judgments" in done.output and "jury:poll" in done.output
    calib = runner.invoke(app, ["calibrate", "--labels", str(poll / "labels.jsonl"), *sum((["--run", s] for s in stores), []),
                                "--run", str(poll / "jury.sqlite"), "--n-boot", "100", "--out", str(poll / "report")])
    assert calib.exit_code == 0, calib.output
    board = pd.read_csv(poll / "report" / "leaderboard.csv")
    assert {"jury:poll", *MEMBERS} <= set(board["contender"])
    paired = pd.read_csv(poll / "report" / "paired.csv")  # calibrate's own pairs include the jury with each member
    assert (paired["a"].eq("jury:poll") | paired["b"].eq("jury:poll")).sum() > 0
    # the paired comparison with each member, from the same stores
    frames = []
    for s in [*stores, str(poll / "jury.sqlite")]:
        with Run(s, create=False) as run:
            frames.append(run.to_pandas())
    table = jury_vs_best_member(pd.concat(frames, ignore_index=True), poll / "labels.jsonl")
    assert set(table["member"]) == set(MEMBERS) and table["best_member"].sum() == 1
    assert table["p_holm"].between(0, 1).all() and (table["p_holm"] >= table["p"] - 1e-15).all()
    jury_cost = table["cost_jury"].iloc[0]
    assert math.isclose(jury_cost, sum(c for *_, c in MEMBERS.values()), rel_tol=0.05)  # a few abstentions


@pytest.mark.slow
def test_help_example_runs_on_the_bundled_panel(tmp_path):
    runner = CliRunner()
    panel = tmp_path / "panel.sqlite"
    done = runner.invoke(app, ["import-judgments", str(REPO / "datasets/jury_example/panel.jsonl"), "--run", str(panel)])
    assert done.exit_code == 0, done.output
    done = runner.invoke(app, ["jury", str(panel), "--member", "judge-a", "--member", "judge-b", "--member", "judge-c",
                               "--name", "panel", "--out", str(tmp_path / "jury.sqlite")])
    assert done.exit_code == 0, done.output
    with Run(tmp_path / "jury.sqlite", create=False) as run:
        rows = run.to_pandas()
        meta = run.meta()
    assert len(rows) == 108 and set(rows["model"]) == {"jury:panel"}
    assert meta["scales"]["yescieval.qa.correctness"] == "1,5,1,continuous"  # the likert family's scale
    rerun = tmp_path / "rerun.sqlite"
    runner.invoke(app, ["import-judgments", str(REPO / "datasets/jury_example/panel_rerun.jsonl"), "--run", str(rerun)])
    assert runner.invoke(app, ["drift", str(panel), str(rerun), "--fail-above", "0.9"]).exit_code == 0


@pytest.mark.parametrize(("args", "needle"), [
    (["--member", "gpt-4-turbo"], "at least two members"),
    (["--member", "gpt-4-turbo", "--member", "nobody"], "member 'nobody' has no judgment"),
    (["--member", "gpt-4-turbo", "--member", "haiku", "--method", "weighted"], "labels"),
    (["--member", "gpt-4-turbo", "--member", "haiku", "--method", "vote"], "unknown jury method"),
])
def test_bad_input_is_one_line_with_exit_2(poll, args, needle):
    stores = [str(poll / f"{m}.sqlite") for m in MEMBERS]
    done = CliRunner().invoke(app, ["jury", *stores, *args, "--name", "x", "--out", str(poll / "bad.sqlite")])
    assert done.exit_code == 2, done.output
    assert needle in done.output and "Traceback" not in done.output


def test_mixed_scales_refused_unless_mapped_on_the_command_line(tmp_path):
    runner = CliRunner()
    for model, factor, scale in (("five", 1, "1,5,1"), ("ten", 2, "1,10,1"), ("other", 1, "1,5,1")):
        with Run(tmp_path / f"{model}.sqlite") as run:
            for i in range(6):
                run.record(JudgeResult(item_id=f"i{i}", judge=JUDGE, family="likert", spec_hash="s", model=model,
                                       status="ok", score=float((1 + i % 5) * factor)))
            run.set_meta(scales={JUDGE: scale})
    stores = [str(tmp_path / f"{m}.sqlite") for m in ("five", "ten", "other")]
    base = ["jury", *stores, "-m", "five", "-m", "ten", "-m", "other", "--name", "j", "--out", str(tmp_path / "j.sqlite")]
    refused = runner.invoke(app, base)
    assert refused.exit_code == 2 and "members use different scales" in refused.output
    assert len([line for line in refused.output.splitlines() if line.strip()]) == 1
    mapped = runner.invoke(app, [*base, "--map-scale", "ten=1,5,1"])
    assert mapped.exit_code == 0, mapped.output
    with Run(tmp_path / "j.sqlite", create=False) as run:
        rows = run.to_pandas()
    entry = [e for e in rows["result"].iloc[1]["members"] if e["member"] == "ten"][0]
    assert math.isclose(entry["score"], 1 + (4.0 - 1) * 4 / 9)  # item i1: 2 * 2 = 4 on 1..10 -> 1 + 3 * 4/9 on 1..5
