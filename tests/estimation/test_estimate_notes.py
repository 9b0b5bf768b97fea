"""Intervals that carry less information than they seem to are flagged or clipped (the ``note`` column), the
recommended estimate is never a PPI interval wider than the labels alone, design warnings count items once, and
estimate.csv/html carry the labels' provenance."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from scijudge.estimation import estimate
from scijudge.estimation.estimate import recommended_method
from scijudge.estimation.ppi import Estimate
from scijudge.records import JudgeResult
from scijudge.run.store import Run

JUDGE = "j"


def _row(table: pd.DataFrame, method: str, kind: str = "mean") -> pd.Series:
    return table[(table["method"] == method) & (table["kind"] == kind)].iloc[0]


def test_zero_width_few_units_and_clipping_to_the_scale() -> None:
    judgments = pd.DataFrame({"item_id": ["a", "b", "c"], "judge": JUDGE, "score": [5.0, 5.0, 3.0]})
    labels = pd.DataFrame({"item_id": ["a", "b"], "judge": JUDGE, "score": [5.0, 5.0]})
    table = estimate(judgments, labels, scale=(1, 5, 1))
    human = _row(table, "human-only")
    assert (human["lo"], human["hi"]) == (5.0, 5.0)
    assert "zero width: identical values" in human["note"] and "few units (n = 2 < 30)" in human["note"]
    judge = _row(table, "judge-only")  # mean 13/3, sd 0.943/sqrt(3): the normal interval passes 5
    raw_hi = 13 / 3 + 1.959963984540054 * np.std([5.0, 5.0, 3.0]) / math.sqrt(3)
    assert raw_hi > 5 and judge["hi"] == 5.0 and "clipped to the scale 1..5" in judge["note"]


def test_a_run_compared_with_itself_is_flagged_identical() -> None:
    rng = np.random.default_rng(0)
    ids = [f"i{k}" for k in range(60)]
    one = pd.DataFrame({"item_id": ids, "judge": JUDGE, "score": rng.integers(1, 6, 60).astype(float)})
    both = pd.concat([one.assign(source="A"), one.assign(source="B")], ignore_index=True)
    labels = pd.DataFrame({"item_id": ids[:40], "judge": JUDGE, "score": rng.integers(1, 6, 40).astype(float)})
    table = estimate(both, labels, compare=("A", "B"), scale=(1, 5, 1))
    diff = table[table["kind"] == "difference"]
    assert (diff["estimate"] == 0).all() and diff["note"].str.contains("identical inputs").all()
    assert not diff["recommended"].any()  # 0 by construction: no method is recommended


def test_recommendation_is_one_method_for_every_alpha_and_ties_go_to_the_simpler() -> None:
    rng = np.random.default_rng(5)
    ids = [f"i{k}" for k in range(400)]
    human = rng.integers(1, 6, 400).astype(float)
    score = np.clip(human + rng.choice([0.0, 1.0], 400, p=[0.6, 0.4]), 1, 5)
    judgments = pd.DataFrame({"item_id": ids, "judge": JUDGE, "score": score})
    chosen = set()
    for n in (40, 60, 120):
        labels = pd.DataFrame({"item_id": ids[:n], "judge": JUDGE, "score": human[:n]})
        picks = [tuple(estimate(judgments, labels, alpha=a, scale=(1, 5, 1)).query("recommended")["method"])
                 for a in (0.01, 0.05, 0.1, 0.2, 0.5)]
        assert len(set(picks)) == 1, (n, picks)
        chosen.add(picks[0])
    every = pd.DataFrame({"item_id": ids, "judge": JUDGE, "score": human})  # every unit labelled: ppi = human-only
    table = estimate(judgments, every, scale=(1, 5, 1)).set_index("method")
    assert table.loc["ppi", "estimate"] == pytest.approx(table.loc["human-only", "estimate"], abs=1e-12)
    assert bool(table.loc["human-only", "recommended"]) and not bool(table.loc["ppi", "recommended"])
    assert table.loc["judge-only", "design"].startswith("no labels")


def test_recommended_is_the_narrowest_of_ppi_ppi_cal_and_human_only() -> None:
    def e(width: float) -> Estimate:
        return Estimate(3.0, 3.0 - width / 2, 3.0 + width / 2, width / 4, 50, 950)

    assert recommended_method({"ppi": e(0.3), "human-only": e(0.3 * (1 + 1e-15))}) == "human-only"  # a tie
    assert recommended_method({"ppi": e(0.0), "human-only": e(0.0)}) is None  # zero width: 0 by construction
    assert recommended_method({"ppi": e(0.4), "ppi-cal": e(0.3), "human-only": e(0.5)}) == "ppi-cal"
    assert recommended_method({"ppi": e(0.37), "human-only": e(0.34)}) == "human-only"  # stratified, few labels
    assert recommended_method({"ppi": e(0.3), "ppi-cal": e(0.3), "human-only": e(0.5)}) == "ppi"
    nan = Estimate(math.nan, math.nan, math.nan, math.nan, 1, 9)
    assert recommended_method({"ppi": nan, "human-only": nan}) is None


def test_picks_warnings_count_items_once_however_many_models() -> None:
    ids = [f"i{k}" for k in range(40)]
    rng = np.random.default_rng(1)
    scores = rng.integers(1, 6, 40).astype(float)
    judgments = pd.concat([pd.DataFrame({"item_id": ids, "judge": JUDGE, "model": m, "score": scores})
                           for m in ("m1", "m2", "m3")], ignore_index=True)
    picks = pd.DataFrame({"item_id": ids, "pi": 0.5, "picked": [k < 20 for k in range(40)], "design": "uniform"})
    labels = pd.DataFrame({"item_id": ids[:15] + ids[30:], "judge": JUDGE, "score": scores[list(range(15)) +
                                                                                              list(range(30, 40))]})
    table = estimate(judgments, labels, picks=picks, scale=(1, 5, 1))
    assert table.attrs["design_notes"] == {"labels_outside_design": 10, "picked_unlabelled": 5,
                                           "items_outside_picks": 0}


def test_estimate_csv_and_html_carry_the_label_provenance(tmp_path) -> None:
    from scijudge.cli import app

    store = tmp_path / "run.sqlite"
    with Run(store) as run:
        for k in range(30):
            run.record(JudgeResult(item_id=f"i{k}", judge=JUDGE, family="likert", spec_hash="h", model="m",
                                   status="ok", score=float(1 + k % 5)))
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps({"item_id": f"i{k}", "judge": JUDGE, "score": float(1 + (k + 1) % 5),
                                          "source": "llm"}) + "\n" for k in range(20)))
    out = tmp_path / "est"
    result = CliRunner().invoke(app, ["estimate", "--run", str(store), "--labels", str(labels), "--scale", "1,5,1",
                                      "--out", str(out)], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    table = pd.read_csv(out / "estimate.csv")
    assert set(table["label_sources"]) == {"20 llm"}
    assert set(table["estimand"]) == {"mean model-made label rating"}
    page = (out / "estimate.html").read_text()
    assert "labels: 20 llm" in page and "not human ones" in page
    assert "recommended (the narrowest at alpha = 0.1 of ppi (PPI++)" in result.output


@pytest.mark.parametrize("method", ["ppi", "ppi-cal"])
def test_no_note_on_a_well_sized_row(method: str) -> None:
    rng = np.random.default_rng(2)
    y = rng.integers(1, 6, 400).astype(float)
    ids = [f"i{k}" for k in range(400)]
    judgments = pd.DataFrame({"item_id": ids, "judge": JUDGE, "score": np.clip(y + rng.integers(-1, 2, 400), 1, 5)})
    labels = pd.DataFrame({"item_id": ids[:100], "judge": JUDGE, "score": y[:100]})
    assert _row(estimate(judgments, labels, scale=(1, 5, 1)), method)["note"] == ""
