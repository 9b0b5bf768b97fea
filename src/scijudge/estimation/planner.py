"""Labels needed for a target interval width under each design, from a pilot of labelled items.

For the Poisson designs (uniform pi = n/N, uncertainty pi_n(x) from ``designs.uncertainty_pi``) and the Hájek active
estimator, the asymptotic variance (superpopulation target) is
    V(n) = (1/N) [ Var(Y) + min_lam E[(Y - lam f - c_lam)^2 (1/pi_n(X) - 1)] ],   c_lam = E[Y - lam f],
where pi_n is recomputed with its caps and floor for every candidate n over all N judged items, and the moments
are pilot averages weighted by 1/pi_pilot (Hájek; equal weights for a uniform pilot). For the stratified design
with allocation n_h(n) and PPI++ within strata,
    V(n) = sum_h W_h^2 min_lam_h [ lam_h^2 Var_h(f) / (N_h - n_h) + Var_h(Y - lam_h f) / n_h ]
           + sum_h W_h (mu_h - mu)^2 / N,
with Var_h(f) from all judged items of the stratum and the rest from the pilot items of the stratum (pooled pilot
moments when a stratum has fewer than ``min_pilot`` of them). The answer is the smallest n with
z_{1-alpha/2} sqrt(V(n)) <= width / 2 (inf when even labelling every item is not enough).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from scijudge.estimation import designs as D
from scijudge.estimation.active import z_value

LAMS = np.linspace(0.0, 1.0, 201)


def _wmoments(y: np.ndarray, f: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per lam: centred residuals (lam, n) and normalised weights v/sum(v)."""
    v = v / v.sum()
    r = y[None, :] - LAMS[:, None] * f[None, :]
    r = r - (r * v[None, :]).sum(1, keepdims=True)
    return r, v


def poisson_variance(pi_pilot_design: np.ndarray, y: np.ndarray, f: np.ndarray, v: np.ndarray,
                     big_n: int) -> tuple[float, float]:
    """(V, lam*) for a Poisson design whose inclusion probabilities at the pilot items are ``pi_pilot_design``."""
    r, vn = _wmoments(y, f, v)
    var_y = float(np.sum(vn * (y - np.sum(vn * y)) ** 2))
    extra = (r**2 * (1.0 / pi_pilot_design - 1.0)[None, :] * vn[None, :]).sum(1)
    k = int(np.argmin(extra))
    return (var_y + float(extra[k])) / big_n, float(LAMS[k])


def _smallest_n(var_of_n: Callable[[int], float], target_var: float, big_n: int, n_min: int = 2) -> float:
    if var_of_n(big_n) > target_var:
        return math.inf
    lo, hi = n_min, big_n  # invariant: var(hi) <= target
    if var_of_n(lo) <= target_var:
        return float(lo)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if var_of_n(mid) <= target_var:
            hi = mid
        else:
            lo = mid
    return float(hi)


def stratified_variance(alloc: np.ndarray, codes_all: np.ndarray, f_all: np.ndarray, pilot_idx: np.ndarray,
                        y_pilot: np.ndarray, v_pilot: np.ndarray, min_pilot: int = 5) -> float:
    big_n = f_all.size
    n_strata = alloc.size
    shares = np.bincount(codes_all, minlength=n_strata) / big_n
    pc = codes_all[pilot_idx]
    fp = f_all[pilot_idx]
    total, mus = 0.0, []
    for h in range(n_strata):
        m = pc == h
        use = m if m.sum() >= min_pilot else np.ones_like(m)
        vn = v_pilot[use] / v_pilot[use].sum()
        yh, fh = y_pilot[use], fp[use]
        mus.append(float(np.sum(vn * yh)))
        r = yh[None, :] - LAMS[:, None] * fh[None, :]
        var_r = (vn[None, :] * (r - (vn[None, :] * r).sum(1, keepdims=True)) ** 2).sum(1)
        n_h = alloc[h]
        big_n_h = int(np.sum(codes_all == h))
        var_f = float(np.var(f_all[codes_all == h]))
        if n_h >= big_n_h:
            comp = float(var_r[0]) / max(n_h - 1, 1)
        else:  # the estimator's small-sample rule: rectifier variance with ddof 2 (lam tuned), f with ddof 1
            comp = float(np.min(LAMS**2 * var_f / (big_n_h - n_h) + var_r / max(n_h - 2, 1)))
        total += shares[h] ** 2 * comp
    mus_arr = np.array(mus)
    mu = float(np.sum(shares * mus_arr))
    return total + float(np.sum(shares * (mus_arr - mu) ** 2)) / big_n


