"""`scijudge cascade` on the bundled panel (the help's example): the cascade:NAME store that calibrate, export and
estimate read, escalated items abstaining with reason 'escalated', the picks file select-labels' readers take, the
thresholds file, the printed guarantee; one-line refusals. Plus the selective curve of `calibrate`."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from scijudge.cli import app
from scijudge.errors import InputError
from scijudge.estimation.select import PICK_COLUMNS, read_picks
from scijudge.run.store import Run

REPO = Path(__file__).resolve().parents[2]
LABELS = REPO / "datasets/yescieval_example/labels.jsonl"
ENV = {"COLUMNS": "200"}


@pytest.fixture(scope="module")
def jury_store(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("cascade")
    runner = CliRunner()
    panel, jury = base / "panel.sqlite", base / "jury.sqlite"
    ran = runner.invoke(app, ["import-judgments", str(REPO / "datasets/jury_example/panel.jsonl"), "--run", str(panel)])
    assert ran.exit_code == 0, ran.output
    ran = runner.invoke(app, ["jury", str(panel), "-m", "judge-a", "-m", "judge-b", "-m", "judge-c", "--method",
                              "majority", "--name", "panel", "--out", str(jury)])
    assert ran.exit_code == 0, ran.output
    return jury


@pytest.fixture(scope="module")
def example(jury_store: Path, tmp_path_factory) -> dict:
    """The help's example, run once: its outputs and what it printed."""
    base = tmp_path_factory.mktemp("example")
    out, picks, saved = base / "cascade.sqlite", base / "picks.csv", base / "thresholds.json"
    before = jury_store.read_bytes()
    ran = CliRunner().invoke(app, ["cascade", str(jury_store), "-m", "jury:panel", "--labels", str(LABELS),
                                   "--target", "0.6", "--tolerance", "1", "--risk", "0.2", "--name", "demo", "--out",
                                   str(out), "--save", str(saved), "--escalated", str(picks)], env=ENV)
    assert ran.exit_code == 0, ran.output
    return {"out": out, "picks": picks, "saved": saved, "output": ran.output, "unchanged": jury_store.read_bytes()
            == before, "jury": jury_store}


def test_the_help_example_writes_a_store_picks_and_thresholds(example: dict) -> None:
    out, picks, saved = example["out"], example["picks"], example["saved"]
    assert example["unchanged"]  # reading a store never modifies it
    text = " ".join(example["output"].split())
    assert "guarantee: with probability >= 0.8" in text and "decision rule:" in text and "coverage:" in text
    assert "cost per item" in text
    frame = Run(out, create=False).to_pandas()
    assert set(frame["model"]) == {"cascade:demo"} and len(frame) == 108  # 12 items x 9 rubrics
    escalated = frame[frame["status"] == "abstained"]
    assert len(escalated) and set(escalated["reason"]) == {"escalated"}
    ok = frame[frame["status"] == "ok"]
    assert ok["probs"].map(lambda p: isinstance(p, dict)).all() and ok["score"].notna().all()
    # the trusted judgments are the jury's own, unchanged
    jury = Run(example["jury"], create=False).to_pandas().set_index(["item_id", "judge"])
    mine = ok.set_index(["item_id", "judge"])
    assert (mine["score"] == jury.loc[mine.index, "score"]).all()
    # the queue is per (item, judge): only the judges no member trusted for that item
    raw = pd.read_csv(picks, dtype=str, keep_default_na=False)
    assert list(raw.columns) == [*PICK_COLUMNS, "judge", "part"]
    assert set(zip(raw["item_id"], raw["judge"])) == set(zip(escalated["item_id"], escalated["judge"]))
    assert len(raw) == len(escalated) and set(raw["design"]) == {"cascade-escalation"}
    queue = read_picks(picks, queue_ok=True)  # the viewer's labelling queue: one row per escalated unit
    assert set(zip(queue["item_id"], queue["judge"])) == set(zip(escalated["item_id"], escalated["judge"]))
    assert len(queue) == len(escalated) and queue["picked"].all()
    with pytest.raises(InputError, match="escalation queue"):
        read_picks(picks)
    doc = json.loads(saved.read_text())
    assert doc["format"] == "scijudge-cascade/1" and doc["members"][0]["member"] == "jury:panel"
    assert doc["risk_split"] == "whole" and doc["target"] == 0.6


