"""`estimate --picks`: labels chosen by `select-labels` are weighted by their design (active or stratified PPI)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import t as student_t
from typer.testing import CliRunner

from scijudge.estimation import active
from scijudge.records import JudgeResult
from scijudge.run.store import Run


def _world(tmp_path: Path, n: int = 120):
    """A judge whose error grows with its own uncertainty; human labels for every item (only picked ones used)."""
    rng = np.random.default_rng(5)
    truth = rng.integers(1, 6, n).astype(float)
    sure = rng.uniform(0.3, 0.95, n)
    store = tmp_path / "run.sqlite"
    with Run(store) as run:
        for i in range(n):
            score = float(np.clip(truth[i] + rng.normal(0.4, 1.2 * (1 - sure[i])), 1, 5))
            probs = {str(k): (sure[i] if k == round(score) else (1 - sure[i]) / 4) for k in range(1, 6)}
            run.record(JudgeResult(item_id=f"i{i:03d}", judge="j", family="likert", spec_hash="h", model="m/x",
                                   status="ok", score=score, probs=probs))
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps({"item_id": f"i{i:03d}", "judge": "j", "score": float(truth[i]),
                                          "source": "crowd"}) + "\n" for i in range(n)))
    return store, labels


def _cli(*args: str):
    from scijudge.cli import app

    return CliRunner().invoke(app, list(args), env={"COLUMNS": "250"})


def test_estimate_with_picks_equals_active_ppi_on_the_picked_labels(tmp_path):
    store, labels = _world(tmp_path)
    picks = tmp_path / "picks.csv"
    made = _cli("select-labels", "--run", str(store), "-j", "j", "--budget", "40", "--strategy", "uncertainty",
                "--seed", "1", "--no-check", "--out", str(picks))
    assert made.exit_code == 0, made.output
    out = tmp_path / "est"
    result = _cli("estimate", "--run", str(store), "--labels", str(labels), "--picks", str(picks), "--scale",
                  "1,5,1,continuous", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "labels: 120 crowd" in result.output and "items the design did not pick have labels" in result.output
    table = pd.read_csv(out / "estimate.csv")
    row = table[table.method == "ppi"].iloc[0]
    assert "uncertainty picks, active PPI" in row.design
    judge_only = table[table.method == "judge-only"].iloc[0]
    assert "active PPI" not in judge_only.design and judge_only.design.startswith("no labels")
    assert "ppi-cal" not in result.output.split("recommended")[1].split("\n")[0]  # the table has no ppi-cal row
    # independent: the same estimator on the raw arrays (scores and labels read back from the files)
    design = pd.read_csv(picks, dtype={"item_id": str})
    with Run(store, create=False) as run:
        scores = run.to_pandas().set_index("item_id")["score"]
    truth = {r["item_id"]: r["score"] for r in map(json.loads, labels.read_text().splitlines())}
    f = scores.reindex(design.item_id).to_numpy()
    picked = design.picked.to_numpy(bool)
    y = np.array([truth[i] for i in design.item_id[picked]])
    expected = active.active_ppi_mean(f, picked, y, design.pi.to_numpy(), alpha=0.05)
    # the small-sample rule: se * sqrt(n / (n - 1)) and t with Kish's effective labels - 1 df
    n, w = picked.sum(), np.where(picked, 1 / design.pi.to_numpy(), 0.0)
    half = student_t.ppf(0.975, w.sum() ** 2 / np.sum(w**2) - 1) * expected.se * np.sqrt(n / (n - 1))
    assert abs(row.estimate - expected.estimate) < 1e-9 and abs(row.lo - (expected.estimate - half)) < 1e-9
    assert row.n_labeled == picked.sum()


def test_stratified_picks_use_stratified_ppi(tmp_path):
    store, labels = _world(tmp_path)
    strata = tmp_path / "strata.csv"
    with strata.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["item_id", "stratum"])
        writer.writerows([(f"i{i:03d}", "a" if i % 3 else "b") for i in range(120)])
    picks = tmp_path / "picks.csv"
    assert _cli("select-labels", "--run", str(store), "-j", "j", "--budget", "30", "--strategy", "stratified",
                "--strata", str(strata), "--no-check", "--out", str(picks)).exit_code == 0
    out = tmp_path / "est"
    result = _cli("estimate", "--run", str(store), "--labels", str(labels), "--picks", str(picks), "--scale",
                  "1,5,1,continuous", "--out", str(out))
    assert result.exit_code == 0, result.output
    row = pd.read_csv(out / "estimate.csv").query("method == 'ppi'").iloc[0]
    assert row.design == "stratified picks, stratified PPI++, t interval" and row.n_labeled == 30


def test_a_bad_picks_file_is_one_line(tmp_path):
    store, labels = _world(tmp_path, 20)
    picks = tmp_path / "picks.csv"
    picks.write_text("item_id,pi,picked\ni000,1.5,true\n")
    result = _cli("estimate", "--run", str(store), "--labels", str(labels), "--picks", str(picks))
    assert result.exit_code == 2 and "picks.csv:2, field 'pi': pi must be in (0, 1], got 1.5" in result.output
