"""Continuous scales (e.g. an overall that is the mean of half-step criteria): statistics of the raw values.

MAE, bias, Pearson r, ICC(A,1)/ICC(C,1) and the SD ratio are functions of seven per-item sums
(n, Σj, Σh, Σj², Σh², Σjh, Σ|j−h|), so one sparse bootstrap gives their intervals, as for the tables.
Spearman and Kendall use the raw values for the point estimate (scipy) and for their intervals: each
resample (the same item draws as every other statistic) recomputes them on the raw pairs of the drawn items.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from scijudge.metrics import agreement as ag

MOMENT_STATS: tuple[str, ...] = ("mae", "bias", "pearson", "icc_a1", "icc_c1", "sd_ratio")
RAW_POINT_STATS: tuple[str, ...] = (*MOMENT_STATS, "spearman", "kendall")
N_MOMENTS = 7


def moment_cells(j: np.ndarray, h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per pair: the seven moment columns and their values, to add to a bootstrap block."""
    vals = np.column_stack([np.ones_like(j), j, h, j * j, h * h, j * h, np.abs(j - h)])
    cells = np.tile(np.arange(N_MOMENTS), len(j))
    return cells, vals.reshape(-1)


def moment_stats(m: np.ndarray) -> dict[str, np.ndarray]:
    """The raw-value statistics from (..., 7) moment sums (two raters: judge and human)."""
    n, sj, sh, sjj, shh, sjh, sad = (m[..., i] for i in range(N_MOMENTS))
    with np.errstate(all="ignore"):
        mj, mh = sj / n, sh / n
        vj, vh = sjj / n - mj**2, shh / n - mh**2
        cov = sjh / n - mj * mh
        grand = (sj + sh) / (2 * n)
        ss_total = sjj + shh - 2 * n * grand**2
        ss_rows = 0.5 * (sjj + shh + 2 * sjh) - 2 * n * grand**2
        ss_cols = n * ((mj - grand) ** 2 + (mh - grand) ** 2)
        ss_err = ss_total - ss_rows - ss_cols
        msr, msc, mse = ss_rows / (n - 1), ss_cols, ss_err / (n - 1)
        return {
            "mae": sad / n,
            "bias": mj - mh,
            "pearson": cov / np.sqrt(vj * vh),
            "icc_c1": (msr - mse) / (msr + mse),
            "icc_a1": (msr - mse) / (msr + mse + 2 * (msc - mse) / n),
            "sd_ratio": np.sqrt(vj / vh),
        }


def raw_point(j: np.ndarray, h: np.ndarray) -> dict[str, float]:
    """Point estimates on the raw values from the library-backed functions (scipy / pingouin-checked)."""
    out: dict[str, float] = {"mae": ag.mean_absolute_error(j, h)}
    bias = ag.mean_bias(j, h)
    out.update(bias=bias.bias, bias_t=bias.t, bias_p=bias.p_ttest, bias_p_wilcoxon=bias.p_wilcoxon)
    constant = j.size < 2 or np.ptp(j) == 0 or np.ptp(h) == 0
    with np.errstate(all="ignore"):
        out["spearman"] = ag.spearman(j, h)
        out["kendall"] = ag.kendall_tau_b(j, h)
        out["pearson"] = ag.pearson(j, h)
        icc = ag.icc(np.column_stack([h, j])) if j.size >= 2 and not (np.ptp(j) == 0 and np.ptp(h) == 0) else {}
        out["icc_a1"] = icc.get("ICC(A,1)", float("nan"))
        out["icc_c1"] = icc.get("ICC(C,1)", float("nan"))
        out["sd_ratio"] = ag.sd_ratio(j, h) if not constant else float("nan")
    return out


# The levels-table path holds a (chunk × levels of j × levels of h) table of integer counts; above this many
# cells per resample (raw values with very many distinct levels) each resample is ranked on its pairs instead.
_MAX_TABLE_CELLS = 1024


