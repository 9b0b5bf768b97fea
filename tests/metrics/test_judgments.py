"""``Judgments``: run stores read once, one rule for stores that disagree on a scale, and the Python verbs that take
paths as the commands do."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from scijudge.errors import InputError
from scijudge.metrics.frames import Judgments
from scijudge.records import JudgeResult
from scijudge.run.store import Run

JUDGE = "t.quality"
REPO = Path(__file__).resolve().parents[2]


def _store(path: Path, model: str, scores: dict[str, float], scale: object = None) -> Path:
    with Run(path) as run:
        for item, score in scores.items():
            run.record(JudgeResult(item_id=item, judge=JUDGE, family="likert", spec_hash="h", model=model,
                                   status="ok", score=score))
        if scale is not None:
            run.set_meta(scales={JUDGE: scale})
    return path


def _labels(path: Path, scores: dict[str, float]) -> Path:
    path.write_text("".join(json.dumps({"item_id": i, "judge": JUDGE, "score": s, "annotator": "h"}) + "\n"
                            for i, s in scores.items()))
    return path


def test_read_names_sources_keeps_scales_as_stored_and_flags_variants(tmp_path):
    a = _store(tmp_path / "a.sqlite", "m1", {"q1": 4, "q2": 5, "q1::cohesion::extreme": 1}, "1,5,1")
    (tmp_path / "x").mkdir()
    b = _store(tmp_path / "x" / "a.sqlite", "m2", {"q1": 3}, [1.0, 5.0, 1.0, "continuous"])
    read = Judgments.read([a, b])
    assert read.sources == (str(a), str(b))  # stems collide: whole paths
    assert read.scales == {str(a): {JUDGE: "1,5,1"}, str(b): {JUDGE: [1.0, 5.0, 1.0, "continuous"]}}
    assert read.paths == {str(a): a, str(b): b}
    assert read.variant.tolist() == [False, False, True, False]
    assert sorted(read.originals()["item_id"]) == ["q1", "q1", "q2"]
    assert set(read.frame["source"]) == {str(a), str(b)}
    assert read.recorded_scales() == {JUDGE: (1.0, 5.0, 1.0, True)}
    assert Judgments.read(read) is read
    assert Judgments.read(a).sources == ("a",)
    with pytest.raises(InputError, match="no judgment in the runs is by a judge matching"):
        read.only(["other.*"])
    assert len(read.only(["t"]).frame) == 4  # a dotted prefix
    with pytest.raises(InputError, match="run store not found"):
        Judgments.read([a, tmp_path / "missing.sqlite"])


def test_a_minimal_frame_is_completed_and_kept():
    read = Judgments.read(pd.DataFrame({"item_id": ["q1"], "judge": [JUDGE], "score": [3.0]}))
    assert read.frame.loc[0, "status"] == "ok" and read.frame.loc[0, "source"] == "" and read.scales == {}


@pytest.mark.slow
def test_estimate_is_the_same_for_any_order_of_runs_or_refuses_in_one_line(tmp_path):
    from scijudge.cli import app

    rng = np.random.default_rng(0)
    items = [f"q{i:02d}" for i in range(40)]
    human = {i: float(rng.integers(1, 6)) for i in items}
    labels = _labels(tmp_path / "labels.jsonl", {i: human[i] for i in items[:20]})
    five = _store(tmp_path / "five.sqlite", "m1", {i: float(np.clip(human[i] + rng.integers(-1, 2), 1, 5))
                                                   for i in items}, "1,5,1")
    same = _store(tmp_path / "same.sqlite", "m2", {i: float(np.clip(human[i] + 1, 1, 5)) for i in items}, [1, 5, 1])
    ten = _store(tmp_path / "ten.sqlite", "m2", {i: 2 * human[i] for i in items}, "0,10,1")
    runner = CliRunner()

    def estimate(*runs: Path) -> tuple[int, str, str]:
        out = tmp_path / f"out_{'_'.join(r.stem for r in runs)}"
        args = ["estimate", "--labels", str(labels), "--out", str(out)]
        for run in runs:
            args += ["--run", str(run)]
        result = runner.invoke(app, args)
        table = ""
        if result.exit_code == 0:
            frame = pd.read_csv(out / "estimate.csv")
            table = frame.sort_values(["judge", "model", "group", "method"]).to_csv(index=False)
        return result.exit_code, table, result.output

    code_ab, table_ab, _ = estimate(five, same)
    code_ba, table_ba, _ = estimate(same, five)
    assert code_ab == code_ba == 0 and table_ab == table_ba and "ppi" in table_ab
    code_ab, _, said_ab = estimate(five, ten)
    code_ba, _, said_ba = estimate(ten, five)
    assert code_ab == code_ba == 2  # bad input
    line = [s for s in said_ab.splitlines() if "different scales" in s]
    assert len(line) == 1 and "1..5 step 1 (run 'five'); 0..10 step 1 (run 'ten')" in line[0]
    assert line == [s for s in said_ba.splitlines() if "different scales" in s]
    # an explicit scale for the judge settles it, as the message says
    result = runner.invoke(app, ["estimate", "--labels", str(labels), "--run", str(ten), "--run", str(five),
                                 "--scale", f"{JUDGE}=0,10,1"])
    assert result.exit_code == 0, result.output


@pytest.mark.slow
def test_the_python_verbs_take_paths_as_the_commands_do(tmp_path, monkeypatch):
    import scijudge
    from scijudge.cli import app

    monkeypatch.chdir(tmp_path)
    labels = str(REPO / "datasets/yescieval_example/labels.jsonl")
    runner = CliRunner()
    assert runner.invoke(app, ["import-judgments", str(REPO / "datasets/jury_example/panel.jsonl"),
                               "--run", "panel.sqlite"]).exit_code == 0
    assert runner.invoke(app, ["jury", "panel.sqlite", "-m", "judge-a", "-m", "judge-b", "-m", "judge-c",
                               "--method", "majority", "--name", "panel", "--out", "jury.sqlite"]).exit_code == 0
    by_path = scijudge.calibrate("panel.sqlite", labels, n_boot=0)
    by_frame = scijudge.calibrate(Run("panel.sqlite", create=False).to_pandas().assign(source="panel"),
                                  scijudge.load_labels(labels), n_boot=0,
                                  run_scales=Judgments.read("panel.sqlite").scales)
    pd.testing.assert_frame_equal(by_path.leaderboard, by_frame.leaderboard)
    estimated = scijudge.estimate("panel.sqlite", labels)
    assert set(estimated["model"]) == {"judge-a", "judge-b", "judge-c"} and estimated["estimate"].notna().all()
    cascaded = scijudge.cascade("jury.sqlite", labels, members=["jury:panel"], target=0.6, tolerance=1, risk=0.2,
                                name="demo")
    assert cascaded.decisions["trusted"].sum() == 79  # what `scijudge cascade` prints on the same files ("79 trusted")
