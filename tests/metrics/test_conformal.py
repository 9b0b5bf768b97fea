"""Split-conformal sets of human scores: the threshold against numpy and by hand, coverage on held-out labels."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from scijudge.estimation import conformal
from scijudge.estimation.conformal import conformal_quantile, split_coverage

JUDGE = "yescieval.qa.correctness"
LEVELS = np.arange(1.0, 6.0)
PROBS = np.array([0.05, 0.15, 0.30, 0.30, 0.20])


def test_threshold_by_hand_and_against_numpy() -> None:
    scores = np.array([0.7, 0.1, 0.9, 0.3, 0.5, 0.2, 1.0, 0.4, 0.8, 0.6])
    # n = 10, alpha = 0.2: the ceil(11 * 0.8) = 9th smallest score
    assert conformal_quantile(scores, 0.2) == 0.9
    assert conformal_quantile(scores[:5], 0.1) == math.inf  # ceil(6 * 0.9) = 6 > 5 scores
    rng = np.random.default_rng(0)
    for n, alpha in ((50, 0.1), (151, 0.05), (999, 0.2)):
        values = rng.exponential(size=n)
        level = math.ceil((n + 1) * (1 - alpha)) / n
        # the k-th smallest is the inverted-CDF quantile at k / n
        assert conformal_quantile(values, alpha) == np.quantile(values, level, method="inverted_cdf")


def test_threshold_matches_crepes() -> None:
    crepes = pytest.importorskip("crepes")  # the dev extra installs it
    rng = np.random.default_rng(1)
    for n, alpha in ((50, 0.1), (151, 0.05), (998, 0.2), (20, 0.1)):  # (n + 1)(1 - alpha) not a whole number:
        residuals = rng.exponential(size=n)  # crepes computes it in floating point, so 1000 * 0.8 lands on 801
        interval = crepes.ConformalRegressor().fit(residuals).predict_int(np.array([0.0]), confidence=1 - alpha)
        assert conformal_quantile(residuals, alpha) == pytest.approx(interval[0, 1], rel=1e-12)


def _frames(rng: np.random.Generator, n: int, n_labeled: int, with_probs: bool):
    y = rng.choice(LEVELS, n, p=PROBS)
    centre = y + 0.5 + rng.normal(0.0, 0.7, n)
    score = np.clip(np.rint(centre), 1, 5)
    probs = [None] * n
    if with_probs:
        weights = np.exp(-((LEVELS[None, :] - centre[:, None]) ** 2) / 0.8)
        weights /= weights.sum(axis=1, keepdims=True)
        probs = [{f"{v:g}": float(w) for v, w in zip(LEVELS, row)} for row in weights]
    rows = pd.DataFrame({"item_id": [f"i{i}" for i in range(n)], "judge": JUDGE, "part": "", "family": "likert",
                         "spec_hash": "h", "model": "m", "status": "ok", "score": score, "verdict": None,
                         "confidence": None, "probs": probs})
    labeled = rng.choice(n, n_labeled, replace=False)
    labels = pd.DataFrame({"item_id": [f"i{i}" for i in labeled], "judge": JUDGE, "score": y[labeled]})
    return rows, labels, y


@pytest.mark.parametrize(("with_probs", "reps", "n"), [(False, 40, 1000), (True, 12, 600)])
def test_sets_reach_nominal_coverage_on_held_out_items(with_probs: bool, reps: int, n: int) -> None:
    rng = np.random.default_rng(1 + with_probs)
    alpha, coverages, reported = 0.1, [], []
    for _ in range(reps):
        judgments, labels, y = _frames(rng, n, 150, with_probs)
        sets, summary = conformal(judgments, labels, alpha=alpha, n_splits=20)
        held_out = sets["human"].isna().to_numpy()  # the simulation knows their human scores
        human = y[sets["item_id"].str.slice(1).astype(int).to_numpy()]
        inside = ((sets["set_lo"] <= human) & (human <= sets["set_hi"])).to_numpy()
        some = slice(0, None, 37)  # the listed set agrees with its bounds (sets of scale points are contiguous)
        assert [f"{h:g}" in s.split(";") for h, s in zip(human[some], sets["set"][some])] == list(inside[some])
        coverages.append(np.mean(np.array(inside)[held_out]))
        reported.append(summary["coverage_holdout"].iloc[0])
        assert summary["nonconformity"].iloc[0] == ("probs" if with_probs else "abs-residual")
        assert summary["n_calibration"].iloc[0] == 150
    # marginal guarantee: mean coverage >= 1 - alpha, up to the sampling error of the reps
    se = np.std(coverages, ddof=1) / math.sqrt(reps)
    assert np.mean(coverages) >= 1 - alpha - 2 * se - 0.005, (np.mean(coverages), se)
    assert np.mean(coverages) < 0.99  # informative sets, not the whole scale
    assert abs(np.mean(reported) - np.mean(coverages)) < 0.03


def test_split_coverage_of_continuous_scores_is_close_to_nominal() -> None:
    scores = np.random.default_rng(3).normal(size=400)
    coverage, se, n_holdout = split_coverage(np.abs(scores), 0.2, n_splits=200, seed=1)
    # exact for continuous scores: E[coverage] = ceil(201 * 0.8) / 201
    assert n_holdout == 200
    assert coverage == pytest.approx(math.ceil(201 * 0.8) / 201, abs=3 * se + 0.002)
