"""Agreement statistics between a judge and human labels, as plain functions on numpy arrays.

Point estimates come from scipy and scikit-learn wherever they compute the statistic. Three are written
here by hand because no well-kept, permissively licensed package computes them: Krippendorff's alpha and
Gwet's AC2 (the common packages are GPL-3 or pin an old scipy) and the two-way ICCs (neither scipy,
scikit-learn nor statsmodels has them). Each is cross-checked in the tests against those packages and
against published worked examples.

Conventions: ``judge`` and ``human`` are paired 1-D arrays; ``values`` is the FULL ordered list of scale
points (e.g. ``[1, 2, 3, 4, 5]``), so that weights and chance agreement do not depend on which points
happen to be used.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats
from sklearn import metrics as skm

from scijudge.vocab import ScaleTuple

ArrayLike = Sequence[float] | np.ndarray
AlphaLevel = Literal["nominal", "ordinal", "interval", "ratio"]


def scale_values(lo: float, hi: float, step: float) -> np.ndarray:
    """All points of a scale ``lo..hi`` in ``step`` increments (``(1, 5, 0.5)`` gives 1, 1.5, ..., 5)."""
    if step <= 0 or hi <= lo:
        raise ValueError(f"invalid scale ({lo}, {hi}, {step}): need lo < hi and step > 0")
    count = round((hi - lo) / step)
    if abs(lo + count * step - hi) > step * 1e-6:
        raise ValueError(f"invalid scale ({lo}, {hi}, {step}): hi - lo is not a multiple of step")
    return np.asarray(ScaleTuple(float(lo), float(hi), float(step)).levels(), dtype=float)  # (the one levels rule)


def _pair(judge: ArrayLike, human: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    j = np.asarray(judge, dtype=float)
    h = np.asarray(human, dtype=float)
    if j.shape != h.shape or j.ndim != 1:
        raise ValueError(f"judge and human must be 1-D arrays of the same length, got {j.shape} and {h.shape}")
    if j.size == 0:
        raise ValueError("no paired ratings")
    return j, h


def to_index(x: ArrayLike, values: ArrayLike) -> np.ndarray:
    """Position of each score among the scale ``values`` (scikit-learn treats 1.5 as continuous, not a class)."""
    v = np.asarray(values, dtype=float)
    a = np.asarray(x, dtype=float)
    idx = np.searchsorted((v[1:] + v[:-1]) / 2.0, a)
    if not np.allclose(v[idx], a):
        raise ValueError("scores contain values that are not points of the scale")
    return idx


# --- simple ordinal agreement -------------------------------------------------------------------------


def exact_agreement(judge: ArrayLike, human: ArrayLike) -> float:
    """Share of pairs where the judge gives exactly the human score."""
    j, h = _pair(judge, human)
    return float(np.mean(np.isclose(j, h)))


def within_agreement(judge: ArrayLike, human: ArrayLike, tolerance: float) -> float:
    """Share of pairs within ``tolerance`` of each other (±1 on integer scales, ±0.5 on half-point ones)."""
    j, h = _pair(judge, human)
    return float(np.mean(np.abs(j - h) <= tolerance + 1e-9))


def mean_absolute_error(judge: ArrayLike, human: ArrayLike) -> float:
    """Mean absolute difference between judge and human scores (scikit-learn)."""
    j, h = _pair(judge, human)
    return float(skm.mean_absolute_error(h, j))


@dataclass(frozen=True)
class BiasTest:
    """Mean bias (judge − human) with a paired t-test and a Wilcoxon signed-rank test."""

    bias: float
    t: float
    p_ttest: float
    p_wilcoxon: float
    n: int


def mean_bias(judge: ArrayLike, human: ArrayLike) -> BiasTest:
    """Mean of judge − human, tested against zero with scipy's paired t-test and the Wilcoxon signed-rank test
    (``scijudge.metrics.signed_rank``: exact up to 400 non-zero differences, ties included, in milliseconds).

    When every difference is zero there is no evidence of bias at all: both p-values are 1 (scipy would
    return NaN because the test statistic is 0/0).
    """
    j, h = _pair(judge, human)
    d = j - h
    if np.allclose(d, 0.0):
        return BiasTest(bias=0.0, t=0.0, p_ttest=1.0, p_wilcoxon=1.0, n=int(d.size))
    if d.size < 2:
        return BiasTest(bias=float(d.mean()), t=float("nan"), p_ttest=float("nan"), p_wilcoxon=float("nan"), n=1)
    if np.allclose(d, d[0]):  # constant non-zero difference: t is infinite, the bias is certain
        t_stat, p_t = float(np.sign(d[0]) * np.inf), 0.0
    else:
        res = stats.ttest_rel(j, h)
        t_stat, p_t = float(res.statistic), float(res.pvalue)
    from scijudge.metrics.signed_rank import signed_rank_pvalue

    p_w = signed_rank_pvalue(d)
    return BiasTest(bias=float(d.mean()), t=t_stat, p_ttest=p_t, p_wilcoxon=p_w, n=int(d.size))


def top_share(scores: ArrayLike, top: float) -> float:
    """Share of scores at the top of the scale (the optimism signature of untuned judges)."""
    s = np.asarray(scores, dtype=float)
    return float(np.mean(np.isclose(s, top)))


def sd_ratio(judge: ArrayLike, human: ArrayLike) -> float:
    """Judge SD / human SD: below 1 means the judge compresses the scale."""
    j, h = _pair(judge, human)
    sh = np.std(h, ddof=1) if h.size > 1 else float("nan")
    return float(np.std(j, ddof=1) / sh) if sh and np.isfinite(sh) else float("nan")


# --- chance-corrected and correlation statistics ---------------------------------------------------


def weighted_kappa(
    judge: ArrayLike, human: ArrayLike, values: ArrayLike, weights: Literal["quadratic", "linear"] | None = "quadratic"
) -> float:
    """Cohen's kappa (quadratic weights by default) over the full scale ``values`` (scikit-learn)."""
    j, h = _pair(judge, human)
    labels = np.arange(len(values))  # equally spaced scale: index distance = score distance
    return float(skm.cohen_kappa_score(to_index(h, values), to_index(j, values), labels=labels, weights=weights))


