"""Agreement statistics computed from (batches of) contingency tables, for vectorised bootstrapping.

For paired ratings on a finite scale the human × judge contingency table is a sufficient statistic of
every pairwise statistic we report, and tables add up over items. So a bootstrap replicate is a
count-weighted sum of per-item tables, and one matrix product gives all replicates at once. The
statistics below take tables of shape (..., K, K) — rows human, columns judge — and return arrays of
shape (...). They are hand-written because no library evaluates these statistics on a batch of tables;
the tests check each one against scipy / scikit-learn / pingouin on the raw pairs.
"""

from __future__ import annotations

import numpy as np

from scijudge.metrics.agreement import AlphaLevel, agreement_weights, alpha_from_coincidence

ORDINAL_STATS: tuple[str, ...] = (
    "exact",
    "within1",
    "mae",
    "bias",
    "kappa_w",
    "kappa_linear",
    "alpha_ordinal",
    "alpha_interval",
    "ac2",
    "spearman",
    "kendall",
    "pearson",
    "icc_a1",
    "icc_c1",
    "top_share_judge",
    "top_share_human",
    "sd_ratio",
)
VERDICT_STATS: tuple[str, ...] = ("accuracy", "balanced_accuracy", "macro_f1", "kappa", "mcc")


def _weighted_corr(t: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pearson correlation of row scores ``a`` (..., K) and column scores ``b`` (..., K) weighted by ``t``."""
    n = t.sum(axis=(-1, -2))
    ma = np.einsum("...hj,...h->...", t, a) / n
    mb = np.einsum("...hj,...j->...", t, b) / n
    va = np.einsum("...hj,...h->...", t, a * a) / n - ma**2
    vb = np.einsum("...hj,...j->...", t, b * b) / n - mb**2
    cov = np.einsum("...hj,...h,...j->...", t, a, b) / n - ma * mb
    return cov / np.sqrt(va * vb)


def _midranks(margin: np.ndarray) -> np.ndarray:
    """Mid-rank of each category given its counts (ties share the average rank), batched over (..., K)."""
    return np.cumsum(margin, axis=-1) - margin + (margin + 1.0) / 2.0


def _kendall_tau_b(t: np.ndarray) -> np.ndarray:
    """Kendall's tau-b of a (..., K, K) table from concordant/discordant pair counts."""
    k = t.shape[-1]
    # ge[a, b] = sum of t[c, d] with c >= a and d >= b ; le_ge[a, b] = sum with c >= a and d <= b
    ge = np.flip(np.cumsum(np.cumsum(np.flip(t, (-1, -2)), axis=-1), axis=-2), (-1, -2))
    ge_le = np.flip(np.cumsum(np.cumsum(np.flip(t, -2), axis=-2), axis=-1), -2)
    pad = [(0, 0)] * (t.ndim - 2)
    ge_p = np.pad(ge, pad + [(0, 1), (0, 1)])
    ge_le_p = np.pad(ge_le, pad + [(0, 1), (1, 0)])
    concordant = np.sum(t * ge_p[..., 1 : k + 1, 1 : k + 1], axis=(-1, -2))
    discordant = np.sum(t * ge_le_p[..., 1 : k + 1, 0:k], axis=(-1, -2))
    n = t.sum(axis=(-1, -2))
    rows = t.sum(axis=-1)
    cols = t.sum(axis=-2)
    n0 = n * (n - 1) / 2.0
    n1 = np.sum(rows * (rows - 1) / 2.0, axis=-1)
    n2 = np.sum(cols * (cols - 1) / 2.0, axis=-1)
    return (concordant - discordant) / np.sqrt((n0 - n1) * (n0 - n2))


def ordinal_stats(tables: np.ndarray, values: np.ndarray, tolerance: float,
                  only: tuple[str, ...] | None = None) -> dict[str, np.ndarray]:
    """Every ordinal statistic of ``ORDINAL_STATS`` for a batch of human × judge tables (..., K, K); with ``only``,
    the moment statistics (exact, within1, mae, bias, kappa_w, pearson) and those of ``only`` (paired comparisons
    need two of them on 1,000 tables per side, and the coincidence, rank and ANOVA ones were most of the cost)."""
    t = np.asarray(tables, dtype=float)
    v = np.asarray(values, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        n = t.sum(axis=(-1, -2))
        rows = t.sum(axis=-1)  # human margin
        cols = t.sum(axis=-2)  # judge margin
        diff = v[None, :] - v[:, None]  # judge - human, indexed [human, judge]
        mean_h = rows @ v / n
        mean_j = cols @ v / n
        e_hh = rows @ (v * v) / n
        e_jj = cols @ (v * v) / n
        e_hj = np.einsum("...hj,h,j->...", t, v, v) / n
        var_h = e_hh - mean_h**2
        var_j = e_jj - mean_j**2
        cov = e_hj - mean_h * mean_j
        out: dict[str, np.ndarray] = {
            "exact": np.trace(t, axis1=-2, axis2=-1) / n,
            "within1": np.sum(t * (np.abs(diff) <= tolerance + 1e-9), axis=(-1, -2)) / n,
            "mae": np.sum(t * np.abs(diff), axis=(-1, -2)) / n,
            "bias": mean_j - mean_h,
            "kappa_w": 2.0 * cov / (var_h + var_j + (mean_j - mean_h) ** 2),
            "pearson": cov / np.sqrt(var_h * var_j),
        }
        if only is not None and set(only) <= set(out):
            return out
        # linear-weighted κ: 1 − Σ|i−j|·observed / Σ|i−j|·expected (scikit-learn's weights="linear")
        lin = np.abs(np.arange(v.size)[None, :] - np.arange(v.size)[:, None]).astype(float)
        expected = rows[..., :, None] * cols[..., None, :] / n[..., None, None]
        out["kappa_linear"] = 1.0 - np.sum(t * lin, axis=(-1, -2)) / np.sum(expected * lin, axis=(-1, -2))
        coinc = t + np.swapaxes(t, -1, -2)
        levels: tuple[AlphaLevel, ...] = ("ordinal", "interval")
        for level in levels:
            out[f"alpha_{level}"] = alpha_from_coincidence(coinc, v, level)
        w = agreement_weights(v, "quadratic")
        q = v.size
        pa = np.sum(t * w, axis=(-1, -2)) / n
        pi = (rows + cols) / (2.0 * n[..., None])
        pe = w.sum() / (q * (q - 1)) * np.sum(pi * (1.0 - pi), axis=-1)
        out["ac2"] = (pa - pe) / (1.0 - pe)
        out["spearman"] = _weighted_corr(t, _midranks(rows), _midranks(cols))
        out["kendall"] = _kendall_tau_b(t)
        # two-way ANOVA with k = 2 raters (human, judge) from the same moments
        grand = (mean_h + mean_j) / 2.0
        ss_rows = 2.0 * (n * (e_hh + e_jj + 2.0 * e_hj) / 4.0 - n * grand**2)
        ss_cols = n * ((mean_h - grand) ** 2 + (mean_j - grand) ** 2)
        ss_err = n * (e_hh + e_jj) - 2.0 * n * grand**2 - ss_rows - ss_cols
        ms_r = ss_rows / (n - 1)
        ms_e = ss_err / (n - 1)
        out["icc_c1"] = (ms_r - ms_e) / (ms_r + ms_e)
        out["icc_a1"] = (ms_r - ms_e) / (ms_r + ms_e + 2.0 * (ss_cols - ms_e) / n)
        out["top_share_judge"] = cols[..., -1] / n
        out["top_share_human"] = rows[..., -1] / n
        out["sd_ratio"] = np.sqrt(var_j / var_h)
    return out


def verdict_stats(tables: np.ndarray) -> dict[str, np.ndarray]:
    """Accuracy, balanced accuracy, macro-F1, Cohen's kappa and MCC of (..., C, C) human × judge tables.

    Classes absent from both margins of a table are ignored, as scikit-learn does for labels absent from
    ``y_true`` and ``y_pred``.
    """
    t = np.asarray(tables, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        n = t.sum(axis=(-1, -2))
        diag = np.diagonal(t, axis1=-2, axis2=-1)
        rows = t.sum(axis=-1)  # true (human)
        cols = t.sum(axis=-2)  # predicted (judge)
        correct = diag.sum(axis=-1)
        recall = np.where(rows > 0, diag / rows, 0.0)
        balanced = recall.sum(axis=-1) / (rows > 0).sum(axis=-1)
        present = (rows + cols) > 0
        f1 = np.where(present, 2.0 * diag / (rows + cols), 0.0)
        macro_f1 = f1.sum(axis=-1) / present.sum(axis=-1)
        po = correct / n
        pe = np.sum(rows * cols, axis=-1) / n**2
        kappa = (po - pe) / (1.0 - pe)
        mcc = (correct * n - np.sum(rows * cols, axis=-1)) / np.sqrt(
            (n**2 - np.sum(cols**2, axis=-1)) * (n**2 - np.sum(rows**2, axis=-1))
        )
    return {"accuracy": po, "balanced_accuracy": balanced, "macro_f1": macro_f1, "kappa": kappa, "mcc": mcc}
