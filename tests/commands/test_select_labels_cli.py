"""`scijudge select-labels`: a design over a judge's stored judgments, written as picks.csv."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pandas as pd
from typer.testing import CliRunner

from scijudge.records import JudgeResult
from scijudge.run.store import Run


def _store(path: Path, n: int = 40, *, probs: bool = True, model: str = "m/a") -> Path:
    rng = np.random.default_rng(1)
    with Run(path) as run:
        for i in range(n):
            sure = rng.uniform(0.2, 0.95)
            dist = {str(k): (sure if k == 3 else (1 - sure) / 4) for k in range(1, 6)}
            run.record(JudgeResult(item_id=f"i{i:02d}", judge="j", family="likert", spec_hash="h", model=model,
                                   status="ok", score=3.0 + (i % 3) - 1, probs=dist if probs else None))
    return path


def _cli(*args: str):
    from scijudge.cli import app

    return CliRunner().invoke(app, ["select-labels", *args])


def test_uncertainty_picks_have_probabilities_summing_to_the_budget(tmp_path):
    store = _store(tmp_path / "r.sqlite")
    out = tmp_path / "picks.csv"
    result = _cli("--run", str(store), "-j", "j", "--budget", "10", "--strategy", "uncertainty", "--seed", "3",
                  "--no-check", "--out", str(out))
    assert result.exit_code == 0, result.output
    picks = pd.read_csv(out)
    assert list(picks.columns[:3]) == ["item_id", "pi", "picked"] and len(picks) == 40
    assert abs(picks.pi.sum() - 10) < 1e-9 and (picks.pi > 0).all() and (picks.pi <= 1).all()
    assert set(picks.uncertainty_source) == {"probs"}
    # pi rises with the judge's rating variance (computed here by hand from the stored distributions)
    with Run(store, create=False) as run:
        frame = run.to_pandas().set_index("item_id")
    variance = {i: sum(float(k) ** 2 * p for k, p in d.items()) - sum(float(k) * p for k, p in d.items()) ** 2
                for i, d in frame.probs.items()}
    expected = pd.Series(variance).reindex(picks.item_id).to_numpy()
    assert np.corrcoef(picks.pi, np.sqrt(expected))[0, 1] > 0.99
    again = tmp_path / "again.csv"
    _cli("--run", str(store), "-j", "j", "--budget", "10", "--strategy", "uncertainty", "--seed", "3", "--no-check",
         "--out", str(again))
    assert again.read_text() == out.read_text(), "the same seed draws the same items"


def test_stratified_picks_draw_the_allocation_exactly(tmp_path):
    store = _store(tmp_path / "r.sqlite", probs=False)
    strata = tmp_path / "strata.csv"
    with strata.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["item_id", "stratum"])
        writer.writerows([(f"i{i:02d}", "small" if i < 10 else "big") for i in range(40)])
    out = tmp_path / "picks.csv"
    result = _cli("--run", str(store), "-j", "j", "--budget", "8", "--strategy", "stratified", "--strata", str(strata),
                  "--no-check", "--out", str(out))
    assert result.exit_code == 0, result.output
    picks = pd.read_csv(out)
    counts = picks[picks.picked].groupby("stratum").size().to_dict()
    assert counts == {"big": 6, "small": 2}  # proportional: 8 x 30/40 and 8 x 10/40
    assert np.allclose(picks.groupby("stratum").pi.first().to_dict()["big"], 6 / 30)


def test_no_design_runs_without_a_check(tmp_path):
    store = _store(tmp_path / "r.sqlite")
    out = tmp_path / "picks.csv"
    result = _cli("--run", str(store), "-j", "j", "--budget", "10", "--strategy", "uncertainty", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "uniform picks instead of uncertainty: a design runs only after a check on at least 10" in result.output
    picks = pd.read_csv(out)
    assert set(picks.design) == {"uniform"} and np.allclose(picks.pi, 10 / 40)


def test_bad_requests_get_one_line(tmp_path):
    store = _store(tmp_path / "r.sqlite", probs=False)
    out = tmp_path / "p.csv"
    cases = [
        (["--run", str(store), "-j", "nope", "--budget", "3", "--out", str(out)], "no judgments of judge 'nope'"),
        (["--run", str(store), "-j", "j", "--budget", "99", "--out", str(out)], "budget must be between 1 and the 40"),
        (["--run", str(store), "-j", "j", "--budget", "3", "--strategy", "stratified", "--out", str(out)], "needs strata"),
        (["--run", str(store), "-j", "j", "--budget", "3", "--strategy", "uncertainty", "--out", str(out)],
         "rating distributions"),
        (["--run", str(tmp_path / "missing.sqlite"), "-j", "j", "--budget", "3", "--out", str(out)], "not found"),
    ]
    for args, message in cases:
        result = _cli(*args)
        assert result.exit_code == 2 and message in result.output, (args, result.output)
        assert "Traceback" not in result.output
    assert not out.exists()


def test_plan_prints_labels_needed_per_design_and_auto_explains_its_choice(tmp_path):
    import json

    store = _store(tmp_path / "r.sqlite")
    labels = tmp_path / "pilot.jsonl"
    rng = np.random.default_rng(2)
    labels.write_text("".join(json.dumps({"item_id": f"i{i:02d}", "judge": "j",
                                          "score": float(np.clip(3 + (i % 3) - 1 + rng.integers(-1, 2), 1, 5))}) + "\n"
                              for i in range(20)))
    plan = tmp_path / "plan.csv"
    result = _cli("--run", str(store), "-j", "j", "--plan", "--target-width", "1.0", "--labels", str(labels),
                  "--out", str(plan))
    assert result.exit_code == 0, result.output
    table = pd.read_csv(plan)
    assert {"uniform", "human-only", "uncertainty"} <= set(table["design"]) and (table["n_pilot"] == 20).all()
    assert "Labels needed" in result.output
    # the sequential column: where the boundary of anytime.py, at the pilot's spread, first reaches the width
    from scijudge.estimation.anytime import labels_to_width

    row = table.set_index("design")
    y = np.array([json.loads(line)["score"] for line in labels.read_text().splitlines()])
    assert row.loc["human-only", "labels_sequential"] == labels_to_width(float(np.std(y)), 1.0, 0.1)
    assert row.loc["uniform", "labels_sequential"] >= row.loc["uniform", "labels_needed"]
    assert np.isnan(row.loc["uncertainty", "labels_sequential"])
    refused = _cli("--run", str(store), "-j", "j", "--plan", "--labels", str(labels))
    assert refused.exit_code == 2 and "--plan needs --target-width" in refused.output
    picks = tmp_path / "picks.csv"
    made = _cli("--run", str(store), "-j", "j", "--budget", "10", "--labels", str(labels), "--out", str(picks))
    assert made.exit_code == 0 and "note: auto:" in made.output, made.output
    same = _cli("--run", str(store), "-j", "j", "--budget", "10", "--out", str(store))
    assert same.exit_code == 2 and "is the run store" in same.output and Run(store, create=False)
