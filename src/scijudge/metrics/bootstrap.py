"""Vectorised cluster bootstrap over items, percentile intervals, paired comparisons and Holm correction.

Every resample draws items with replacement; all ratings of a drawn item (every rubric, every checklist
criterion) come along together, because ratings of one item are not independent. Statistics that are
functions of per-item sums (contingency tables, moments) are resampled with one sparse matrix product
per chunk of resamples instead of a Python loop: replicate ``b`` is ``counts[b] @ per_item_sums``.
"""

from __future__ import annotations

from typing import Any

from collections.abc import Iterator

import numpy as np
from scipy import sparse

_CHUNK_CELLS = 4_000_000  # resample-count cells held in memory at once (32 MB of int64)


def _drawn(n_items: int, n_boot: int, seed: int) -> Iterator[np.ndarray]:
    """Each resample's drawn items (n_items,) in turn: the one source of the draws. One resample's draws at a time
    give the same generator stream as one (n_boot × n_items) call."""
    if n_items < 1:
        raise ValueError("cannot bootstrap zero items")
    rng = np.random.default_rng(seed)
    for _ in range(n_boot):
        yield rng.integers(0, n_items, size=n_items, dtype=np.int64)


def _resamples(n_items: int, n_boot: int, seed: int) -> Iterator[np.ndarray]:
    """Each resample's counts (n_items,) in turn; a bincount over one resample fits in cache."""
    for drawn in _drawn(n_items, n_boot, seed):
        yield np.bincount(drawn, minlength=n_items)