def rank_replicates(counts: np.ndarray | Iterable[np.ndarray], j: np.ndarray, h: np.ndarray) -> dict[str, np.ndarray]:
    """Spearman ρ and Kendall τb of every resample of raw pairs; ``counts`` (n_boot × pairs, or chunks of
    resamples in order, as ``_Blocks.pair_counts`` yields them) says how often each pair's item was drawn. The
    same numbers, bit for bit, as scipy's ``rankdata`` + ``np.corrcoef`` and ``kendalltau`` on each resample
    (the point estimate's functions), computed from each resample's table of counts per (j level, h level):

    - τb from scipy's own formula on the same integer pair counts (concordant − discordant, ties in j, ties in
      h, all exact integers), so the one float expression is the same;
    - ρ from the midranks of the levels (exact half-integers, as ``rankdata`` gives) put back in the resample's
      order, then numpy's ``corrcoef`` steps as before: their sum order is what fixes the last bits.

    Raw values with very many distinct levels are ranked per resample on the pairs, with scipy, as before.
    scipy's per-call overhead (argument checks, NaN policy) was 90% of calibrate's CPU on a jury (40 rows ×
    1,000 resamples): hence the hand-written counts here, tested against scipy on every resample."""
    chunks = [counts] if isinstance(counts, np.ndarray) else counts
    j_values, j_level = np.unique(j, return_inverse=True)
    h_values, h_level = np.unique(h, return_inverse=True)
    if j_values.size * h_values.size > _MAX_TABLE_CELLS:
        return _rank_replicates_per_resample(chunks, j, h)
    rho: list[np.ndarray] = []
    tau: list[np.ndarray] = []
    for chunk in chunks:
        r, t = _rank_stats_from_tables(np.asarray(chunk, dtype=np.int64), j_level, h_level,
                                       j_values.size, h_values.size)
        rho.append(r)
        tau.append(t)
    if not rho:
        return {"spearman": np.array([], dtype=float), "kendall": np.array([], dtype=float)}
    return {"spearman": np.concatenate(rho), "kendall": np.concatenate(tau)}


