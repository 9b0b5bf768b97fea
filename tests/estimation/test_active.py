"""Active and stratified PPI and the label designs, checked against ppi-python where it has a counterpart,
against hand-computed cases, and by exact enumeration of every Poisson sample (Horvitz-Thompson)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from scijudge.estimation import active as A
from scijudge.estimation import designs as D

ppi_py = pytest.importorskip("ppi_py", reason="ppi-python (the dev extra) cross-checks the estimators")
Z90 = A.z_value(0.1)


def close(name: str, ours: float, ref: float, tol: float = 1e-12) -> None:
    err = abs(ours - ref) / max(1.0, abs(ref))
    assert err < tol, (name, ours, ref, err)


def test_uniform_ppi_plus_plus_equals_ppi_python():
    """uniform PPI++ core == ppi_py.ppi_mean_ci / ppi_mean_pointestimate (lam None, 1, 0.3; alpha .05, .1)"""
    rng = np.random.default_rng(27)
    for _ in range(20):
        big_n, n = 600, 80
        y = rng.choice(np.arange(1.0, 6.0), big_n)
        f = y + 0.4 + rng.normal(0, 0.7, big_n)
        lab = np.zeros(big_n, bool)
        lab[rng.choice(big_n, n, replace=False)] = True
        for alpha in (0.05, 0.1):
            for lam in (None, 1.0, 0.3):
                est = A.ppi_mean(y[lab], f[lab], f[~lab], alpha=alpha, lam=lam)
                lo, hi = ppi_py.ppi_mean_ci(y[lab], f[lab], f[~lab], alpha=alpha, lam=lam)
                pt = ppi_py.ppi_mean_pointestimate(y[lab], f[lab], f[~lab], lam=lam)
                close("ppi++ lo", est.lo, float(np.ravel(lo)[0]))
                close("ppi++ hi", est.hi, float(np.ravel(hi)[0]))
                close("ppi++ point", est.estimate, float(np.ravel(pt)[0]))


def test_hajek_active_point_equals_ppi_python_weighted_and_lambda_is_the_variance_minimiser():
    """Hájek active point == ppi_py.ppi_mean_pointestimate(Y, Yhat, f_all, lam, w=1/pi) for fixed lam"""
    rng = np.random.default_rng(27)
    for rep in range(5):
        big_n, n = 800, 120
        u = rng.lognormal(-1.0, 0.8, big_n)
        y = rng.normal(3, 1, big_n) + rng.normal(0, np.sqrt(u))
        f = y - rng.normal(0, np.sqrt(u)) + 0.3
        pi = D.uncertainty_pi(u, n, power=0.5, tau=0.2)
        xi = D.poisson_draw(pi, rep)
        for lam in (0.0, 0.4, 1.0):
            est = A.active_ppi_mean(f, xi, y, pi, lam=lam)
            pt = ppi_py.ppi_mean_pointestimate(y[xi], f[xi], f, lam=lam, w=1.0 / pi[xi])
            close("hajek point vs ppi_py(w=1/pi)", est.estimate, float(np.ravel(pt)[0]))
        # tuned lam equals the grid minimiser of the estimated variance
        est = A.active_ppi_mean(f, xi, y, pi)
        grid = np.linspace(0, 1, 2001)
        ses = [A.active_core(f, xi, y, pi, g)[1] for g in grid]
        g_best = grid[int(np.argmin(ses))]
        assert abs(est.lam - g_best) <= 1e-3 or est.lam in (0.0, 1.0), (est.lam, g_best)


def test_stratified_ppi_equals_per_stratum_ppi_python():
    """stratified PPI++ with known shares == the combination of per-stratum ppi_py calls"""
    rng = np.random.default_rng(27)
    for rep in range(10):
        sizes = np.array([300, 500, 200])
        codes = np.repeat(np.arange(3), sizes)
        y = rng.normal(np.array([2.0, 3.0, 4.0])[codes], np.array([0.5, 1.0, 1.5])[codes])
        f = y + rng.normal(0, 0.6, codes.size) + 0.2
        pi, c2, alloc = D.stratified_pi(codes, 120, scale={"0": 0.5, "1": 1.0, "2": 1.5})
        xi = D.stratified_draw(c2, list(alloc.values()), rep)
        shares = {"0": 0.25, "1": 0.5, "2": 0.25}
        for lam in (None, 1.0):
            est = A.stratified_ppi_mean(f, xi, y, codes, alpha=0.1, weights=shares, lam=lam, small_sample=False)
            point, var = 0.0, 0.0
            for h in range(3):
                m = codes == h
                lo, hi = ppi_py.ppi_mean_ci(y[m & xi], f[m & xi], f[m & ~xi], alpha=0.1, lam=lam)
                pt = ppi_py.ppi_mean_pointestimate(y[m & xi], f[m & xi], f[m & ~xi], lam=lam)
                se_h = (float(np.ravel(hi)[0]) - float(np.ravel(lo)[0])) / (2 * Z90)
                point += shares[str(h)] * float(np.ravel(pt)[0])
                var += shares[str(h)] ** 2 * se_h**2
            close("stratified point vs ppi_py per stratum", est.estimate, point)
            close("stratified se vs ppi_py per stratum", est.se, math.sqrt(var))


def test_hand_computed_hajek_and_horvitz_thompson_cases():
    """hand-computed tiny Hájek and HT case"""
    f = np.array([2.0, 3.0, 4.0, 5.0])
    pi = np.array([0.5, 0.5, 0.25, 1.0])
    xi = np.array([True, False, True, True])
    y = np.array([3.0, np.nan, 3.0, 4.0])
    # HT, lam = 1: z = f + w (y - f) = [2+2*1, 3, 4+4*(-1), 5+1*(-1)] = [4, 3, 0, 4]; mean 2.75; var0 = 2.6875
    ht = A.active_ppi_mean(f, xi, y, pi, lam=1.0, weighting="ht")
    close("hand HT point", ht.estimate, 2.75)
    close("hand HT se", ht.se, math.sqrt(2.6875 / 4))
    # Hájek, lam = 1: w = [2, 0, 4, 1], r = y - f = [1, ., -1, -1], rbar = (2 - 4 - 1) / 7 = -3/7
    # theta = mean f + rbar = 3.5 - 3/7; z = f + rbar + w (r - rbar)
    rbar = -3 / 7
    zz = f + rbar + np.array([2, 0, 4, 1]) * (np.array([1, 0, -1, -1]) - rbar) * np.array([1, 0, 1, 1])
    hj = A.active_ppi_mean(f, xi, y, pi, lam=1.0)
    close("hand Hajek point", hj.estimate, 3.5 - 3 / 7)
    close("hand Hajek se", hj.se, float(np.std(zz)) / 2)
    close("hand Hajek mean(z) == point", float(zz.mean()), 3.5 - 3 / 7)


def test_horvitz_thompson_is_exactly_unbiased_with_its_design_variance_by_enumeration():
    """exact enumeration: HT is exactly unbiased for the N-item mean for any fixed lam; its exact design variance"""
    rng = np.random.default_rng(27)
    #    equals sum_i (1 - pi_i)/pi_i (y_i - lam f_i)^2 / N^2 (Poisson sampling)
    big_n = 7
    f = rng.normal(3, 1, big_n)
    y = f + rng.normal(0.5, 0.7, big_n)
    pi = D.uncertainty_pi(rng.uniform(0.1, 1, big_n), 3, power=1.0, tau=0.3)
    for lam in (0.0, 0.6, 1.0):
        mean, second = 0.0, 0.0
        for bits in itertools.product([False, True], repeat=big_n):
            xi = np.array(bits)
            p = float(np.prod(np.where(xi, pi, 1 - pi)))
            w = np.where(xi, 1 / pi, 0.0)
            t = float(np.mean(lam * f + w * (y - lam * f)))
            mean += p * t
            second += p * t * t
        close("HT exact unbiased (enumeration)", mean, float(y.mean()))
        close("HT exact design variance", second - mean**2,
              float(np.sum((1 - pi) / pi * (y - lam * f) ** 2) / big_n**2))


def test_designs_budget_capping_allocation_and_uncertainty_scores():
    """designs"""
    rng = np.random.default_rng(27)
    pi = D.cap_probabilities(np.array([10.0, 1, 1, 1, 1]), 2)
    assert np.allclose(pi, [1, 0.25, 0.25, 0.25, 0.25]), pi
    u = rng.lognormal(0, 2, 5000)  # very skewed: many items hit the cap
    pi = D.uncertainty_pi(u, 500, power=0.5, tau=0.1)
    close("sum pi == budget", float(pi.sum()), 500.0, 1e-9)
    assert pi.max() <= 1 + 1e-12 and pi.min() >= 0.1 * 500 / 5000 - 1e-12
    free = pi < 0.9 + 0.01 - 1e-9  # active part below its cap of 1
    ratio = (pi[free] - 0.01) / np.sqrt(u[free])
    assert np.allclose(ratio, ratio[0]), "uncapped items not proportional to sqrt(u)"
    draws = np.stack([D.poisson_draw(pi, s) for s in range(400)])
    freq_err = np.abs(draws.mean(0) - pi) / np.sqrt(pi * (1 - pi) / 400 + 1e-12)
    assert abs(draws.sum(1).mean() - 500) < 5 and freq_err.max() < 5, "inclusion frequencies follow pi"
    assert np.allclose(D.uncertainty_pi(u, 500, tau=1.0), 0.1)
    alloc = D.allocate(np.array([100, 300, 600]), 100)
    assert alloc.tolist() == [10, 30, 60], alloc
    alloc = D.allocate(np.array([100, 300, 600]), 100, scale=np.array([4.0, 1.0, 1.0]))  # ∝ [400, 300, 600]
    assert alloc.tolist() == [31, 23, 46], alloc
    alloc = D.allocate(np.array([5, 300, 600]), 100, scale=np.array([1000.0, 1.0, 1.0]))  # capped stratum
    assert alloc.tolist() == [5, 32, 63], alloc
    probs = np.array([[0.0, 0, 1, 0, 0], [0.5, 0, 0, 0, 0.5], [0.2] * 5])
    close("rating variance", float(D.rating_variance(probs, np.arange(1.0, 6))[1]), 4.0)
    close("rating variance uniform", float(D.rating_variance(probs, np.arange(1.0, 6))[2]), 2.0)
    assert D.rating_variance(probs, np.arange(1.0, 6))[0] == 0.0
    close("one minus max", float(D.one_minus_max(probs)[2]), 0.8)
    close("jury variance", float(D.jury_variance(np.array([[1.0, 3.0, np.nan]]))[0]), 1.0)
    feats = np.column_stack([rng.normal(size=300), rng.uniform(0, 1, 300)])
    res = rng.normal(0, np.sqrt(0.2 + 2.0 * feats[:, 1]))
    pred = D.fit_residual_model(feats, res, feats)
    assert np.corrcoef(pred, 0.2 + 2.0 * feats[:, 1])[0, 1] > 0.9