@pytest.mark.parametrize("command", ["calibrate", "export"])
def test_calibrate_and_export_read_the_cascade_store(example: dict, command: str, tmp_path: Path) -> None:
    args = (["calibrate", "--labels", str(LABELS), "--run", str(example["out"]), "--n-boot", "0"]
            if command == "calibrate" else ["export", str(example["out"]), "--out", str(tmp_path / "e.jsonl")])
    read = CliRunner().invoke(app, args, env=ENV)
    assert read.exit_code == 0, read.output
    if command == "export":
        rows = [json.loads(line) for line in (tmp_path / "e.jsonl").read_text().splitlines()]
        assert len(rows) == 108 and {r["model"] for r in rows} == {"cascade:demo"}
    else:
        assert "cascade:demo" in read.output


def test_refusals_are_one_line(jury_store: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    base = ["cascade", str(jury_store), "--labels", str(LABELS), "--target", "0.6", "--name", "x"]
    cases = [
        (["-m", "jury:panel", "--out", str(jury_store)], "is the run store"),
        (["-m", "nobody", "--out", str(tmp_path / "o.sqlite")], "has no judgment"),
        (["-m", "jury:panel", "--out", str(tmp_path / "o.sqlite"), "--risk", "1.5"], "risk must be between"),
    ]
    panel = jury_store.parent / "panel.sqlite"
    cases.append((["-m", "jury:panel", "--out", str(tmp_path / "o.sqlite"), "--escalated", str(LABELS)], "--escalated"))
    cases.append((["-m", "judge-a", "--out", str(tmp_path / "o.sqlite")], "has no judgment"))
    for extra, message in cases:
        ran = runner.invoke(app, [*base, *extra], env=ENV)
        assert ran.exit_code == 2, ran.output
        assert message in ran.output and len([ln for ln in ran.output.splitlines() if ln.strip()]) == 1, ran.output
    no_probs = runner.invoke(app, ["cascade", str(panel), "-m", "judge-a", "--labels", str(LABELS), "--target", "0.6",
                                   "--name", "x", "--out", str(tmp_path / "p.sqlite")], env=ENV)
    assert no_probs.exit_code == 2 and "has no rating probabilities" in no_probs.output
    assert not (tmp_path / "o.sqlite").exists() and not (tmp_path / "p.sqlite").exists()


def test_calibrate_reports_the_selective_curve_with_the_guaranteed_point() -> None:
    from scijudge import calibrate

    # 40 judgments of one judge: confidence 0.99..0.60; the 30 most confident agree with the (single) rater,
    # the other 10 do not. Exact agreement of the top k: 1.0 for k <= 30, then 30/k.
    n = 40
    conf = np.linspace(0.99, 0.60, n)
    rows, labels = [], []
    for i in range(n):
        score = 3.0 if i < 30 else 4.0
        rows.append({"item_id": f"i{i:02d}", "judge": "yescieval.qa.correctness", "part": "", "family": "likert",
                     "spec_hash": "h", "model": "m", "status": "ok", "score": score, "verdict": None,
                     "probs": {f"{score:g}": float(conf[i]), "1": 0.0}})
        labels.append({"item_id": f"i{i:02d}", "judge": "yescieval.qa.correctness", "score": 3, "annotator": "a"})
    result = calibrate(pd.DataFrame(rows), pd.DataFrame(labels), scale=(1, 5, 1), n_boot=0)
    curve = result.selective
    assert list(curve["agreement"].iloc[:3]) == [1.0, 1.0, 1.0]
    last = curve.iloc[-1]
    assert last["coverage"] == 1.0 and last["agreement"] == pytest.approx(30 / 40)
    # target 0.8, risk 0.1: the sequence starts at n0 = 11 (0.8**11 = 0.086 <= 0.1 < 0.8**10), all agreeing, and
    # goes on while P(Bin(k, .8) >= agreeing) <= 0.1. At k = 30: 0.8**30 = 0.0012; past 30 only 30 agree:
    # k = 31: 0.8**31 + 31 * 0.2 * 0.8**30 = 0.0087; k = 32: 0.032; k = 33: 0.081 (<= 0.1); k = 34: 0.162 (stop).
    mark = curve[curve["guaranteed"]]
    assert len(mark) == 1 and int(mark["n_kept"].iloc[0]) == 33
    assert math.isclose(float(mark["threshold"].iloc[0]), conf[32])


def _verdict_rows(n: int = 40) -> tuple[pd.DataFrame, pd.DataFrame]:
    rows, labels = [], []
    for i in range(n):
        verdict = "Satisfied" if i < 30 else "Not_Satisfied"
        other = "Not_Satisfied" if verdict == "Satisfied" else "Satisfied"
        rows.append({"item_id": f"i{i:02d}", "judge": "rr.c1", "part": "", "family": "checklist", "spec_hash": "h",
                     "model": "m", "status": "ok", "score": None, "verdict": verdict,
                     "probs": {verdict: round(0.99 - i * 0.01, 2), other: round(0.01 + i * 0.01, 2)}})
        labels.append({"item_id": f"i{i:02d}", "judge": "rr.c1", "verdict": "Satisfied", "annotator": "a"})
    return pd.DataFrame(rows), pd.DataFrame(labels)


def test_calibrate_draws_the_selective_curve_of_a_verdict_judge() -> None:
    from scijudge import calibrate

    # calibrate lower-cases verdicts; the probs keep the judge's own case: the curve used to be empty
    rows, labels = _verdict_rows()
    curve = calibrate(rows, labels, n_boot=0).selective
    assert len(curve) == 40 and list(curve["agreement"].iloc[:30]) == [1.0] * 30
    # same walk as the Likert case above: 30 agree, then disagreements; n_kept 33 at target 0.8, risk 0.1
    assert int(curve.loc[curve["guaranteed"], "n_kept"].iloc[0]) == 33


def test_calibrate_takes_the_selective_target_risk_and_tolerance(tmp_path: Path) -> None:
    from scijudge import calibrate
    from scijudge.records import JudgeResult

    rows, labels = _verdict_rows()
    # target 0.5, risk 0.2: P(Bin(40, .5) >= 30) = 0.00111 <= 0.2 at every step: all 40 kept
    curve = calibrate(rows, labels, n_boot=0, selective={"target": 0.5, "risk": 0.2}).selective
    mark = curve[curve["guaranteed"]]
    assert int(mark["n_kept"].iloc[0]) == 40 and float(mark["target"].iloc[0]) == 0.5
    store = tmp_path / "v.sqlite"
    with Run(store) as run:
        run.claim_writer()
        run.record_many(JudgeResult(**{k: v for k, v in r.items() if k != "part"}, part="").model_dump(mode="json")
                        for r in rows.to_dict("records"))
    labels_path = tmp_path / "labels.jsonl"
    labels.to_json(labels_path, orient="records", lines=True)
    runner = CliRunner()
    base = ["calibrate", "--labels", str(labels_path), "--run", str(store), "--n-boot", "0"]
    ran = runner.invoke(app, [*base, "--selective-target", "0.5", "--selective-risk", "0.2",
                              "--selective-tolerance", "0"], env=ENV)
    assert ran.exit_code == 0, ran.output
    assert "guaranteed >= 0.5 at risk 0.2" in " ".join(ran.output.split())
    assert "at exact agreement" in " ".join(ran.output.split())
    loose = runner.invoke(app, [*base, "--selective-tolerance", "1"], env=ENV)
    assert loose.exit_code == 0 and "agreement within 1" in " ".join(loose.output.split()), loose.output
    bad = runner.invoke(app, [*base, "--selective-risk", "1.5"], env=ENV)
    assert bad.exit_code == 2 and "selective risk must be between 0 and 1" in bad.output
    assert len([ln for ln in bad.output.splitlines() if ln.strip()]) == 1


def test_estimate_refuses_the_queue_as_picks_and_names_the_trusted_subset(example: dict) -> None:
    runner = CliRunner()
    base = ["estimate", "--run", str(example["out"]), "--labels", str(LABELS)]
    refused = runner.invoke(app, [*base, "--picks", str(example["picks"])], env=ENV)
    assert refused.exit_code == 2 and "escalation queue" in refused.output
    assert len([ln for ln in refused.output.splitlines() if ln.strip()]) == 1, refused.output
    ran = runner.invoke(app, base, env=ENV)
    assert ran.exit_code == 0, ran.output
    text = " ".join(ran.output.split())
    assert "cascade:demo is a cascade: its judgments are the trusted subset" in text
    assert "escalated abstain and are left out" in text


def test_the_cli_result_is_the_same_for_every_seed(jury_store: Path, tmp_path: Path) -> None:
    # a majority jury's vote shares are full of ties (2/3 and 1 on every judge): no seed may change a threshold
    saved = []
    for seed in ("0", "3", "12345"):
        path = tmp_path / f"t{seed}.json"
        ran = CliRunner().invoke(app, ["cascade", str(jury_store), "-m", "jury:panel", "--labels", str(LABELS),
                                       "--target", "0.6", "--tolerance", "1", "--risk", "0.2", "--name", "s",
                                       "--seed", seed, "--out", str(tmp_path / f"o{seed}.sqlite"), "--save",
                                       str(path)], env=ENV)
        assert ran.exit_code == 0, ran.output
        doc = json.loads(path.read_text())
        doc.pop("seed")
        saved.append(doc)
    assert saved[0] == saved[1] == saved[2]
    assert any(t is not None for t in saved[0]["members"][0]["thresholds"].values())
