"""Label-selection designs: inclusion probabilities pi_i for a label budget n over N judged items, and the draw.

Standalone (numpy only). Every design returns ``pi`` with 0 < pi_i <= 1 and sum(pi) == n (up to rounding), so
that an inverse-probability-weighted estimator (``active.py``) can undo the selection.

Choices and references
----------------------
* Uncertainty designs use ``pi ∝ s(x)`` where ``s`` is the judge's predicted *error scale* (standard deviation of
  Y given the judge's output). Zrnic & Candès (2024, "Active Statistical Inference", ICML, arXiv:2403.03208) show
  that for the mean the variance of the IPW estimator is (1/N)(Var Y + E[(Y - f)^2 (1/pi - 1)]), minimised under
  E[pi] = n/N by ``pi ∝ sqrt(E[(Y - f(X))^2 | X])``. Angelopoulos, Eisenstein, Berant, Agarwal & Fisch (2025,
  "Cost-optimal active AI model evaluation", arXiv:2506.07949) give the same square-root rule with per-item label
  costs c(x): ``pi ∝ sqrt(u(x) / c(x))`` with u the conditional error variance. Hence:
  ``uncertainty_pi(u, n, power=0.5)`` when ``u`` is a *variance* (variance of the rating distribution, jury
  variance, predicted squared residual) and ``power=1`` when ``u`` already is a standard deviation / |residual|.
* A uniform floor ``pi = (1 - tau) pi_u + tau n/N`` keeps every item's probability >= tau n/N, which bounds the
  weights 1/pi by N/(tau n) and protects against badly calibrated uncertainty (Li, Zrnic & Candès 2025, "Robust
  sampling for active statistical inference", interpolate between uniform and active).
* Probabilities above 1 are capped at 1 and the excess budget is redistributed proportionally over the others
  (standard ``pps`` capping), so sum(pi) = n exactly whenever n <= N.
* Stratified designs (Fisch et al. 2024, "Stratified prediction-powered inference for hybrid language model
  evaluation", NeurIPS) allocate n_h labels to stratum h: proportional (n_h ∝ N_h) or Neyman (n_h ∝ N_h S_h) and
  draw a simple random sample of fixed size n_h within each stratum (pi_i = n_h / N_h).
* The draw for uniform / uncertainty designs is Poisson (independent Bernoulli(pi_i)) sampling, as in Zrnic &
  Candès: the number of labels is random with mean n (sd <= sqrt(n)).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

import numpy as np


# ----------------------------------------------------------------------------------------------------------------
# uncertainty scores
# ----------------------------------------------------------------------------------------------------------------

def rating_variance(probs: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """Variance of the judge's rating distribution: sum_k p_k l_k^2 - (sum_k p_k l_k)^2 (rows renormalised)."""
    p = np.asarray(probs, dtype=float)
    lv = np.asarray(levels, dtype=float)
    if p.ndim != 2 or p.shape[1] != lv.size:
        raise ValueError(f"probs must be (N, {lv.size}), got {p.shape}")
    if np.any(p < 0) or not np.all(np.isfinite(p)):
        raise ValueError("probs must be finite and non-negative")
    p = p / p.sum(axis=1, keepdims=True)
    mean = p @ lv
    return np.maximum(p @ lv**2 - mean**2, 0.0)


