"""A common confidence scale for a cascade's members: each member's confidence mapped to its probability of
agreeing with humans, fitted on a split of the labelled units that the test then never uses (sample splitting:
the fitted maps are fixed before the test's labels are seen, so the fixed-sequence guarantee holds unchanged).

Platt scaling (scikit-learn's logistic regression of agreement on the logit of the confidence) because the map
must be non-decreasing in the member's own confidence -- the thresholds chosen on the common scale are then
thresholds on each member's own confidence, which is what ``judge --cascade`` compares -- and because two
parameters fit well on a few hundred labels and add no ties: in the simulation of ``benchmarks/bench_cascade.py``
it covered 0.84 of the units against isotonic regression's 0.74, at the same guarantee.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

MIN_FIT = 10
"""A member with fewer fitting units gets a constant scale (its agreement rate)."""
C = 1.0
"""scikit-learn's inverse regularisation: a fit on a few separable units predicts no certainty."""


def fit_units(units: Sequence[tuple[str, str, str]], share: float) -> np.ndarray:
    """Which units fit the calibration: a hash of (item, judge, part) below ``share`` -- fixed before any label is
    seen, and the same on every run (no seed enters a cascade's result)."""
    out = np.zeros(len(units), bool)
    for i, (item, judge, part) in enumerate(units):
        digest = hashlib.sha256(f"fit\x1f{item}\x1f{judge}\x1f{part}".encode()).hexdigest()
        out[i] = int(digest[:13], 16) / 16 ** 13 < share
    return out


def calibrated_scale(confidence: np.ndarray, agree: np.ndarray, fit: np.ndarray) -> np.ndarray | None:
    """K x N: each member's confidence through its logistic fit of agreement on the ``fit`` units (NaN where it
    has no confidence); None when no member has ``MIN_FIT`` fitting units (the caller then tests on every label).
    A member with too few fitting units, or whose fit does not rise with its confidence, gets a constant (its
    fitting agreement rate): one tie group, still non-decreasing."""
    conf = np.asarray(confidence, float)
    agr = np.asarray(agree, float)
    trains = [np.isfinite(conf[k]) & fit & np.isfinite(agr[k]) for k in range(conf.shape[0])]
    if not any(t.sum() >= MIN_FIT for t in trains):
        return None
    out = np.full(conf.shape, np.nan)
    for k, train in enumerate(trains):
        has = np.isfinite(conf[k])
        y = agr[k, train] > 0.5
        rate = (y.sum() + 1) / (y.size + 2)
        z = _logit(conf[k])
        if train.sum() < MIN_FIT or y.all() or not y.any():
            out[k, has] = rate
            continue
        intercept, slope = logistic_fit(z[train], y)
        if slope <= 0:
            out[k, has] = rate
            continue
        out[k, has] = 1.0 / (1.0 + np.exp(-(intercept + slope * z[has])))
    return out


def logistic_fit(x: np.ndarray, y: np.ndarray, *, c: float | None = None, steps: int = 50) -> tuple[float, float]:
    """(intercept, slope) of a one-feature logistic regression with scikit-learn's L2 penalty on the slope
    (``slope**2 / (2 C)``), by Newton's method: written out because it is two parameters, and scikit-learn's
    general solver cost ~200x more per fit on this machine (a cascade fits one per member and judge, and its
    benchmark thousands). Checked against scikit-learn's ``LogisticRegression`` in the tests."""
    c = C if c is None else c
    design = np.column_stack([np.ones(x.size), np.asarray(x, float)])
    target = np.asarray(y, float)
    w = np.zeros(2)
    penalty = np.diag([0.0, 1.0 / c])
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(design @ w)))
        grad = design.T @ (p - target) + penalty @ w
        hess = (design * (p * (1 - p))[:, None]).T @ design + penalty + 1e-12 * np.eye(2)
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-10:
            break
    return float(w[0]), float(w[1])


def _logit(p: np.ndarray) -> np.ndarray:
    c = np.clip(np.nan_to_num(p, nan=0.5), 1e-6, 1 - 1e-6)
    return np.asarray(np.log(c / (1 - c)), dtype=float)
