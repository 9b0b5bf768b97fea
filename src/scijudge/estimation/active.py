"""Estimators for labels chosen by a design: active (inverse-probability-weighted) PPI for means and paired
differences, and stratified PPI++. Standalone: numpy + scipy.

Notation: N judged items with judge scores f_i (all known), inclusion probabilities pi_i, picks xi_i in {0, 1}
(labelled or not), human scores y_i known where xi_i = 1, weights w_i = xi_i / pi_i.

Active PPI, Horvitz-Thompson form (Zrnic & Candès 2024, "Active Statistical Inference", mean case):
    theta_HT = (1/N) sum_i [ lam f_i + w_i (y_i - lam f_i) ],
which is exactly unbiased for the mean of y over the N items for any fixed lam (E[w_i] = 1). Its CLT interval
uses se^2 = Var_N(z) / N with z_i = lam f_i + w_i (y_i - lam f_i) (population variance, ddof=0, as ppi-python).
The HT form is not invariant to shifting f and y by a constant (the random number of labels multiplies the
rectifier's mean), so the default is the

Hájek (ratio) form: theta_H = lam * mean_N(f) + rbar_H,  rbar_H = sum_i w_i (y_i - lam f_i) / sum_i w_i,
with the linearised influence z_i = lam f_i + rbar_H + w_i (y_i - lam f_i - rbar_H) and se^2 = Var_N(z) / N.
Its point estimate equals ``ppi_py.ppi_mean_pointestimate(Y, Yhat, Yhat_unlabeled=f_all, lam=lam, w=1/pi)``
(ppi-python normalises w to mean 1); its se does not: ppi-python's weighted interval treats the "unlabelled" set
as independent of the labelled one, which it is not here (f over all N items includes the labelled ones).

The asymptotic variance (both forms, superpopulation target E[Y]) is
    Var = (1/N) [ Var(Y) + E[(Y - lam f - c)^2 (1/pi(X) - 1)] ],   c = E[Y - lam f] (Hájek) or 0 (HT),
which the planner uses. ``lam`` is tuned to minimise the empirical Var_N(z(lam)): z is affine in lam,
z = A + lam B, so lam = -Cov(A, B) / Var(B), clipped to [0, 1] (0 = the IPW human-only estimate, 1 = plain PPI).

Stratified PPI++ (Fisch et al. 2024, "Stratified Prediction-Powered Inference for Hybrid Language Model
Evaluation"): PPI++ within every stratum h (labels a simple random sample of the stratum, its own lam_h), and
theta = sum_h W_h theta_h with se^2 = sum_h W_h^2 se_h^2 (+ sum_h W_h (theta_h - theta)^2 / N when the shares W_h
are estimated by N_h/N from the judged items, i.e. when the target is the superpopulation mean).

Small-sample intervals (``quantile="t"``, what ``estimate --picks`` uses). With 50 labels the normal interval of
either estimator under-covers; measured on the recorded-like study (``scijudge.testing.studies``, 2,000 label sets
per cell, 3 judges x 2 studies, 90%): Student's t with labels - 1 df gave 0.885-0.921 for the uncertainty design
and 0.872-0.896 for the stratified one. The corrections, each measured there, and each at most ~1.5% of width:

* active PPI: the variance times n / (n - 1) (the HC1 correction: the linearised z's variance is a mean of n
  squared residuals from a fitted centre), and Student's t with Kish's effective number of labels minus one,
  ``n_eff = (sum w)^2 / sum w^2`` over the picked items (n for uniform weights, smaller when 1/pi varies);
* stratified PPI++: per-stratum variances with ddof 2 (``small_sample``) and Student's t with the
  Welch-Satterthwaite degrees of freedom of ``sum_h W_h^2 se_h^2`` (each stratum n_h - 2 df), which falls towards
  the smallest stratum's df when one stratum dominates the variance.

All core functions work along the last axis, so a simulation can pass (repetitions, N) arrays.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from scipy.stats import norm
from scipy.stats import t as student_t

from scijudge.estimation.ppi import Estimate as PlainEstimate


@dataclass(frozen=True)
class Estimate(PlainEstimate):
    """scijudge's estimate (``scijudge.estimation.ppi.Estimate``) with the estimator and design that made it."""

    method: str = ""
    design: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:  # adds the non-numeric fields
        return asdict(self)