def rating_expectation(probs: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """The judge's expected rating (the score f(x) that goes with ``rating_variance``)."""
    p = np.asarray(probs, dtype=float)
    return (p / p.sum(axis=1, keepdims=True)) @ np.asarray(levels, dtype=float)


def one_minus_max(probs: np.ndarray) -> np.ndarray:
    """1 - max_k p_k: the chance the judge's modal rating is wrong (a probability, not an error variance)."""
    p = np.asarray(probs, dtype=float)
    p = p / p.sum(axis=1, keepdims=True)
    return 1.0 - p.max(axis=1)


def jury_variance(scores: np.ndarray) -> np.ndarray:
    """Disagreement of a jury: variance (ddof=0) across members, ``scores`` of shape (N, members); NaN = missing."""
    s = np.asarray(scores, dtype=float)
    if s.ndim != 2:
        raise ValueError("jury scores must be (N, members)")
    count = np.sum(np.isfinite(s), axis=1)
    if np.any(count == 0):
        raise ValueError("an item has no jury score")
    return np.nan_to_num(np.nanvar(s, axis=1), nan=0.0)


def fit_residual_model(features_labeled: np.ndarray, residuals: np.ndarray, features_all: np.ndarray, *,
                       ridge: float = 1e-3, floor: float | None = None) -> np.ndarray:
    """Predicted squared residual E[(Y - f)^2 | x] for every item from a ridge regression on already-labelled items.

    ``features`` are (n, p) / (N, p) arrays (an intercept column is added), e.g. [f, rating variance, jury
    variance, length]. Predictions are clipped below at ``floor`` (default: 5% of the mean squared residual).
    The labels used to fit must not be re-used as if drawn with the new design: see ``combine_waves``.
    """
    x_l = np.column_stack([np.ones(len(features_labeled)), np.asarray(features_labeled, float)])
    x_a = np.column_stack([np.ones(len(features_all)), np.asarray(features_all, float)])
    target = np.asarray(residuals, float) ** 2
    gram = x_l.T @ x_l + ridge * np.eye(x_l.shape[1]) * len(target)
    beta = np.linalg.solve(gram, x_l.T @ target)
    floor = 0.05 * float(target.mean()) if floor is None else floor
    return np.maximum(x_a @ beta, max(floor, 1e-12))


# ----------------------------------------------------------------------------------------------------------------
# inclusion probabilities
# ----------------------------------------------------------------------------------------------------------------

def _check_budget(n: float, big_n: int) -> float:
    if big_n <= 0:
        raise ValueError("no items")
    if not 0 < n <= big_n:
        raise ValueError(f"budget must be in (0, {big_n}], got {n}")
    return float(n)


def cap_probabilities(size: np.ndarray, n: float) -> np.ndarray:
    """pi ∝ size, scaled to sum to n, with every pi <= 1: items over 1 are fixed at 1 and the rest re-scaled.

    ``size`` must be non-negative with at least ceil(n) positive entries (or the cap cannot be met).
    """
    s = np.asarray(size, dtype=float)
    n = _check_budget(n, s.size)
    if np.any(s < 0) or not np.all(np.isfinite(s)):
        raise ValueError("sizes must be finite and non-negative")
    if np.count_nonzero(s) < n - 1e-9:
        raise ValueError(f"only {np.count_nonzero(s)} items have positive size, budget {n}")
    pi = np.zeros_like(s)
    fixed = np.zeros(s.size, dtype=bool)
    for _ in range(s.size + 1):
        remaining = n - fixed.sum()
        free = ~fixed
        total = s[free].sum()
        pi[free] = s[free] * remaining / total if total > 0 else 0.0
        pi[fixed] = 1.0
        over = free & (pi > 1.0)
        if not over.any():
            break
        fixed |= over
    return np.minimum(pi, 1.0)


def uniform_pi(big_n: int, n: float) -> np.ndarray:
    """pi = n/N for every item."""
    n = _check_budget(n, big_n)
    return np.full(big_n, n / big_n)


def uncertainty_pi(u: np.ndarray, n: float, *, power: float = 0.5, tau: float = 0.1,
                   cost: np.ndarray | None = None) -> np.ndarray:
    """Active design: pi = (1 - tau) * cap(n, (u / cost)^power) + tau * n/N.

    ``power=0.5`` for a variance-type ``u`` (the square-root rule), ``power=1`` for a standard-deviation-type ``u``.
    ``tau`` in [0, 1] is the uniform floor's share (tau=1 is the uniform design). ``cost`` (per-item label cost)
    gives the cost-optimal rule of Angelopoulos et al. 2025; the budget then still counts labels, not money.
    """
    u = np.asarray(u, dtype=float)
    n = _check_budget(n, u.size)
    if not 0.0 <= tau <= 1.0:
        raise ValueError(f"tau must be in [0, 1], got {tau}")
    if np.any(u < 0) or not np.all(np.isfinite(u)):
        raise ValueError("uncertainties must be finite and non-negative")
    ratio = u if cost is None else u / np.asarray(cost, dtype=float)
    size = ratio**power
    if tau < 1.0 and np.count_nonzero(size) < n:
        size = size + 1e-12 * max(float(size.max()), 1.0)  # degenerate: fewer uncertain items than the budget
    if tau >= 1.0:
        return uniform_pi(u.size, n)
    return (1.0 - tau) * cap_probabilities(size, n) + tau * n / u.size


def _largest_remainder(quota: np.ndarray, n: int, upper: np.ndarray, lower: np.ndarray) -> np.ndarray:
    """Integers close to ``quota`` summing to n with lower <= n_h <= upper (quota already respects the bounds)."""
    alloc = np.clip(np.floor(quota).astype(int), lower, upper)
    while alloc.sum() < n:
        room = alloc < upper
        gap = np.where(room, quota - alloc, -np.inf)
        alloc[int(np.argmax(gap))] += 1
    while alloc.sum() > n:
        room = alloc > lower
        gap = np.where(room, alloc - quota, -np.inf)
        alloc[int(np.argmax(gap))] -= 1
    return alloc


def allocate(stratum_sizes: np.ndarray, n: int, *, scale: np.ndarray | None = None, min_per_stratum: int = 2,
             ) -> np.ndarray:
    """Labels per stratum: proportional (``scale=None``: n_h ∝ N_h) or Neyman (n_h ∝ N_h S_h, S_h = ``scale``),
    integers summing to n with ``min_per_stratum`` <= n_h <= N_h (capped strata hand their excess to the others).

    ``min_per_stratum=2`` keeps a within-stratum variance estimable; strata with N_h smaller get N_h.
    """
    sizes = np.asarray(stratum_sizes, dtype=int)
    big_n = int(sizes.sum())
    n = int(round(_check_budget(n, big_n)))
    lower = np.minimum(sizes, min_per_stratum)
    if lower.sum() > n:
        raise ValueError(f"budget {n} is below {min_per_stratum} labels in each of {sizes.size} strata")
    weight = sizes.astype(float) if scale is None else sizes * np.asarray(scale, dtype=float)
    if np.any(weight < 0) or not np.all(np.isfinite(weight)):
        raise ValueError("stratum scales must be finite and non-negative")
    if weight.sum() <= 0:
        weight = sizes.astype(float)
    # quota with caps at N_h and floors at `lower`: water-fill the free strata
    quota = np.zeros(sizes.size)
    fixed_hi = np.zeros(sizes.size, dtype=bool)
    fixed_lo = np.zeros(sizes.size, dtype=bool)
    for _ in range(2 * sizes.size + 2):
        free = ~(fixed_hi | fixed_lo)
        remaining = n - sizes[fixed_hi].sum() - lower[fixed_lo].sum()
        tot = weight[free].sum()
        quota[free] = weight[free] * remaining / tot if tot > 0 else remaining / max(free.sum(), 1)
        quota[fixed_hi] = sizes[fixed_hi]
        quota[fixed_lo] = lower[fixed_lo]
        over = free & (quota > sizes)
        under = free & (quota < lower)
        if not over.any() and not under.any():
            break
        fixed_hi |= over
        fixed_lo |= under & ~over
    return _largest_remainder(quota, n, sizes, lower)


def stratified_pi(strata: Sequence[Hashable] | np.ndarray, n: int, *, scale: Mapping[Hashable, float] | None = None,
                  min_per_stratum: int = 2) -> tuple[np.ndarray, np.ndarray, dict[Hashable, int]]:
    """(pi, stratum codes, allocation {stratum: n_h}): pi_i = n_h / N_h in the item's stratum.

    ``scale`` maps stratum -> S_h for Neyman allocation (e.g. the pilot's residual SD per stratum, or the mean of
    sqrt(u) over the stratum's items); ``None`` gives proportional allocation.
    """
    labels, codes = np.unique(np.asarray(strata, dtype=object).astype(str), return_inverse=True)
    sizes = np.bincount(codes, minlength=labels.size)
    s = None if scale is None else np.array([float(scale[k]) for k in labels])
    alloc = allocate(sizes, n, scale=s, min_per_stratum=min_per_stratum)
    pi = (alloc / sizes)[codes]
    return pi, codes, {str(k): int(a) for k, a in zip(labels, alloc)}


def uncertainty_strata(u: np.ndarray, k: int = 4) -> np.ndarray:
    """Stratum codes 0..k-1 by quantile bins of the judge's uncertainty (Fisch et al. stratify by confidence)."""
    u = np.asarray(u, dtype=float)
    edges = np.quantile(u, np.linspace(0, 1, k + 1)[1:-1])
    return np.searchsorted(edges, u, side="right")


# ----------------------------------------------------------------------------------------------------------------
# draws
# ----------------------------------------------------------------------------------------------------------------

def poisson_draw(pi: np.ndarray, seed: int | np.random.Generator | None) -> np.ndarray:
    """Independent Bernoulli(pi_i) picks (Poisson sampling); ``seed`` makes the picks reproducible."""
    rng = np.random.default_rng(seed)
    pi = np.asarray(pi, dtype=float)
    return rng.random(pi.shape) < pi


def stratified_draw(codes: np.ndarray, alloc: Sequence[int], seed: int | np.random.Generator | None) -> np.ndarray:
    """Simple random sample without replacement of n_h items in each stratum h (codes 0..H-1)."""
    rng = np.random.default_rng(seed)
    codes = np.asarray(codes)
    picked = np.zeros(codes.size, dtype=bool)
    for h, n_h in enumerate(alloc):
        members = np.flatnonzero(codes == h)
        picked[rng.choice(members, size=int(n_h), replace=False)] = True
    return picked


def combine_waves(pi_first: np.ndarray, pi_second: np.ndarray) -> np.ndarray:
    """Inclusion probability of the union of two independent Poisson waves: 1 - (1 - pi1)(1 - pi2).

    Use it when a pilot wave (e.g. uniform) is followed by an uncertainty wave; both waves' labels then enter one
    IPW estimate with the combined pi. (The second wave's pi may depend on the first wave's labels: the estimate
    is then valid conditionally on the first wave, as in batched active inference.)
    """
    return 1.0 - (1.0 - np.asarray(pi_first, float)) * (1.0 - np.asarray(pi_second, float))


def select(strategy: str, n: int, *, big_n: int | None = None, u: np.ndarray | None = None,
           strata: Sequence[Hashable] | None = None, seed: int | None = 0, tau: float = 0.1, power: float = 0.5,
           neyman_scale: Mapping[Hashable, float] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(pi, picked) for ``strategy`` in {uniform, uncertainty, stratified}: the core of ``select_labels``."""
    if strategy == "uniform":
        size = big_n if big_n is not None else (len(u) if u is not None else len(strata))  # type: ignore[arg-type]
        pi = uniform_pi(int(size), n)
        return pi, poisson_draw(pi, seed)
    if strategy == "uncertainty":
        if u is None:
            raise ValueError("the uncertainty design needs per-item uncertainties")
        pi = uncertainty_pi(u, n, power=power, tau=tau)
        return pi, poisson_draw(pi, seed)
    if strategy == "stratified":
        if strata is None:
            raise ValueError("the stratified design needs strata")
        pi, codes, alloc = stratified_pi(strata, n, scale=neyman_scale)
        return pi, stratified_draw(codes, list(alloc.values()), seed)
    raise ValueError(f"unknown strategy {strategy!r}: use uniform, uncertainty or stratified")