def _rank_stats_from_tables(chunk: np.ndarray, j_level: np.ndarray, h_level: np.ndarray, kj: int,
                            kh: int) -> tuple[np.ndarray, np.ndarray]:
    """(ρ, τb) of each resample of ``chunk`` (resamples × pairs) from its (kj × kh) table of counts."""
    from scipy import sparse

    n_res, n_pairs = chunk.shape
    cells = sparse.csr_matrix((np.ones(n_pairs, dtype=np.int64), (j_level * kh + h_level, np.arange(n_pairs))),
                              shape=(kj * kh, n_pairs))
    t = np.asarray((cells @ chunk.T).T, dtype=np.int64).reshape(n_res, kj, kh)  # integer sums: exact
    size = t.sum(axis=(1, 2))
    rows, cols = t.sum(axis=2), t.sum(axis=1)
    # pairs strictly greater in both (concordant) and greater in j but smaller in h (discordant), per cell
    below_right = np.zeros_like(t)
    below_right[:, :-1, :-1] = np.flip(np.cumsum(np.cumsum(np.flip(t[:, 1:, 1:], (1, 2)), axis=1), axis=2), (1, 2))
    below_left = np.zeros_like(t)
    below_left[:, :-1, 1:] = np.flip(np.cumsum(np.flip(np.cumsum(t[:, 1:, :-1], axis=2), 1), axis=1), 1)
    con = (t * below_right).sum(axis=(1, 2))
    dis = (t * below_left).sum(axis=(1, 2))
    tot = size * (size - 1) // 2
    xtie = (rows * (rows - 1) // 2).sum(axis=1)
    ytie = (cols * (cols - 1) // 2).sum(axis=1)
    tau = np.full(n_res, np.nan)
    ok = (size >= 1) & (xtie != tot) & (ytie != tot)
    with np.errstate(all="ignore"):
        # scipy's expression (kendalltau, variant b) on the same integers, then its clip to [-1, 1]
        raw = (con - dis)[ok] / np.sqrt(tot[ok] - xtie[ok]) / np.sqrt(tot[ok] - ytie[ok])
    tau[ok] = np.minimum(1.0, np.maximum(-1.0, raw))
    # midranks of each level in each resample: rankdata's "average" ranks, exact half-integers
    j_ranks = np.cumsum(rows, axis=1) - rows + (rows + 1) / 2.0
    h_ranks = np.cumsum(cols, axis=1) - cols + (cols + 1) / 2.0
    rho = np.full(n_res, np.nan)
    positions = np.arange(chunk.shape[1])
    with np.errstate(all="ignore"):
        for b in range(n_res):
            if size[b] < 2 or np.count_nonzero(rows[b]) < 2 or np.count_nonzero(cols[b]) < 2:
                continue  # constant ranks: NaN, as before
            idx = np.repeat(positions, chunk[b])
            rho[b] = _corrcoef(j_ranks[b][j_level[idx]], h_ranks[b][h_level[idx]])
    return rho, tau


def _corrcoef(x: np.ndarray, y: np.ndarray) -> float:
    """``np.corrcoef(x, y)[0, 1]`` of two non-constant vectors by numpy's own steps (``cov`` then ``corrcoef``:
    the row means, the same ``dot`` of the centred rows, the same divisions), hence the same bits, without its
    argument handling, which was three quarters of its cost here (tests compare it with ``np.corrcoef``)."""
    rows = np.empty((2, x.size))
    rows[0], rows[1] = x, y
    rows -= rows.mean(axis=1)[:, None]
    c = np.dot(rows, rows.T.conj())
    c *= np.true_divide(1, x.size - 1)
    r = c[0, 1] / np.sqrt(c[0, 0]) / np.sqrt(c[1, 1])
    return float(min(1.0, max(-1.0, r)))


def _rank_replicates_per_resample(chunks: Iterable[np.ndarray], j: np.ndarray, h: np.ndarray) -> dict[str, np.ndarray]:
    """ρ and τb of each resample with scipy on the resample's pairs (raw values with very many levels)."""
    from scipy import stats

    rho: list[float] = []
    tau: list[float] = []
    positions = np.arange(j.size)
    with np.errstate(all="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # constant resamples: NaN, left out of the percentiles
            for chunk in chunks:
                for row in chunk:
                    idx = np.repeat(positions, row)
                    if idx.size < 2:
                        rho.append(np.nan)
                        tau.append(np.nan)
                        continue
                    jb, hb = j[idx], h[idx]
                    rj, rh = stats.rankdata(jb), stats.rankdata(hb)
                    rho.append(np.corrcoef(rj, rh)[0, 1] if np.ptp(rj) and np.ptp(rh) else np.nan)
                    tau.append(stats.kendalltau(jb, hb).statistic)
    return {"spearman": np.array(rho, dtype=float), "kendall": np.array(tau, dtype=float)}


def rounding_note(grid_step: float) -> str:
    """What a continuous row's statistics were computed on, stated once per row."""
    return (f"continuous scale: MAE (paired comparisons too), bias, correlations, ICC and SD ratio on the raw values; κ, α, AC2, exact and "
            f"within-one-step agreement and confusion after rounding both sides to the {grid_step:g} grid "
            "(half-way to the even step)")


def split_raw(pairs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Raw judge and human values of continuous pairs (kept beside their grid-rounded copies)."""
    return pairs["score_raw"].to_numpy(float), pairs["h_raw"].to_numpy(float)


def replicate_moments(reps: list[Any]) -> np.ndarray | None:
    """Sum the moment replicates of several groups (pooled rows); None when the bootstrap is off."""
    parts = [r for r in reps if r is not None]
    return np.sum(parts, axis=0) if parts else None
