"""Anytime-valid prediction-powered intervals: a confidence sequence for the mean human score, valid at every
number of labels at once, so a person may look after each label and stop as soon as it is narrow enough.

The estimand is the mean human score over the N judged units; the judge's scores are known on all of them, so
their mean ``mu_f`` is known exactly. Labels arrive one at a time in a uniformly random order. Label i is
turned into a prediction-powered observation

    psi_i = y_i - b_i . (f_i - mu_f)

whose coefficient ``b_i`` is fitted on labels 1..i-1 only (predictable): the power-tuned ``lam`` of PPI++ for
one judge (``Cov(y, f) / Var(f)``, clipped to [0, 1]), the least-squares coefficients of several models' scores
(``calibrated.joint_columns``) for a jury, 0 before ``min_fit`` labels. Whatever ``b_i`` is, E[psi_i | past] is
the mean human score, so psi_1, psi_2, ... are martingale differences around it and the shrinking variance of
psi is what the judge buys.

The sequence is the asymptotic confidence sequence of Waudby-Smith, Arbour, Sinha, Kennedy & Ramdas
("Time-uniform central limit theory and asymptotic confidence sequences", Ann. Statist. 2024, Thm 2.2 and its
martingale version): with the running mean and (ddof 0) standard deviation of psi,

    mean_t +- sd_t * sqrt( 2 (t rho^2 + 1) / (t^2 rho^2) * log( sqrt(t rho^2 + 1) / alpha ) ),

the two-sided Gaussian-mixture boundary; ``rho^2 = (-W_{-1}(-alpha^2 / e) - 1) / t_opt`` makes it tightest at
``t_opt`` labels (W_{-1} the lower branch of Lambert's W: the exact minimiser of the boundary at ``t_opt``; the
width changes by a few percent for t between t_opt / 4 and 4 t_opt). With ``b_i = 0`` it is the human-only
sequence. It is asymptotic: the guarantee holds from a start time on as that start grows, so no interval is
given before ``start`` labels (default 20). Drawing labels without replacement only shrinks psi's spread around
the mean of the units left, and the simulation in the tests measures the miss rate under exactly that.

Why hand-written: ``confseq`` (MIT) ships the same boundary, but as a C++ extension that needs a compiler to
install; the formula is one line of numpy, and the tests check it against a hand computation and a simulation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

DEFAULT_START = 20
"""No interval before this many labels: the boundary is asymptotic, and its variance estimate on a handful of
labels is too noisy to trust (measured in ``tests/estimation/test_sequential.py``)."""
DEFAULT_T_OPT = 100
"""The number of labels where the sequence is tightest unless told otherwise (a rule fixed before any label)."""
MIN_FIT = 5
"""Labels before a coefficient is fitted (and 3 per column for several models): until then ``b = 0``."""


def rho2(t_opt: float, alpha: float) -> float:
    """The mixture's ``rho^2`` that minimises the boundary at ``t_opt`` (Lambert W, lower branch)."""
    from scipy.special import lambertw

    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if t_opt <= 0:
        raise ValueError(f"t_opt must be > 0, got {t_opt}")
    u = -float(np.real(lambertw(-(alpha**2) / math.e, k=-1)))
    return (u - 1.0) / float(t_opt)


def boundary(t: np.ndarray, rho_sq: float, alpha: float) -> np.ndarray:
    """The unit-variance two-sided Gaussian-mixture margin at sample sizes ``t`` (multiply by the sd)."""
    t = np.asarray(t, dtype=float)
    x = t * rho_sq + 1.0
    return np.sqrt(2.0 * x / (t**2 * rho_sq) * np.log(np.sqrt(x) / alpha))


@dataclass(frozen=True)
class Sequence:
    """One confidence sequence: per number of labels n = 1..len, the estimate and its interval (NaN before
    ``start``), and the coefficient the next label will use."""

    n: np.ndarray
    estimate: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    coef: np.ndarray  # per label i: the coefficient(s) b_i used for psi_i (zeros before min_fit labels)

    def stop(self, width: float) -> int | None:
        """The first number of labels whose interval is at most ``width`` wide, or None when none is."""
        reached = np.flatnonzero((self.hi - self.lo) <= width)
        return int(self.n[reached[0]]) if reached.size else None


