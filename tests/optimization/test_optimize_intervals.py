"""Optimization results carry 95% intervals for the held-out statistics and warn below 30 test units."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from scijudge.optimization import optimize, recipe_from_dict, run_experiment
from scijudge.optimization._evaluate import _item_bootstrap
from scijudge.testing.scripted import scripted_lm
from scijudge.testing.toy_judge import toy_setup

REPO = Path(__file__).resolve().parents[2]


def _recipe(name: str) -> Any:
    data = tomllib.loads((REPO / "optimizers" / f"{name}.toml").read_text(encoding="utf-8"))
    data["settings"] = {**data["settings"], "breadth": 2, "depth": 1, "num_threads": 1}
    data["budget"] = {"max_lm_calls": 400}
    data["split"] = {**data["split"], "seed": 3}
    return recipe_from_dict(data, source=f"{name}.toml")


def test_score_interval_equals_an_independent_item_bootstrap() -> None:
    rng = np.random.default_rng(0)
    items = [f"i{k // 2}" for k in range(60)]  # two units per item, resampled together
    scores = list(rng.uniform(0, 1, 60))
    lo, hi = _item_bootstrap(items, scores, 4000, seed=1)
    per_item = np.array(scores).reshape(30, 2).sum(axis=1)
    draws = np.random.default_rng(9).integers(0, 30, size=(4000, 30))
    means = per_item[draws].sum(axis=1) / 60
    assert lo == pytest.approx(np.percentile(means, 2.5), abs=0.01)
    assert hi == pytest.approx(np.percentile(means, 97.5), abs=0.01)


@pytest.mark.slow
def test_experiment_table_has_after_intervals_and_small_tests_warn(tmp_path: Path) -> None:
    spec, items, labels, world = toy_setup()
    lm = scripted_lm(world.respond)
    frame = run_experiment([_recipe("copro")], [lm], judge=spec, items=items, labels=labels, out=tmp_path,
                           n_boot=200)
    for stat in ("exact", "score"):
        for column in (f"{stat}_after_lo", f"{stat}_after_hi"):
            assert column in frame.columns
        finite = frame[frame[f"{stat}_after_lo"].notna()]
        assert len(finite) == len(frame)
        assert (finite[f"{stat}_after_lo"] <= finite[f"{stat}_after"] + 1e-12).all()
        assert (finite[f"{stat}_after"] <= finite[f"{stat}_after_hi"] + 1e-12).all()
    result = optimize(spec, items, labels, scripted_lm(world.respond), _recipe("copro"), n_boot=100)
    assert result.after["n_units"] < 30
    assert any("fewer than 30" in note for note in result.notes)
    assert result.summary()["exact_after_lo"] <= result.summary()["exact_after"] <= result.summary()["exact_after_hi"]


def test_progress_line_reports_candidates_calls_and_best_so_far() -> None:
    from scijudge.optimization._budget import Budget
    from scijudge.optimization._judge_metrics import Ledger
    from scijudge.optimization._progress import progress_text

    budget, ledger = Budget(max_calls=400), Ledger()
    budget.calls = 41
    for cid, scores in (("a", [0.5, 1.0]), ("b", [0.25])):
        ledger.register(cid, {}, 0)
        for k, value in enumerate(scores):
            ledger.record(cid, f"k{k}", value)
    text = progress_text()
    assert "2 candidate(s) tried" in text and "41 of 400 LM calls" in text and "best so far 0.750" in text