def z_value(alpha: float) -> float:
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    return float(norm.ppf(1.0 - alpha / 2.0))


# ----------------------------------------------------------------------------------------------------------------
# vectorised cores (last axis = items)
# ----------------------------------------------------------------------------------------------------------------

def _masked(y: np.ndarray, xi: np.ndarray) -> np.ndarray:
    return np.where(xi, y, 0.0)


def active_core(f: np.ndarray, xi: np.ndarray, y: np.ndarray, pi: np.ndarray, lam: float | np.ndarray | None = None,
                weighting: str = "hajek") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(theta, se, lam) of active PPI along the last axis; ``y`` may hold anything where ``xi`` is false."""
    f = np.asarray(f, float)
    xi = np.asarray(xi, bool)
    pi = np.broadcast_to(np.asarray(pi, float), f.shape)
    if np.any(pi[xi] <= 0):
        raise ValueError("a picked item has inclusion probability 0")
    y = _masked(np.asarray(y, float), xi)
    w = np.where(xi, 1.0 / np.where(pi > 0, pi, 1.0), 0.0)
    big_n = f.shape[-1]
    n = xi.sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        if weighting == "hajek":
            tot = w.sum(-1, keepdims=True)
            ybar = (w * y).sum(-1, keepdims=True) / tot
            fbar_h = (w * f).sum(-1, keepdims=True) / tot
            fbar = f.mean(-1, keepdims=True)
            a = w * (y - ybar)
            b = (f - fbar) - w * (f - fbar_h)
        elif weighting == "ht":
            a = w * y
            b = f * (1.0 - w)
        else:
            raise ValueError(f"weighting must be 'hajek' or 'ht', got {weighting!r}")
        if lam is None:
            ac = a - a.mean(-1, keepdims=True)
            bc = b - b.mean(-1, keepdims=True)
            var_b = (bc**2).mean(-1)
            lam_arr = np.where(var_b > 0, -(ac * bc).mean(-1) / np.where(var_b > 0, var_b, 1.0), 0.0)
            lam_arr = np.clip(np.nan_to_num(lam_arr), 0.0, 1.0)
        else:
            lam_arr = np.broadcast_to(np.asarray(lam, float), n.shape).astype(float)
        lk = lam_arr[..., None]
        if weighting == "hajek":
            rbar = ybar - lk * fbar_h
            z = lk * f + rbar + w * (y - lk * f - rbar)
            theta = (lk * fbar + rbar)[..., 0]
        else:
            z = lk * f + w * (y - lk * f)
            theta = z.mean(-1)
        se = z.std(-1) / math.sqrt(big_n)
    bad = n < 2
    theta = np.where(bad, np.nan, theta)
    se = np.where(bad, np.nan, se)
    return theta, se, lam_arr


def ppi_core(f: np.ndarray, lab: np.ndarray, unlab: np.ndarray, y: np.ndarray,
             lam: float | np.ndarray | None = None, small_sample: bool = False,
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(theta, se, lam, n) of PPI++ (labelled set a simple random sample, disjoint unlabelled set) along the last
    axis, with ppi-python's conventions: lam = Cov(y, f) / ((1 + n/M) Var(f pooled, ddof=1)) clipped to [0, 1],
    se^2 = lam^2 Var(f_unlab)/M + Var(y - lam f)_lab / n (ddof=0). Same numbers as scijudge's ``ppi_mean``.

    ``small_sample=True`` (used within strata, where n_h can be ~15): the rectifier's variance with ddof = 2 when
    lam is tuned (intercept and slope fitted on the same labels), 1 otherwise, and Var(f_unlab) with ddof = 1."""
    f = np.asarray(f, float)
    lab = np.asarray(lab, bool)
    unlab = np.asarray(unlab, bool)
    y = _masked(np.asarray(y, float), lab)
    n = lab.sum(-1).astype(float)
    m = unlab.sum(-1).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        fl = np.where(lab, f, 0.0)
        fu = np.where(unlab, f, 0.0)
        mean_fl = fl.sum(-1) / n
        mean_y = y.sum(-1) / n
        mean_fu = np.where(m > 0, fu.sum(-1) / np.where(m > 0, m, 1.0), 0.0)
        both = lab | unlab
        pooled_mean = np.where(both, f, 0.0).sum(-1) / (n + m)
        var_pool = np.where(both, (f - pooled_mean[..., None]) ** 2, 0.0).sum(-1) / (n + m - 1)
        cov = np.where(lab, (y - mean_y[..., None]) * (f - mean_fl[..., None]), 0.0).sum(-1) / n
        if lam is None:
            ok = (m > 0) & (var_pool > 0) & (n >= 2)
            lam_arr = np.where(ok, cov / np.where(ok, (1.0 + n / np.where(m > 0, m, 1.0)) * var_pool, 1.0), 0.0)
            lam_arr = np.clip(lam_arr, 0.0, 1.0)
        else:
            lam_arr = np.broadcast_to(np.asarray(lam, float), n.shape).astype(float)
        lam_arr = np.where(m > 0, lam_arr, 0.0)
        rect = y - lam_arr[..., None] * f
        mean_rect = np.where(lab, rect, 0.0).sum(-1) / n
        ddof_r = (2.0 if lam is None else 1.0) if small_sample else 0.0
        ddof_f = 1.0 if small_sample else 0.0
        var_rect = np.where(lab, (rect - mean_rect[..., None]) ** 2, 0.0).sum(-1) / np.maximum(n - ddof_r, 1.0)
        var_fu = np.where(unlab, (f - mean_fu[..., None]) ** 2, 0.0).sum(-1) / np.maximum(m - ddof_f, 1.0)
        theta = lam_arr * mean_fu + mean_rect
        se = np.sqrt(np.where(m > 0, lam_arr**2 * var_fu / np.where(m > 0, m, 1.0), 0.0) + var_rect / n)
    bad = n < 2
    return np.where(bad, np.nan, theta), np.where(bad, np.nan, se), lam_arr, n