def running_cs(psi: np.ndarray, alpha: float, *, t_opt: float = DEFAULT_T_OPT, start: int = DEFAULT_START,
               bounds: tuple[float, float] | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean, lo, hi) after each observation: the asymptotic confidence sequence of ``psi`` (clipped to
    ``bounds``, the range the mean cannot leave, when given: coverage is unchanged)."""
    psi = np.asarray(psi, dtype=float)
    t = np.arange(1, psi.size + 1, dtype=float)
    mean = np.cumsum(psi) / t
    # the running sum of squares loses digits when the mean is large against the spread: recentre on the first
    centred = psi - (psi[0] if psi.size else 0.0)
    cm = np.cumsum(centred) / t
    var = np.maximum(np.cumsum(centred**2) / t - cm**2, 0.0)
    half = np.sqrt(var) * boundary(t, rho2(t_opt, alpha), alpha)
    half[t < max(start, 2)] = np.nan
    lo, hi = mean - half, mean + half
    if bounds is not None:
        lo, hi = np.clip(lo, *bounds), np.clip(hi, *bounds)
    return mean, lo, hi


def _coefficients(y: np.ndarray, x: np.ndarray, clip: bool, min_fit: int) -> np.ndarray:
    """Per label i, the least-squares slope(s) of y on x (with intercept) over labels 1..i-1 (predictable);
    zeros until ``min_fit`` labels, or while the past x do not vary. ``clip``: one column, kept in [0, 1]."""
    n, p = x.shape
    out = np.zeros((n, p))
    if n == 0 or p == 0:
        return out
    x0, y0 = x[0], y[0]  # centred on the first label: the running moments keep their digits
    xc, yc = x - x0, y - y0
    sx, sy = np.cumsum(xc, axis=0), np.cumsum(yc)
    sxx = np.cumsum(xc[:, :, None] * xc[:, None, :], axis=0)
    sxy = np.cumsum(xc * yc[:, None], axis=0)
    first = max(min_fit, 3 * p)
    if first >= n:
        return out
    m = np.arange(first, n, dtype=float)[:, None]  # label i uses the running moments of labels 0..i-1
    mx, my = sx[first - 1:n - 1] / m, sy[first - 1:n - 1, None] / m
    cxx = sxx[first - 1:n - 1] / m[:, :, None] - mx[:, :, None] * mx[:, None, :]
    cxy = sxy[first - 1:n - 1] / m - mx * my
    scale = np.trace(cxx, axis1=1, axis2=2)
    varies = scale > 1e-12
    ridge = (1e-9 * np.where(varies, scale, 1.0))[:, None, None] * np.eye(p)[None, :, :]
    beta = np.linalg.solve(cxx + ridge, cxy[:, :, None])[:, :, 0]
    beta[~varies] = 0.0
    out[first:] = np.clip(beta, 0.0, 1.0) if clip else beta
    return out


def ppi_sequence(y: np.ndarray, x_labelled: np.ndarray, x_mean: np.ndarray, alpha: float = 0.05, *,
                 t_opt: float = DEFAULT_T_OPT, start: int = DEFAULT_START, min_fit: int = MIN_FIT,
                 bounds: tuple[float, float] | None = None, human_only: bool = False) -> Sequence:
    """The prediction-powered confidence sequence of the mean human score.

    Args:
        y: human scores in the order they were given.
        x_labelled: the judge score(s) of those units (n, or n x p for several models' columns).
        x_mean: the mean of the same column(s) over all N judged units (labelled or not).
        bounds: the scale's (lo, hi): intervals are clipped to it.
        human_only: ``b = 0`` throughout (the labels alone), for comparison.
    """
    y = np.asarray(y, dtype=float).ravel()
    x = np.asarray(x_labelled, dtype=float)
    x = x.reshape(-1, 1) if x.ndim == 1 else x
    mu = np.atleast_1d(np.asarray(x_mean, dtype=float))
    if x.shape[0] != y.size or x.shape[1] != mu.size:
        raise ValueError(f"{y.size} human scores, {x.shape} judge scores and {mu.size} column means do not match")
    if not (np.all(np.isfinite(y)) and np.all(np.isfinite(x)) and np.all(np.isfinite(mu))):
        raise ValueError("scores must be finite numbers (drop abstentions before estimating)")
    coef = np.zeros_like(x) if human_only else _coefficients(y, x, clip=x.shape[1] == 1, min_fit=min_fit)
    psi = y - np.sum(coef * (x - mu[None, :]), axis=1)
    mean, lo, hi = running_cs(psi, alpha, t_opt=t_opt, start=start, bounds=bounds)
    return Sequence(np.arange(1, y.size + 1), mean, lo, hi, coef)


def labels_to_width(sd: float, width: float, alpha: float, *, t_opt: float = DEFAULT_T_OPT,
                    start: int = DEFAULT_START, limit: int = 10**7) -> float:
    """The smallest number of labels whose sequence is at most ``width`` wide when psi's sd is ``sd`` (a
    planning figure from a pilot; inf beyond ``limit``)."""
    if width <= 0:
        raise ValueError(f"target width must be > 0, got {width}")
    if not math.isfinite(sd):
        return math.nan
    if sd <= 0:
        return float(max(start, 2))
    r2 = rho2(t_opt, alpha)
    lo, hi = max(start, 2), max(start, 2)
    while 2 * sd * float(boundary(np.array([hi]), r2, alpha)[0]) > width:
        lo, hi = hi, hi * 2
        if hi > limit:
            return math.inf
    while hi - lo > 1:  # the boundary falls with t past its first few labels: bisect on [lo, hi]
        mid = (lo + hi) // 2
        if 2 * sd * float(boundary(np.array([mid]), r2, alpha)[0]) <= width:
            hi = mid
        else:
            lo = mid
    return float(hi if 2 * sd * float(boundary(np.array([lo]), r2, alpha)[0]) > width else lo)