def plan_labels(f_all: np.ndarray, pilot: np.ndarray, y_pilot: np.ndarray, width: float, *, alpha: float = 0.1,
                u_all: np.ndarray | None = None, pi_pilot: np.ndarray | None = None, tau: float = 0.1,
                taus: Sequence[float] | None = None,
                power: float = 0.5, strata: Sequence[Hashable] | None = None,
                neyman_scale: Mapping[Hashable, float] | None = None) -> dict[str, dict[str, Any]]:
    """Labels needed per strategy for a (1 - alpha) interval of total ``width``.

    ``f_all``: judge scores on all N items; ``pilot``: indices (or a boolean mask) of the pilot's labelled items
    with human scores ``y_pilot`` (in the same order); ``pi_pilot``: the pilot's inclusion probabilities (None =
    a uniform pilot). ``u_all`` enables the uncertainty design, ``strata`` the stratified one. ``taus``: floors to
    compare (e.g. (0.1, 0.25, 0.5, 1.0)); the uncertainty row then reports the floor needing the fewest labels
    (robust sampling in the spirit of Li, Zrnic & Candès 2025: fall back towards uniform when the judge's
    uncertainty does not track its errors).
    """
    f_all = np.asarray(f_all, float)
    big_n = f_all.size
    idx = np.flatnonzero(pilot) if np.asarray(pilot).dtype == bool else np.asarray(pilot, int)
    y = np.asarray(y_pilot, float)
    fp = f_all[idx]
    v = np.ones(idx.size) if pi_pilot is None else 1.0 / np.asarray(pi_pilot, float)
    target = (width / (2.0 * z_value(alpha))) ** 2
    out: dict[str, dict[str, Any]] = {}

    def uniform_var(n: int) -> float:
        return poisson_variance(np.full(idx.size, n / big_n), y, fp, v, big_n)[0]

    out["uniform"] = {"labels": _smallest_n(uniform_var, target, big_n)}
    vn = v / v.sum()
    human = float(np.sum(vn * (y - np.sum(vn * y)) ** 2))
    out["human-only"] = {"labels": float(math.ceil(human / target))}
    if u_all is not None:
        u_all = np.asarray(u_all, float)

        def needed(t: float) -> float:
            def active_var(n: int) -> float:
                pi = D.uncertainty_pi(u_all, n, power=power, tau=t)
                return poisson_variance(pi[idx], y, fp, v, big_n)[0]

            return _smallest_n(active_var, target, big_n)

        by_tau = {float(t): needed(float(t)) for t in (taus if taus is not None else (tau,))}
        best = min(by_tau, key=lambda t: (by_tau[t], -t))
        out["uncertainty"] = {"labels": by_tau[best], "tau": best, "labels_by_tau": by_tau}
    if strata is not None:
        labels, codes = np.unique(np.asarray(strata, dtype=object).astype(str), return_inverse=True)
        sizes = np.bincount(codes)
        scale = None if neyman_scale is None else np.array([float(neyman_scale[k]) for k in labels])

        def strat_var(n: int) -> float:
            alloc = D.allocate(sizes, n, scale=scale, min_per_stratum=2)
            return stratified_variance(alloc, codes, f_all, idx, y, v)

        out["stratified"] = {"labels": _smallest_n(strat_var, target, big_n, n_min=2 * labels.size)}
    for row in out.values():
        row["target_width"] = width
        row["alpha"] = alpha
    return out
