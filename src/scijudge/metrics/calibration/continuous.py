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


def rank_replicates(counts: np.ndarray | Iterable[np.ndarray], j: np.ndarray, h: np.ndarray) -> dict[str, np.ndarray]:
    """Spearman ρ and Kendall τb of every resample of raw pairs; ``counts`` (n_boot × pairs, or chunks of
    resamples in order, as ``_Blocks.pair_counts`` yields them) says how often each pair's item was drawn. Same
    functions as the point estimate (scipy), so interval and estimate agree."""
    from scipy import stats

    rho: list[float] = []
    tau: list[float] = []
    positions = np.arange(j.size)
    chunks = [counts] if isinstance(counts, np.ndarray) else counts
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
    return (f"continuous scale: MAE, bias, correlations, ICC and SD ratio on the raw values; κ, α, AC2, exact and "
            f"within-one-step agreement and confusion after rounding both sides to the {grid_step:g} grid "
            "(half-way to the even step)")


def split_raw(pairs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Raw judge and human values of continuous pairs (kept beside their grid-rounded copies)."""
    return pairs["score_raw"].to_numpy(float), pairs["h_raw"].to_numpy(float)


def replicate_moments(reps: list[Any]) -> np.ndarray | None:
    """Sum the moment replicates of several groups (pooled rows); None when the bootstrap is off."""
    parts = [r for r in reps if r is not None]
    return np.sum(parts, axis=0) if parts else None