def resample_counts(n_items: int, n_boot: int, seed: int) -> Iterator[np.ndarray]:
    """Yield (chunk × n_items) arrays: how often each item is drawn in each bootstrap resample.

    Chunk size depends only on ``n_items``, and the draws not even on that: a given (n_items, n_boot, seed) always
    yields the same draws.
    """
    chunk = max(1, min(n_boot, _CHUNK_CELLS // max(n_items, 1)))
    draws = _resamples(n_items, n_boot, seed)
    if n_boot <= 0:
        next(draws, None)  # the zero-items check still applies
        return
    for done in range(0, n_boot, chunk):
        size = min(chunk, n_boot - done)
        counts = np.empty((size, n_items), dtype=np.int64)
        for b in range(size):
            counts[b] = next(draws)
        yield counts


def bootstrap_sums(per_item: np.ndarray | sparse.spmatrix, n_boot: int, seed: int) -> np.ndarray:
    """Resampled column sums of a (n_items × m) matrix of per-item sums: returns (n_boot × m).

    ``per_item`` may be dense or scipy-sparse; sparse is much faster when each item fills few columns.
    """
    mat: Any = sparse.csr_matrix(per_item) if sparse.issparse(per_item) else np.asarray(per_item, dtype=float)
    n_items, m = mat.shape
    out = np.empty((n_boot, m))
    row = 0
    if not sparse.issparse(mat):
        transposed = mat.T
        for counts in resample_counts(n_items, n_boot, seed):
            block = transposed @ counts.T.astype(float)  # (m × chunk)
            out[row : row + counts.shape[0]] = np.asarray(block).T
            row += counts.shape[0]
        return out
    # sparse: a few resamples at a time, each resample's counts one row of a reused float block (contiguous writes;
    # a column of an (items × resamples) block was a strided write over the whole block per resample). scipy
    # multiplies ``block @ mat`` row by row of ``mat`` (``csc_matvecs`` on ``mat.T``), so each replicate is the
    # same sum of count × value in the same item order as one resample at a time: the same bits. Neither a chunk
    # of integer counts nor a float copy of one is ever held.
    merged = _merged_rows(mat)
    if merged is None:
        drawn_counts = _resamples(n_items, n_boot, seed)
    else:  # items with equal rows counted together: a bincount into few bins, a product with few rows
        of_item, mat = merged
        drawn_counts = (np.bincount(of_item[drawn], minlength=mat.shape[0]) for drawn in _drawn(n_items, n_boot, seed))
    block = np.empty((_SUB, mat.shape[0]))
    for start in range(0, n_boot, _SUB):
        width = min(_SUB, n_boot - start)
        dense = block[:width]
        for k in range(width):
            dense[k] = next(drawn_counts)
        out[start : start + width] = np.asarray(dense @ mat)
    return out


def _merged_rows(mat: sparse.csr_matrix) -> tuple[np.ndarray, sparse.csr_matrix] | None:
    """(each item's row among the distinct rows, the distinct rows) of an integer matrix where many items share a
    row (contingency tables: an item's cells across a few rubrics), else None. Integers only: every count × value
    and every partial sum is then exact, so counting equal rows together gives the per-item sums' bits."""
    n_items = mat.shape[0]
    data = mat.data
    if n_items < 2 or not data.size or not np.isfinite(data).all() or not (data == np.rint(data)).all():
        return None
    if np.abs(data).max() * n_items >= 2**53:  # a sum could round
        return None
    key = mat @ np.random.default_rng(0).random(mat.shape[1])  # equal rows, equal keys (the same sum in order)
    _, first, of_item = np.unique(key, return_index=True, return_inverse=True)
    if 2 * first.size > n_items:
        return None
    rows = mat[first]
    if (mat != rows[of_item]).nnz:  # two different rows with one key: never merge them
        return None
    return of_item.astype(np.intp, copy=False), rows


_SUB = 16  # resamples per sparse product


def percentile_interval(replicates: np.ndarray, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval over axis 0 of bootstrap replicates, ignoring replicates where it is undefined."""
    r = np.asarray(replicates, dtype=float)
    alpha = (1.0 - level) / 2.0
    finite = np.isfinite(r)
    if r.ndim == 1:
        if not finite.any():
            return np.array(np.nan), np.array(np.nan)
        lo, hi = np.percentile(r[finite], [100 * alpha, 100 * (1 - alpha)])
        return np.asarray(lo), np.asarray(hi)
    safe = np.where(finite, r, np.nan)
    with np.errstate(all="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns stay NaN
            lo = np.nanpercentile(safe, 100 * alpha, axis=0)
            hi = np.nanpercentile(safe, 100 * (1 - alpha), axis=0)
    return lo, hi


def paired_pvalue(differences: np.ndarray) -> float:
    """Two-sided bootstrap p-value that a paired difference is zero, from its replicates.

    p = 2·min(#{d ≤ 0}, #{d ≥ 0}) adjusted by +1 in numerator and denominator (so it is never 0), capped at 1.
    """
    d = np.asarray(differences, dtype=float)
    d = d[np.isfinite(d)]
    if d.size == 0:
        return float("nan")
    below = np.count_nonzero(d <= 0)
    above = np.count_nonzero(d >= 0)
    return float(min(1.0, 2.0 * (min(below, above) + 1) / (d.size + 1)))


def holm(pvalues: np.ndarray | list[float]) -> np.ndarray:
    """Holm step-down adjusted p-values; NaN entries stay NaN and are not counted.

    Four lines of numpy rather than ``statsmodels.stats.multitest.multipletests``, which runs a full
    ``gc.collect()`` on every Holm call (about 0.1 s each in a process that has imported dspy, and a
    report makes one call per contender pair and metric); the tests check this against statsmodels.
    """
    p = np.asarray(pvalues, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    if ok.size:
        order = ok[np.argsort(p[ok], kind="stable")]
        adjusted = np.maximum.accumulate(p[order] * np.arange(ok.size, 0, -1))
        out[order] = np.minimum(adjusted, 1.0)
    return out


def bootstrap_mean_difference(differences_by_item: list[np.ndarray], n_boot: int, seed: int) -> np.ndarray:
    """Replicates of the mean of per-item differences, resampling items (each item may hold several)."""
    sums = np.array([[d.sum(), d.size] for d in differences_by_item], dtype=float)
    reps = bootstrap_sums(sums, n_boot, seed)
    with np.errstate(divide="ignore", invalid="ignore"):
        return reps[:, 0] / reps[:, 1]
