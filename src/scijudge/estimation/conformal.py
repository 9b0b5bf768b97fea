"""Split-conformal sets of plausible human scores for each judgment, calibrated on the labelled items.

Nonconformity: ``|human - judge score|`` for plain scores (the set is every scale point within ``q`` of the
score), or ``1 - p(human)`` when the judgment stores a rating distribution ``probs`` (the LAC rule of
Sadinle, Lei & Wasserman 2019: every scale point whose probability is at least ``1 - q``). ``q`` is the
``ceil((n + 1)(1 - alpha))``-th smallest calibration score, which gives coverage >= 1 - alpha on exchangeable
new items. Hand-written (a sorted array and an index): ``mapie``/``crepes`` fit scikit-learn-style learners we do not
have here; the tests check the threshold against ``crepes.ConformalRegressor`` (dev extra),
``numpy.quantile(method="inverted_cdf")`` and a hand-computed case, and coverage on held-out labels.
"""

from __future__ import annotations

import math

import numpy as np


def _rank(n: int, alpha: float) -> int:
    """``ceil((n + 1)(1 - alpha))``, immune to float noise such as 1000 * 0.8 = 800.0000000000001."""
    return math.ceil((n + 1) * (1.0 - alpha) - 1e-9)


def conformal_quantile(scores: np.ndarray, alpha: float) -> float:
    """The split-conformal threshold: ``inf`` (every value plausible) when there are too few calibration items."""
    scores = np.sort(np.asarray(scores, dtype=float).ravel())
    n = scores.size
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    rank = _rank(n, alpha)
    return math.inf if rank > n else float(scores[rank - 1])


def residual_scores(human: np.ndarray, judge: np.ndarray) -> np.ndarray:
    """Nonconformity of plain scores: the absolute difference."""
    return np.abs(np.asarray(human, dtype=float) - np.asarray(judge, dtype=float))


def probability_scores(human_index: np.ndarray, probs: np.ndarray) -> np.ndarray:
    """Nonconformity of a rating distribution (rows over the scale points): one minus the human score's probability."""
    probs = np.asarray(probs, dtype=float)
    return 1.0 - probs[np.arange(probs.shape[0]), np.asarray(human_index, dtype=int)]


def residual_sets(judge: np.ndarray, values: np.ndarray, q: float) -> np.ndarray:
    """Boolean (judgments × scale points): the scale points within ``q`` of each judge score."""
    return np.abs(values[None, :] - np.asarray(judge, dtype=float)[:, None]) <= q + 1e-9


def probability_sets(probs: np.ndarray, q: float) -> np.ndarray:
    """Boolean (judgments × scale points): the points whose probability is at least ``1 - q``."""
    return 1.0 - np.asarray(probs, dtype=float) <= q + 1e-9


def split_coverage(scores: np.ndarray, alpha: float, n_splits: int = 50, seed: int = 0,
                   calibration_share: float = 0.5) -> tuple[float, float, int]:
    """Mean held-out coverage over random calibration/held-out splits of the labelled items.

    Returns (coverage, its standard error over splits, held-out items per split); the set of a held-out
    item covers its human score exactly when its nonconformity score is at most the threshold.
    """
    scores = np.asarray(scores, dtype=float).ravel()
    n = scores.size
    n_cal = int(round(n * calibration_share))
    if n_cal < 1 or n - n_cal < 1:
        return math.nan, math.nan, 0
    rng = np.random.default_rng(seed)
    order = np.argsort(rng.random((n_splits, n)), axis=1)
    cal = np.sort(scores[order[:, :n_cal]], axis=1)
    rank = _rank(n_cal, alpha)
    threshold = np.full(n_splits, math.inf) if rank > n_cal else cal[:, rank - 1]
    covered = scores[order[:, n_cal:]] <= threshold[:, None] + 1e-9
    per_split = covered.mean(axis=1)
    se = float(per_split.std(ddof=1) / math.sqrt(n_splits)) if n_splits > 1 else math.nan
    return float(per_split.mean()), se, n - n_cal
