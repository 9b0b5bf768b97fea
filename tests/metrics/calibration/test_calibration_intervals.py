"""Every interval is computed on the values of its point estimate: continuous Spearman/Kendall intervals against an
independent item bootstrap on the raw values; linear-weighted κ against scikit-learn."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score

from scijudge.metrics.calibration import calibrate

JUDGE = "lematerial.synthesis.overall"


def _continuous(n: int = 150, seed: int = 4) -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    h = np.round(rng.uniform(1, 5, n) * 3) / 3  # means of three ratings: off the step grid
    j = np.clip(h + rng.normal(0, 0.8, n), 1, 5)
    rows = pd.DataFrame({"item_id": [f"m{i}" for i in range(n)], "judge": JUDGE, "part": "", "family": "likert",
                         "spec_hash": "s", "model": "m", "status": "ok", "score": j, "verdict": None,
                         "confidence": None, "probs": None, "source": ""})
    labels = pd.DataFrame({"item_id": [f"m{i}" for i in range(n)], "judge": JUDGE, "score": h})
    return rows, labels, j, h


@pytest.mark.slow
def test_continuous_rank_intervals_match_an_independent_raw_bootstrap() -> None:
    rows, labels, j, h = _continuous()
    row = calibrate(rows, labels, scale=(1, 5, 1, "continuous"), n_boot=2000, seed=1).per_rubric.iloc[0]
    assert row["spearman"] == pytest.approx(stats.spearmanr(j, h).statistic)
    assert row["kendall"] == pytest.approx(stats.kendalltau(j, h).statistic)
    rng = np.random.default_rng(123)  # another seed, another implementation: plain resampling of items
    draws = rng.integers(0, j.size, size=(2000, j.size))
    rho = np.array([stats.spearmanr(j[d], h[d]).statistic for d in draws])
    tau = np.array([stats.kendalltau(j[d], h[d]).statistic for d in draws])
    for name, reps in (("spearman", rho), ("kendall", tau)):
        lo, hi = np.percentile(reps, [2.5, 97.5])
        assert row[f"{name}_lo"] <= row[name] <= row[f"{name}_hi"]
        assert row[f"{name}_lo"] == pytest.approx(lo, abs=0.03) and row[f"{name}_hi"] == pytest.approx(hi, abs=0.03)


def test_linear_weighted_kappa_beside_quadratic() -> None:
    rng = np.random.default_rng(2)
    h = rng.integers(1, 6, 80).astype(float)
    j = np.clip(h + rng.integers(-1, 2, 80), 1, 5)
    rows = pd.DataFrame({"item_id": [f"q{i}" for i in range(80)], "judge": "yescieval.qa.correctness", "part": "",
                         "family": "likert", "spec_hash": "s", "model": "m", "status": "ok", "score": j,
                         "verdict": None, "confidence": None, "probs": None, "source": ""})
    labels = pd.DataFrame({"item_id": [f"q{i}" for i in range(80)], "judge": "yescieval.qa.correctness", "score": h})
    result = calibrate(rows, labels, n_boot=300)
    row = result.per_rubric.iloc[0]
    labels_1_5 = [1, 2, 3, 4, 5]
    assert row["kappa_linear"] == pytest.approx(cohen_kappa_score(h.astype(int), j.astype(int), labels=labels_1_5,
                                                                  weights="linear"))
    assert row["kappa_w"] == pytest.approx(cohen_kappa_score(h.astype(int), j.astype(int), labels=labels_1_5,
                                                             weights="quadratic"))
    assert row["kappa_linear_lo"] <= row["kappa_linear"] <= row["kappa_linear_hi"]
    # the bootstrap's table formula equals scikit-learn on a resample too
    from scijudge.metrics.tables import ordinal_stats

    table = np.zeros((5, 5))
    np.add.at(table, (h.astype(int) - 1, j.astype(int) - 1), 1)
    assert ordinal_stats(table, np.arange(1.0, 6.0), 1.0)["kappa_linear"] == pytest.approx(row["kappa_linear"])