def kappa_from_confusion(table: np.ndarray, weights: Literal["quadratic", "linear"] | None = "quadratic") -> float:
    """``weighted_kappa`` from the pairs' ``confusion`` table (scikit-learn, given each of the K² cells once with
    its count as sample weight): the same integer confusion matrix inside, so the same kappa, without sorting and
    checking every pair again for each weighting."""
    t = np.asarray(table)
    labels = np.arange(t.shape[0])
    return float(skm.cohen_kappa_score(np.repeat(labels, labels.size), np.tile(labels, labels.size), labels=labels,
                                       weights=weights, sample_weight=t.reshape(-1)))


def spearman(judge: ArrayLike, human: ArrayLike) -> float:
    """Spearman's rank correlation (scipy; ties get mid-ranks)."""
    j, h = _pair(judge, human)
    if np.ptp(j) == 0 or np.ptp(h) == 0:
        return float("nan")
    return float(stats.spearmanr(j, h).statistic)


def kendall_tau_b(judge: ArrayLike, human: ArrayLike) -> float:
    """Kendall's tau-b, which corrects for ties on both sides (scipy)."""
    j, h = _pair(judge, human)
    if np.ptp(j) == 0 or np.ptp(h) == 0:
        return float("nan")
    return float(stats.kendalltau(j, h, variant="b").statistic)


def pearson(judge: ArrayLike, human: ArrayLike) -> float:
    """Pearson's correlation (scipy)."""
    j, h = _pair(judge, human)
    if j.size < 2 or np.ptp(j) == 0 or np.ptp(h) == 0:
        return float("nan")
    return float(stats.pearsonr(j, h).statistic)


def confusion(judge: ArrayLike, human: ArrayLike, values: ArrayLike) -> np.ndarray:
    """Confusion matrix over the full scale: rows are human scores, columns judge scores (scikit-learn)."""
    j, h = _pair(judge, human)
    return skm.confusion_matrix(to_index(h, values), to_index(j, values), labels=np.arange(len(values)))


