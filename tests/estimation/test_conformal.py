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


def _frames(rng: np.random.Generator, n: int, n_labeled: int, with_probs: bool, reps: int):
    """``reps`` independent simulations side by side as models rep0, rep1, ... (item ids ``<rep>:<i>``)."""
    y = rng.choice(LEVELS, (reps, n), p=PROBS)
    centre = y + 0.5 + rng.normal(0.0, 0.7, (reps, n))
    score = np.clip(np.rint(centre), 1, 5)
    probs = [None] * (reps * n)
    if with_probs:
        weights = np.exp(-((LEVELS[None, :] - centre.reshape(-1, 1)) ** 2) / 0.8)
        weights /= weights.sum(axis=1, keepdims=True)
        probs = [{f"{v:g}": float(w) for v, w in zip(LEVELS, row)} for row in weights]
    ids = [f"{r}:{i}" for r in range(reps) for i in range(n)]
    rows = pd.DataFrame({"item_id": ids, "judge": JUDGE, "part": "", "family": "likert", "spec_hash": "h",
                         "model": np.repeat([f"rep{r}" for r in range(reps)], n), "status": "ok",
                         "score": score.ravel(), "verdict": None, "confidence": None, "probs": probs})
    labeled = np.concatenate([r * n + rng.choice(n, n_labeled, replace=False) for r in range(reps)])
    labels = pd.DataFrame({"item_id": [ids[k] for k in labeled], "judge": JUDGE, "score": y.ravel()[labeled]})
    return rows, labels, pd.Series(y.ravel(), index=ids)


@pytest.mark.slow
@pytest.mark.parametrize(("with_probs", "reps", "n"), [(False, 40, 1000), (True, 12, 600)])
def test_sets_reach_nominal_coverage_on_held_out_items(with_probs: bool, reps: int, n: int) -> None:
    alpha = 0.1
    judgments, labels, truth = _frames(np.random.default_rng(1 + with_probs), n, 150, with_probs, reps)
    sets, summary = conformal(judgments, labels, alpha=alpha, n_splits=20)
    assert len(summary) == reps and set(summary["n_calibration"]) == {150}
    assert set(summary["nonconformity"]) == {"probs" if with_probs else "abs-residual"}
    human = truth[sets["item_id"]].to_numpy()  # the simulation knows the human score of every item
    inside = ((sets["set_lo"] <= human) & (human <= sets["set_hi"])).to_numpy()
    some = slice(0, None, 37)  # the listed set agrees with its bounds (sets of scale points are contiguous)
    assert [f"{h:g}" in s.split(";") for h, s in zip(human[some], sets["set"][some])] == list(inside[some])
    held_out = sets["human"].isna().to_numpy()
    coverages = pd.Series(inside[held_out]).groupby(sets["model"].to_numpy()[held_out]).mean()
    # marginal guarantee: mean coverage >= 1 - alpha, up to the sampling error of the reps
    se = coverages.std(ddof=1) / math.sqrt(reps)
    assert coverages.mean() >= 1 - alpha - 2 * se - 0.005, (coverages.mean(), se)
    assert coverages.mean() < 0.99  # informative sets, not the whole scale
    assert abs(summary["coverage_holdout"].mean() - coverages.mean()) < 0.03


def test_split_coverage_of_continuous_scores_is_close_to_nominal() -> None:
    scores = np.random.default_rng(3).normal(size=400)
    coverage, se, n_holdout = split_coverage(np.abs(scores), 0.2, n_splits=200, seed=1)
    # exact for continuous scores: E[coverage] = ceil(201 * 0.8) / 201
    assert n_holdout == 200
    assert coverage == pytest.approx(math.ceil(201 * 0.8) / 201, abs=3 * se + 0.002)