def kish_df(w: np.ndarray) -> np.ndarray:
    """Kish's effective number of labels minus one, ``(sum w)^2 / sum w^2 - 1``, along the last axis (``w`` = 0 on
    unpicked items): the t degrees of freedom of a weighted mean."""
    w = np.asarray(w, float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return w.sum(-1) ** 2 / (w**2).sum(-1) - 1.0


def welch_df(components: np.ndarray, dfs: np.ndarray) -> np.ndarray:
    """Welch-Satterthwaite degrees of freedom of a sum of variance components (last axis) each with its own df:
    ``(sum a_h)^2 / sum(a_h^2 / df_h)``; components of zero count for nothing."""
    a = np.asarray(components, float)
    d = np.asarray(dfs, float)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(a > 0, a**2 / np.where(d > 0, d, np.nan), 0.0)
        return a.sum(-1) ** 2 / share.sum(-1)


def stratified_core(f: np.ndarray, xi: np.ndarray, y: np.ndarray, codes: np.ndarray, *,
                    weights: np.ndarray | None = None, lam: float | None = None, small_sample: bool = True,
                    with_df: bool = False) -> tuple[np.ndarray, ...]:
    """(theta, se, per-stratum lam) of stratified PPI++ along the last axis; ``codes`` (..., N) in 0..H-1.

    ``weights`` (H,): known population shares of the strata (se without the share term); ``None``: W_h = N_h / N
    from the judged items plus the between-strata term sum_h W_h (theta_h - theta)^2 / N. ``with_df`` adds a
    fourth array: the Welch-Satterthwaite df of the within-strata variance (n_h - 2 per stratum when ``lam`` is
    tuned with ``small_sample``, n_h - 1 otherwise).
    """
    f = np.asarray(f, float)
    xi = np.asarray(xi, bool)
    codes = np.broadcast_to(np.asarray(codes), f.shape)
    n_strata = int(codes.max()) + 1
    big_n = f.shape[-1]
    thetas, ses, lams, shares, counts = [], [], [], [], []
    for h in range(n_strata):
        member = codes == h
        t, s, lm, n_h = ppi_core(f, xi & member, ~xi & member, y, lam, small_sample)
        thetas.append(t)
        ses.append(s)
        lams.append(lm)
        shares.append(member.sum(-1) / big_n)
        counts.append(n_h)
    th = np.stack(thetas, -1)
    se = np.stack(ses, -1)
    share = np.stack(shares, -1)
    wts = share if weights is None else np.broadcast_to(np.asarray(weights, float) / np.sum(weights), th.shape)
    theta = (wts * th).sum(-1)
    var = (wts**2 * se**2).sum(-1)
    if weights is None:
        var = var + (wts * (th - theta[..., None]) ** 2).sum(-1) / big_n
    if not with_df:
        return theta, np.sqrt(var), np.stack(lams, -1)
    lost = (2.0 if lam is None else 1.0) if small_sample else 1.0
    df = welch_df(wts**2 * se**2, np.stack(counts, -1) - lost)
    return theta, np.sqrt(var), np.stack(lams, -1), df


# ----------------------------------------------------------------------------------------------------------------
# public, one-estimate wrappers
# ----------------------------------------------------------------------------------------------------------------

def _vec(*arrays: Any) -> list[np.ndarray]:
    return [np.asarray(a, dtype=float).ravel() for a in arrays]


def _full_y(y: np.ndarray, picked: np.ndarray) -> np.ndarray:
    """Accept human scores for all N items (NaN where unlabelled) or only for the picked ones, in item order."""
    y = np.asarray(y, float).ravel()
    if y.size == picked.size:
        if not np.all(np.isfinite(y[picked])):
            raise ValueError("a picked item has no finite human score")
        return y
    if y.size == picked.sum():
        full = np.full(picked.size, np.nan)
        full[picked] = y
        return full
    raise ValueError(f"{y.size} human scores for {picked.size} items of which {picked.sum()} are picked")


def _interval(theta: float, se: float, alpha: float, n: int, big_n: int, lam: float, method: str, design: str,
              extra: dict[str, Any] | None = None, df: float | None = None) -> Estimate:
    """The normal interval, or Student's t with ``df`` degrees of freedom (at least 1) when ``df`` is given."""
    used = math.inf
    if df is None:
        half = z_value(alpha) * se
    else:
        z_value(alpha)  # checks alpha
        used = max(float(df), 1.0) if math.isfinite(df) else float(max(n - 1, 1))
        half = float(student_t.ppf(1.0 - alpha / 2.0, used)) * se
    return Estimate(float(theta), float(theta - half), float(theta + half), float(se), n, big_n - n, float(lam),
                    df=used, method=method, design=design, extra=extra or {})


def active_ppi_mean(f: np.ndarray, picked: np.ndarray, y: np.ndarray, pi: np.ndarray, *, alpha: float = 0.1,
                    lam: float | None = None, weighting: str = "hajek", design: str = "",
                    quantile: str = "normal") -> Estimate:
    """Active (IPW) PPI estimate of the mean human score from judge scores ``f`` on all N items, the picks, the
    human scores of the picked items and the design's inclusion probabilities; ``lam=None`` tunes it.

    ``quantile="t"``: the small-sample interval (the module's docstring): se times sqrt(n / (n - 1)) and
    Student's t with Kish's effective labels - 1 df (``extra["df"]``)."""
    if quantile not in ("normal", "t"):
        raise ValueError(f"quantile must be 'normal' or 't', got {quantile!r}")
    (f, pi) = _vec(f, pi)
    picked = np.asarray(picked, bool).ravel()
    if not (f.size == pi.size == picked.size):
        raise ValueError("f, picked and pi must have one entry per judged item")
    if not np.all(np.isfinite(f)):
        raise ValueError("judge scores must be finite (drop abstentions before estimating)")
    if np.any((pi <= 0) | (pi > 1)):
        raise ValueError("inclusion probabilities must be in (0, 1]")
    yy = _full_y(y, picked)
    theta, se, lm = active_core(f, picked, yy, pi, lam, weighting)
    n = int(picked.sum())
    extra: dict[str, Any] = {"expected_labels": float(pi.sum())}
    df = None
    if quantile == "t":
        se = se * math.sqrt(n / (n - 1)) if n > 1 else se
        df = float(kish_df(np.where(picked, 1.0 / pi, 0.0)))
        extra["df"] = df
    return _interval(float(theta), float(se), alpha, n, f.size, float(lm),
                     f"active-ppi-{weighting}" if lam != 0 else f"ipw-human-only-{weighting}", design, extra, df)


def ipw_human_mean(picked: np.ndarray, y: np.ndarray, pi: np.ndarray, *, alpha: float = 0.1,
                   weighting: str = "hajek", design: str = "", quantile: str = "normal") -> Estimate:
    """Human-only estimate under the design (lam = 0): the Hájek / HT weighted mean of the labels."""
    pi = np.asarray(pi, float).ravel()
    return active_ppi_mean(np.zeros_like(pi), picked, y, pi, alpha=alpha, lam=0.0, weighting=weighting,
                           design=design, quantile=quantile)


def active_ppi_paired(f_a: np.ndarray, f_b: np.ndarray, picked: np.ndarray, y_a: np.ndarray, y_b: np.ndarray,
                      pi: np.ndarray, **kwargs: Any) -> Estimate:
    """A - B on shared items (both answers of a picked item are labelled): active PPI on the differences.

    For the design, the uncertainty of a pair is that of the difference: u_a + u_b for independent judge errors.
    """
    picked = np.asarray(picked, bool).ravel()
    d_y = _full_y(y_a, picked) - _full_y(y_b, picked)
    return active_ppi_mean(np.asarray(f_a, float) - np.asarray(f_b, float), picked, d_y, pi, **kwargs)


def ppi_mean(y: np.ndarray, yhat: np.ndarray, yhat_unlabeled: np.ndarray, *, alpha: float = 0.1,
             lam: float | None = None) -> Estimate:
    """PPI++ for a simple random sample (scijudge's ``ppi_mean``; kept here so this file stands alone)."""
    y, yhat, yu = _vec(y, yhat, yhat_unlabeled)
    f = np.concatenate([yhat, yu])
    lab = np.arange(f.size) < y.size
    yy = np.concatenate([y, np.zeros(yu.size)])
    theta, se, lm, _ = ppi_core(f, lab, ~lab, yy, lam)
    return _interval(float(theta), float(se), alpha, y.size, f.size, float(lm), "ppi++", "uniform")


def stratified_ppi_mean(f: np.ndarray, picked: np.ndarray, y: np.ndarray, strata: Any, *, alpha: float = 0.1,
                        weights: dict[Any, float] | None = None, lam: float | None = None,
                        small_sample: bool = True, design: str = "stratified", quantile: str = "normal") -> Estimate:
    """Stratified PPI++ from judge scores on all items, the picks (an SRS within every stratum), the human scores
    and the item strata; ``weights`` (stratum -> population share) when the shares are known, else N_h / N.
    ``quantile="t"``: Student's t with the Welch-Satterthwaite df across strata (``extra["df"]``)."""
    if quantile not in ("normal", "t"):
        raise ValueError(f"quantile must be 'normal' or 't', got {quantile!r}")
    f = np.asarray(f, float).ravel()
    picked = np.asarray(picked, bool).ravel()
    yy = _full_y(y, picked)
    labels, codes = np.unique(np.asarray(strata, dtype=object).astype(str), return_inverse=True)
    w = None if weights is None else np.array([float(weights[k]) for k in labels])
    theta, se, lams, df_arr = stratified_core(f, picked, yy, codes, weights=w, lam=lam, small_sample=small_sample,
                                              with_df=True)
    per = {str(k): {"lam": float(lams[i]), "n_labeled": int((picked & (codes == i)).sum()),
                    "n_items": int((codes == i).sum())} for i, k in enumerate(labels)}
    extra: dict[str, Any] = {"strata": per}
    df = None
    if quantile == "t":
        df = float(df_arr)
        extra["df"] = df
    return _interval(float(theta), float(se), alpha, int(picked.sum()), f.size, math.nan, "stratified-ppi++",
                     design, extra, df)