def icc(ratings: np.ndarray) -> dict[str, float]:
    """ICC(A,1) (absolute agreement) and ICC(C,1) (consistency) from a two-way ANOVA (McGraw & Wong, 1996).

    ``ratings`` is (subjects × raters) without missing values. Written by hand: scipy, scikit-learn and
    statsmodels have no ICC, and pingouin (which does) is GPL-3; it cross-checks this in the tests.
    """
    x = np.asarray(ratings, dtype=float)
    if x.ndim != 2 or x.shape[1] < 2:
        raise ValueError("icc needs a (subjects × raters) array with at least two raters")
    if np.isnan(x).any():
        raise ValueError("icc needs complete ratings: drop subjects with missing values first")
    n, k = x.shape
    if n < 2:
        return {"ICC(A,1)": float("nan"), "ICC(C,1)": float("nan")}
    grand = x.mean()
    ss_rows = k * np.sum((x.mean(axis=1) - grand) ** 2)
    ss_cols = n * np.sum((x.mean(axis=0) - grand) ** 2)
    ss_err = np.sum((x - grand) ** 2) - ss_rows - ss_cols
    ms_r = ss_rows / (n - 1)
    ms_c = ss_cols / (k - 1)
    ms_e = ss_err / ((n - 1) * (k - 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        icc_c = (ms_r - ms_e) / (ms_r + (k - 1) * ms_e)
        icc_a = (ms_r - ms_e) / (ms_r + (k - 1) * ms_e + k * (ms_c - ms_e) / n)
    return {"ICC(A,1)": float(icc_a), "ICC(C,1)": float(icc_c)}


# --- multi-rater reliability (missing ratings allowed) -------------------------------------------------


def _category_counts(ratings: np.ndarray, values: np.ndarray) -> np.ndarray:
    """(units × categories) counts of each scale value among a unit's ratings; NaN = missing."""
    x = np.asarray(ratings, dtype=float)
    present = ~np.isnan(x)
    idx = to_index(x[present], values)
    rows = np.nonzero(present)[0]
    k = values.size  # one bincount of (unit, category) codes: the counts np.add.at gave, without its per-element cost
    return np.bincount(rows * k + idx, minlength=x.shape[0] * k).reshape(x.shape[0], k).astype(float)


def coincidence_matrix(ratings: np.ndarray, values: ArrayLike) -> np.ndarray:
    """Krippendorff's coincidence matrix from (units × raters) ratings, NaN for a missing rating."""
    v = np.asarray(values, dtype=float)
    return _coincidence_from_counts(_category_counts(ratings, v), v)


def _coincidence_from_counts(counts: np.ndarray, v: np.ndarray) -> np.ndarray:
    m = counts.sum(axis=1)
    keep = m >= 2
    c = counts[keep]
    unit_weight = 1.0 / (m[keep] - 1)
    if np.all(np.frexp(unit_weight)[0] == 0.5):
        # every weight a power of two (units of two or three ratings, the usual case): with integer counts each
        # term n_uc·n_uk·w_u and every partial sum is exact, so a sum of outer products, without the (units × K × K)
        # array, gives the same bits (einsum, not BLAS: no helper threads for calibrate's point estimates)
        weighted = c * unit_weight[:, None]
        out = np.einsum("uk,ul->kl", weighted, c)
        out[np.diag_indices(v.size)] -= weighted.sum(axis=0)
        return out
    per_unit = c[:, :, None] * c[:, None, :]
    diagonal = np.arange(v.size)
    per_unit[:, diagonal, diagonal] -= c  # n_uc·(n_uc − 1) on the diagonal, in place: no two more (units × K × K) arrays
    return np.einsum("ukl,u->kl", per_unit, unit_weight)


def alpha_from_coincidence(coincidence: np.ndarray, values: ArrayLike, level: AlphaLevel) -> np.ndarray:
    """Krippendorff's alpha from one or a batch (..., K, K) of coincidence matrices (vectorised)."""
    o = np.asarray(coincidence, dtype=float)
    v = np.asarray(values, dtype=float)
    n_c = o.sum(axis=-1)
    n = n_c.sum(axis=-1)
    if level == "nominal":
        delta = np.broadcast_to(1.0 - np.eye(v.size), o.shape)
    elif level == "interval":
        delta = np.broadcast_to((v[:, None] - v[None, :]) ** 2, o.shape)
    elif level == "ratio":
        with np.errstate(divide="ignore", invalid="ignore"):
            d = ((v[:, None] - v[None, :]) / (v[:, None] + v[None, :])) ** 2
        delta = np.broadcast_to(np.nan_to_num(d), o.shape)
    elif level == "ordinal":
        cum = np.cumsum(n_c, axis=-1)
        # sum of n_g for g between c and k inclusive, minus half of the two ends (Krippendorff 2011, eq. 9)
        lo_idx = np.minimum.outer(np.arange(v.size), np.arange(v.size))
        hi_idx = np.maximum.outer(np.arange(v.size), np.arange(v.size))
        between = cum[..., hi_idx] - cum[..., lo_idx] + n_c[..., lo_idx]
        delta = (between - (n_c[..., :, None] + n_c[..., None, :]) / 2.0) ** 2
    else:
        raise ValueError(f"unknown level of measurement {level!r}")
    d_obs = np.sum(o * delta, axis=(-1, -2))
    d_exp = np.sum(n_c[..., :, None] * n_c[..., None, :] * delta, axis=(-1, -2))
    with np.errstate(divide="ignore", invalid="ignore"):
        return 1.0 - (n - 1) * d_obs / d_exp


def krippendorff_alpha(ratings: np.ndarray, values: ArrayLike | None = None, level: AlphaLevel = "ordinal") -> float:
    """Krippendorff's alpha for (units × raters) ratings, NaN = missing, over the scale ``values``.

    Written with numpy (Krippendorff, 2011, "Computing Krippendorff's alpha-reliability") because the
    common Python package is GPL-3; the tests cross-check it against that package and the paper's example.
    """
    x = np.asarray(ratings, dtype=float)
    v = np.unique(x[~np.isnan(x)]) if values is None else np.asarray(values, dtype=float)
    return float(alpha_from_coincidence(coincidence_matrix(x, v), v, level))


def agreement_weights(values: ArrayLike, kind: Literal["quadratic", "linear", "identity"] = "quadratic") -> np.ndarray:
    """Agreement weights between scale points: 1 on the diagonal, falling with distance over the full range."""
    v = np.asarray(values, dtype=float)
    span = v.max() - v.min()
    dist = np.abs(v[:, None] - v[None, :]) / span
    if kind == "quadratic":
        return 1.0 - dist**2
    if kind == "linear":
        return 1.0 - dist
    if kind == "identity":
        return np.eye(v.size)
    raise ValueError(f"unknown weights {kind!r}")


def gwet_ac2(
    ratings: np.ndarray, values: ArrayLike, weights: Literal["quadratic", "linear", "identity"] = "quadratic"
) -> float:
    """Gwet's AC2 (AC1 with identity weights) for (units × raters) ratings, NaN = missing (Gwet, 2014).

    Chance agreement uses the number of points of the FULL scale ``values``. Written with numpy because the
    Python package (irrCAC) pins an old scipy; the tests cross-check it against irrCAC.
    """
    v = np.asarray(values, dtype=float)
    counts = _category_counts(np.asarray(ratings, dtype=float), v)
    return float(ac2_from_unit_stats(ac2_unit_stats(counts, v, weights).sum(axis=0), v, weights))


def ordinal_reliability(ratings: np.ndarray, values: ArrayLike) -> dict[str, float]:
    """``krippendorff_alpha`` ordinal and interval and quadratic ``gwet_ac2`` of the same ratings, the same numbers,
    from one count of each unit's categories and one coincidence matrix instead of three and two."""
    v = np.asarray(values, dtype=float)
    counts = _category_counts(np.asarray(ratings, dtype=float), v)
    coincidence = _coincidence_from_counts(counts, v)
    return {"alpha_ordinal": float(alpha_from_coincidence(coincidence, v, "ordinal")),
            "alpha_interval": float(alpha_from_coincidence(coincidence, v, "interval")),
            "ac2": float(ac2_from_unit_stats(ac2_unit_stats(counts, v, "quadratic").sum(axis=0), v, "quadratic"))}


def ac2_unit_stats(counts: np.ndarray, values: np.ndarray, weights: str = "quadratic") -> np.ndarray:
    """Per-unit additive statistics of AC2: [pa_i·1(r_i≥2), 1(r_i≥2), r_ik/r_i (K values), 1(r_i≥1)].

    Summing rows over units (or over bootstrap-weighted units) gives everything AC2 needs.
    """
    w = agreement_weights(values, weights)  # type: ignore[arg-type]
    r = counts.sum(axis=1)
    weighted = counts @ w.T
    with np.errstate(divide="ignore", invalid="ignore"):
        pa_i = np.where(r >= 2, (counts * (weighted - 1.0)).sum(axis=1) / (r * (r - 1.0)), 0.0)
        share = np.where(r[:, None] >= 1, counts / r[:, None], 0.0)
    return np.column_stack([pa_i, (r >= 2).astype(float), share, (r >= 1).astype(float)])


def ac2_from_unit_stats(sums: np.ndarray, values: np.ndarray, weights: str = "quadratic") -> np.ndarray:
    """AC2 from summed unit statistics (see ``ac2_unit_stats``); works on a batch (..., K + 3)."""
    w = agreement_weights(values, weights)  # type: ignore[arg-type]
    q = values.size
    s = np.asarray(sums, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        pa = s[..., 0] / s[..., 1]
        pi = s[..., 2 : 2 + q] / s[..., -1:]
        pe = w.sum() / (q * (q - 1)) * np.sum(pi * (1.0 - pi), axis=-1)
        return (pa - pe) / (1.0 - pe)


# --- verdicts (nominal labels) -----------------------------------------------------------------------


@dataclass(frozen=True)
class VerdictScores:
    """Agreement of categorical verdicts with the human verdicts."""

    accuracy: float
    balanced_accuracy: float
    macro_f1: float
    kappa: float
    mcc: float
    n: int


def verdict_scores(judge: Sequence[str], human: Sequence[str]) -> VerdictScores:
    """Accuracy, balanced accuracy, macro-F1, Cohen's kappa and MCC of verdicts (all scikit-learn)."""
    j = np.asarray(judge, dtype=object)
    h = np.asarray(human, dtype=object)
    if j.shape != h.shape or j.size == 0:
        raise ValueError("judge and human verdicts must be non-empty and of the same length")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sklearn warns on classes missing from y_true; we follow its rule
        single = len(set(h.tolist()) | set(j.tolist())) < 2
        kappa = float("nan") if single else float(skm.cohen_kappa_score(h, j))
        mcc = float("nan") if single else float(skm.matthews_corrcoef(h, j))
        return VerdictScores(
            accuracy=float(skm.accuracy_score(h, j)),
            balanced_accuracy=float(skm.balanced_accuracy_score(h, j)),
            macro_f1=float(skm.f1_score(h, j, average="macro", zero_division=0)),
            kappa=kappa,
            mcc=mcc,
            n=int(h.size),
        )


# --- probability calibration -------------------------------------------------------------------------


def brier_binary(confidence: ArrayLike, correct: ArrayLike) -> float:
    """Brier score of a confidence that the judge is right (scikit-learn)."""
    c = np.asarray(confidence, dtype=float)
    y = np.asarray(correct, dtype=int)
    return float(skm.brier_score_loss(y, c, pos_label=1))


def brier_multiclass(probs: np.ndarray, human: ArrayLike, values: ArrayLike) -> float:
    """Multi-class Brier score of rating probabilities (rows over ``values``) against human scores (sklearn).

    Summed over classes, so it lies in [0, 2].
    """
    p = np.asarray(probs, dtype=float)
    v = np.asarray(values, dtype=float)
    idx = to_index(human, v)
    return float(skm.brier_score_loss(idx, p, labels=np.arange(v.size), scale_by_half=False))


def reliability_bins(
    confidence: ArrayLike, correct: ArrayLike, n_bins: int = 10, strategy: Literal["uniform", "quantile"] = "uniform"
) -> dict[str, np.ndarray]:
    """Bins of a reliability diagram: equal-width ("uniform") or equal-mass ("quantile") edges.

    Bins are assigned exactly as ``sklearn.calibration.calibration_curve`` does, and only non-empty bins
    are returned, with their count, mean confidence and observed accuracy.
    """
    c = np.asarray(confidence, dtype=float)
    y = np.asarray(correct, dtype=float)
    if c.size == 0:
        raise ValueError("no confidences to bin")
    if np.any((c < 0) | (c > 1)):
        raise ValueError("confidences must lie in [0, 1]")
    if strategy == "uniform":
        edges = np.linspace(0.0, 1.0, n_bins + 1)
    elif strategy == "quantile":
        edges = np.percentile(c, np.linspace(0, 100, n_bins + 1))
    else:
        raise ValueError(f"unknown binning strategy {strategy!r}")
    ids = np.searchsorted(edges[1:-1], c)
    total = np.bincount(ids, minlength=n_bins)
    conf_sum = np.bincount(ids, weights=c, minlength=n_bins)
    acc_sum = np.bincount(ids, weights=y, minlength=n_bins)
    nz = total > 0
    return {
        "lower": edges[:-1][nz],
        "upper": edges[1:][nz],
        "count": total[nz],
        "confidence": conf_sum[nz] / total[nz],
        "accuracy": acc_sum[nz] / total[nz],
    }


def expected_calibration_error(
    confidence: ArrayLike, correct: ArrayLike, n_bins: int = 10, strategy: Literal["uniform", "quantile"] = "uniform"
) -> float:
    """ECE: bin-size weighted mean of |accuracy − confidence| over the reliability bins.

    Hand-written (a one-line sum over ``reliability_bins``): no scipy/sklearn/statsmodels function exists.
    """
    return calibration_error_of_bins(reliability_bins(confidence, correct, n_bins, strategy))


def calibration_error_of_bins(bins: dict[str, np.ndarray]) -> float:
    """ECE from ``reliability_bins`` already made (a report wants both, and equal-mass edges sort every confidence)."""
    return float(np.sum(bins["count"] * np.abs(bins["accuracy"] - bins["confidence"])) / bins["count"].sum())
