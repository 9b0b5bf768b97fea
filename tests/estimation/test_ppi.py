"""PPI++ formulas: a hand-computed case, ppi-python and statsmodels cross-checks, and coverage on simulated truth."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from scijudge.estimation.ppi import classical_mean, difference, labels_needed, power_tuning, ppi_mean

LEVELS = np.arange(1.0, 6.0)
PROBS = np.array([0.05, 0.15, 0.30, 0.30, 0.20])
TRUTH = float(LEVELS @ PROBS)  # 3.45: the mean human score of the simulated population


def _simulate(rng: np.random.Generator, n_items: int = 2000, n_labeled: int = 150, bias: float = 0.5):
    y = rng.choice(LEVELS, n_items, p=PROBS)
    f = y + bias + rng.normal(0.0, 0.6, n_items)
    labeled = np.zeros(n_items, dtype=bool)
    labeled[rng.choice(n_items, n_labeled, replace=False)] = True
    return y, f, labeled


def test_hand_computed_plain_ppi() -> None:
    y, f, f_u = np.array([1.0, 2.0, 3.0, 4.0]), np.array([2.0, 2.0, 4.0, 5.0]), np.array([3.0, 5.0, 4.0, 4.0])
    est = ppi_mean(y, f, f_u, alpha=0.05, lam=1.0)
    # mean(f_u) = 4; rectifier y - f = [-1, 0, -1, -1], mean -0.75 -> 3.25
    assert est.estimate == pytest.approx(3.25)
    # Var(f_u) = 0.5 (ddof 0), Var(rectifier) = 0.1875 -> se^2 = 0.5/4 + 0.1875/4 = 0.171875
    assert est.se == pytest.approx(math.sqrt(0.171875))
    assert est.hi - est.lo == pytest.approx(2 * 1.959963984540054 * math.sqrt(0.171875))
    # lam = Cov(y, f) / ((1 + n/N) Var(f pooled, ddof 1)): centred products sum to 5.5, so Cov = 5.5/4;
    # the 8 pooled judge scores (mean 3.625) have squared deviations summing to 9.875, so Var = 9.875/7
    assert power_tuning(y, f, f_u) == pytest.approx((5.5 / 4) / (2 * 9.875 / 7))


def test_matches_ppi_python() -> None:
    ppi_py = pytest.importorskip("ppi_py")  # the dev extra installs it
    rng = np.random.default_rng(3)
    for alpha in (0.05, 0.1):
        y, f, labeled = _simulate(rng, 800, 90)
        for lam in (None, 1.0, 0.3):
            ours = ppi_mean(y[labeled], f[labeled], f[~labeled], alpha=alpha, lam=lam)
            lo, hi = ppi_py.ppi_mean_ci(y[labeled], f[labeled], f[~labeled], alpha=alpha, lam=lam)
            point = ppi_py.ppi_mean_pointestimate(y[labeled], f[labeled], f[~labeled], lam=lam)
            assert (ours.lo, ours.hi, ours.estimate) == pytest.approx((lo[0], hi[0], point[0]), rel=1e-10)
        lo, hi = ppi_py.classical_mean_ci(y[labeled], alpha=alpha)
        human = classical_mean(y[labeled], alpha)
        assert (human.lo, human.hi) == pytest.approx((float(np.ravel(lo)[0]), float(np.ravel(hi)[0])), rel=1e-10)


def test_human_only_matches_statsmodels() -> None:
    from statsmodels.stats.weightstats import DescrStatsW

    y = np.random.default_rng(5).normal(3.0, 1.0, 400)
    ours = classical_mean(y, 0.05)
    lo, hi = DescrStatsW(y).zconfint_mean(alpha=0.05)  # se with ddof=1; ours uses ddof=0 as ppi-python does
    assert ours.estimate == pytest.approx((lo + hi) / 2)
    assert (ours.hi - ours.lo) == pytest.approx((hi - lo) * math.sqrt(399 / 400), rel=1e-9)


def test_ppi_covers_the_truth_is_narrower_and_judge_only_misses() -> None:
    rng = np.random.default_rng(2026)
    covered = {"ppi": 0, "human": 0, "judge": 0}
    widths = {"ppi": [], "human": []}
    for _ in range(40):
        y, f, labeled = _simulate(rng)
        ppi = ppi_mean(y[labeled], f[labeled], f[~labeled], alpha=0.05)
        human = classical_mean(y[labeled], 0.05)
        judge = classical_mean(f, 0.05)
        for name, est in (("ppi", ppi), ("human", human), ("judge", judge)):
            covered[name] += est.lo <= TRUTH <= est.hi
        widths["ppi"].append(ppi.hi - ppi.lo)
        widths["human"].append(human.hi - human.lo)
    assert covered["ppi"] >= 36
    assert np.mean(widths["ppi"]) < 0.8 * np.mean(widths["human"])
    assert covered["judge"] == 0


def test_difference_of_two_independent_systems() -> None:
    rng = np.random.default_rng(7)
    probs_b = np.array([0.10, 0.25, 0.30, 0.25, 0.10])
    truth = TRUTH - float(LEVELS @ probs_b)  # 0.45
    covered = {"ppi": 0, "judge": 0}
    widths = {"ppi": [], "human": []}
    for _ in range(40):
        y_a, f_a, lab_a = _simulate(rng, bias=0.5)
        y_b = rng.choice(LEVELS, 2000, p=probs_b)
        f_b = y_b + 0.1 + rng.normal(0.0, 0.6, 2000)  # a judge kinder to system A than to B
        lab_b = np.zeros(2000, dtype=bool)
        lab_b[rng.choice(2000, 150, replace=False)] = True
        ppi = difference(ppi_mean(y_a[lab_a], f_a[lab_a], f_a[~lab_a]), ppi_mean(y_b[lab_b], f_b[lab_b], f_b[~lab_b]))
        human = difference(classical_mean(y_a[lab_a]), classical_mean(y_b[lab_b]))
        judge = difference(classical_mean(f_a), classical_mean(f_b))
        covered["ppi"] += ppi.lo <= truth <= ppi.hi
        covered["judge"] += judge.lo <= truth <= judge.hi
        widths["ppi"].append(ppi.hi - ppi.lo)
        widths["human"].append(human.hi - human.lo)
    # the variance of a difference of independent estimates is the sum of variances
    assert ppi.se == pytest.approx(math.hypot(*(e.se for e in (ppi_mean(y_a[lab_a], f_a[lab_a], f_a[~lab_a]),
                                                               ppi_mean(y_b[lab_b], f_b[lab_b], f_b[~lab_b])))))
    assert covered["ppi"] >= 36 and covered["judge"] == 0
    assert np.mean(widths["ppi"]) < np.mean(widths["human"])


def test_labels_needed_reaches_the_target_width() -> None:
    rng = np.random.default_rng(11)
    y, f, labeled = _simulate(rng, 5000, 100)
    n_ppi, n_human = labels_needed(y[labeled], f[labeled], f[~labeled], width=0.15, alpha=0.05)
    z = norm.ppf(0.975)
    assert n_human == math.ceil(np.var(y[labeled]) / (0.15 / (2 * z)) ** 2)
    assert n_ppi < n_human
    widths = []
    for _ in range(20):  # label n_ppi fresh items from the same population: the interval is about that wide
        y2, f2, lab2 = _simulate(rng, 5000, int(n_ppi))
        est = ppi_mean(y2[lab2], f2[lab2], f2[~lab2])
        widths.append(est.hi - est.lo)
    assert np.mean(widths) == pytest.approx(0.15, rel=0.1)
    # a width the judged items alone cannot reach: PPI++ falls back towards lam = 0, never above human-only
    tiny_ppi, tiny_human = labels_needed(y[labeled], f[labeled], f[~labeled], width=0.01)
    assert tiny_ppi <= tiny_human and tiny_human > 10_000


def test_degenerate_inputs() -> None:
    assert math.isnan(ppi_mean(np.array([3.0]), np.array([3.0]), np.array([4.0, 5.0])).estimate)
    flat = ppi_mean(np.array([1.0, 3.0]), np.array([4.0, 4.0]), np.array([4.0, 4.0]))  # judge says nothing
    assert flat.lam == 0.0 and flat.estimate == pytest.approx(2.0)
    with pytest.raises(ValueError, match="finite"):
        ppi_mean(np.array([1.0, np.nan]), np.array([1.0, 2.0]), np.array([3.0]))
