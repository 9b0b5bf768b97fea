"""Choosing which items to label: a design's inclusion probabilities over a judge's stored judgments.

``select_labels`` returns one row per judged item with its inclusion probability ``pi`` and whether it was
``picked``; ``estimate(..., picks=...)`` then weights the labels by ``1/pi`` (active PPI) or by stratum
(stratified PPI), so the estimate stays unbiased whatever the design. Uncertainty (for the ``uncertainty``
design, and for Neyman allocation across strata) comes, in this order, from the judge's rating distribution
(``probs``, e.g. decision mode or ``--rating-probs``), from the disagreement of several models judging the
same items (a jury), or from a residual model fitted on labels already collected (``labels=``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from scijudge._files import csv_error
from scijudge.errors import InputError
from scijudge.estimation import designs as D

STRATEGIES: tuple[str, ...] = ("auto", "uniform", "uncertainty", "stratified")
DEFAULT_FLOOR = 0.5
"""The uniform floor's share: every pi >= 0.5 n/N, so a weight 1/pi is at most twice a uniform one. Measured on
the recorded-like study (``scijudge.testing.studies``): with 0.1 the uncertainty design covered 0.78-0.85 at 90%
with 50 labels and was wider than uniform; with 0.5 it covers >= 0.875 (``tests/estimation/test_designs_recorded.py``)."""
CHECK_MIN_LABELS = 10
AUTO_MARGIN = 0.9
"""``auto`` leaves uniform picks only for a design whose expected interval width is at most this share of uniform's.
The planner's ratios come from a pilot of a few dozen labels and do not count the small-sample t corrections
(0.5-1.5% of width for weighted or stratified picks). Measured on the recorded-like study (3 judges x 2 studies,
30 pilots of 40 labels each, strata given): taking the planner's minimum as it is, auto's picks were on average
1.5-5.0% wider than uniform PPI++ (it chose a stratified or uncertainty design that was 2-6% wider in 24-29 of 30
pilots); with 0.9 they were at most 0.6% wider. In simulations where the uncertainty tracks the error the planner
expects about 0.8, so that design is still chosen (``tests/estimation/test_designs_recorded.py``)."""
CHECK_P = 0.1
PICK_COLUMNS: tuple[str, ...] = ("item_id", "pi", "picked", "stratum", "uncertainty", "uncertainty_source",
                                 "design", "budget", "seed", "tau")


def _level_probs(probs: pd.Series) -> tuple[np.ndarray, np.ndarray] | None:
    """(levels, N x levels matrix) from stored rating distributions, or None when some judgment has none."""
    dicts = [p for p in probs if isinstance(p, Mapping) and p]
    if len(dicts) != len(probs) or not dicts:
        return None
    keys = sorted({k for p in dicts for k in p}, key=float)
    levels = np.array([float(k) for k in keys])
    matrix = np.array([[float(p.get(k, 0.0)) for k in keys] for p in dicts])
    return levels, matrix


def item_uncertainty(judgments: pd.DataFrame, *, labels: Mapping[str, float] | None = None) -> tuple[pd.Series, str]:
    """Per item, an error-variance-type uncertainty and where it came from (``probs``, ``jury`` or ``residual``).

    ``judgments``: one judge's ok judgments (item_id, model, score, probs). The design takes the square root.
    """
    one = judgments.drop_duplicates(["item_id", "model"], keep="last")
    models = one["model"].nunique()
    if models == 1 and "probs" in one:
        found = _level_probs(one["probs"])
        if found is not None:
            levels, matrix = found
            return pd.Series(D.rating_variance(matrix, levels), index=one["item_id"].to_numpy()), "probs"
    if models > 1:
        wide = one.pivot_table(index="item_id", columns="model", values="score", aggfunc="last")
        if wide.notna().sum(axis=1).min() >= 2:
            filled = wide.apply(lambda row: row.fillna(row.mean()), axis=1)
            return pd.Series(D.jury_variance(filled.to_numpy(float)), index=wide.index), "jury"
    if labels:
        mean = one.groupby("item_id")["score"].mean()
        known = [i for i in mean.index if i in labels]
        if len(known) >= 5:
            x_lab = mean.loc[known].to_numpy(float)[:, None]
            residuals = np.array([labels[i] for i in known]) - x_lab[:, 0]
            predicted = D.fit_residual_model(x_lab, residuals, mean.to_numpy(float)[:, None])
            return pd.Series(predicted, index=mean.index), "residual"
    raise InputError("the uncertainty design needs the judge's rating distributions (judge with --mode decision or "
                     "--rating-probs), several models judging the same items, or at least 5 labelled items for a "
                     "residual model", field="strategy")


def uncertainty_check(u: np.ndarray, y: np.ndarray, f: np.ndarray) -> tuple[bool, float, float]:
    """(passes, Spearman rho, one-sided p): does the uncertainty rank the squared corrected residual
    ``(y - lam f - c)^2`` on pilot labels (``lam`` the least-squares slope clipped to [0, 1], ``c`` the mean)? It
    passes when rho > 0 with p < ``CHECK_P`` (``scipy.stats.spearmanr``, alternative "greater")."""
    from scipy.stats import spearmanr

    var_f = float(np.var(f))
    lam = float(np.clip(np.cov(y, f, ddof=0)[0, 1] / var_f, 0.0, 1.0)) if var_f > 0 else 0.0
    residual = y - lam * f
    # rounded to 1e-9: residuals equal on paper but apart in the last bit are a tie, so the ranks (and the
    # decision) do not depend on the order of floating-point sums
    squared = np.round((residual - residual.mean()) ** 2, 9)
    u = np.round(np.asarray(u, float), 9)
    if np.ptp(u) == 0 or np.ptp(squared) == 0:
        return False, math.nan, math.nan
    rho, p = spearmanr(u, squared, alternative="greater")
    return bool(rho > 0 and p < CHECK_P), float(rho), float(p)


def _pilot(items: pd.Index, labels: Mapping[str, float] | None) -> np.ndarray:
    """Positions of the judged items that already have a label (the pilot)."""
    if not labels:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(np.array([i in labels for i in items], dtype=bool))


def _budget_variances(f: np.ndarray, pilot: np.ndarray, y: np.ndarray, budget: int, *, u: np.ndarray | None,
                      tau: float, stratum: np.ndarray | None, neyman_scale: Mapping[str, float] | None,
                      ) -> dict[str, float]:
    """The planner's variance of each available design's estimate at ``budget`` labels, from the pilot."""
    from scijudge.estimation import planner as P

    big_n = f.size
    weights = np.ones(pilot.size)
    out = {"uniform": P.poisson_variance(np.full(pilot.size, budget / big_n), y, f[pilot], weights, big_n)[0]}
    if u is not None:
        pi = D.uncertainty_pi(u, budget, tau=tau)
        out["uncertainty"] = P.poisson_variance(pi[pilot], y, f[pilot], weights, big_n)[0]
    if stratum is not None:
        labels, codes = np.unique(stratum, return_inverse=True)
        scale = None if neyman_scale is None else np.array([float(neyman_scale[k]) for k in labels])
        try:
            alloc = D.allocate(np.bincount(codes), budget, scale=scale)
            out["stratified"] = P.stratified_variance(alloc, codes, f, pilot, y, weights)
        except ValueError:
            pass
    return out


def _cross_fitted_residual(f: np.ndarray, pilot: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The residual model's uncertainty at each pilot item from a fit on the other half of the pilot (alternate
    items in the pilot's order): checked like any other source, never on the labels that fitted it."""
    out = np.empty(pilot.size)
    half = np.arange(pilot.size) % 2 == 0
    for fold in (half, ~half):
        x_fit, x_new = f[pilot][~fold][:, None], f[pilot][fold][:, None]
        out[fold] = D.fit_residual_model(x_fit, y[~fold] - x_fit[:, 0], x_new)
    return out


def _checked(design: str, f: np.ndarray, pilot: np.ndarray, y: np.ndarray, budget: int, *, u: np.ndarray | None,
             tau: float, stratum: np.ndarray | None, neyman_scale: Mapping[str, float] | None,
             notes: list[str], check: bool = True) -> str:
    """``design`` when the planner, from at least ``CHECK_MIN_LABELS`` labels already collected, expects its
    interval at this budget to be at most ``AUTO_MARGIN`` of uniform picks' width; uniform picks otherwise, with a
    note saying why. The same check for every design and every source of its uncertainty (``check=False``: the
    design as asked, said so)."""
    if not check:
        notes.append(f"{design} picks without a check on labels already collected (asked for)"
                     + (f": its weights are bounded by the floor {tau:g}" if design == "uncertainty" else ""))
        return design
    if pilot.size < CHECK_MIN_LABELS:
        notes.append(f"uniform picks instead of {design}: a design runs only after a check on at least "
                     f"{CHECK_MIN_LABELS} labels already collected ({pilot.size} given; pass them with --labels)")
        return "uniform"
    variances = _budget_variances(f, pilot, y, budget, u=u if design == "uncertainty" else None, tau=tau,
                                  stratum=stratum if design == "stratified" else None, neyman_scale=neyman_scale)
    if design not in variances:
        notes.append(f"uniform picks instead of {design}: the planner could not size it at this budget")
        return "uniform"
    ratio = math.sqrt(variances[design] / variances["uniform"])
    if ratio > AUTO_MARGIN:
        notes.append(f"uniform picks instead of {design}: from the {pilot.size} labels already collected the "
                     f"planner expects its interval at {budget} labels to be {ratio:.3f}x uniform's (a design runs "
                     f"only at {AUTO_MARGIN:g} or less)")
        return "uniform"
    notes.append(f"{design} picks: the planner expects {ratio:.3f}x uniform's interval width at {budget} labels")
    return design


def select_labels(judgments: pd.DataFrame, *, judge: str, budget: int, strategy: str = "auto", seed: int = 0,
                  strata: Mapping[str, str] | None = None, labels: Mapping[str, float] | None = None,
                  tau: float = DEFAULT_FLOOR, neyman: bool = True, check: bool = True) -> pd.DataFrame:
    """The items to label: one row per item judged by ``judge`` (``item_id``, ``pi``, ``picked`` and the design).

    Args:
        judgments: stored judgments (``Run.to_pandas()`` rows, several stores concatenated, or a minimal frame).
        budget: the expected number of labels (Poisson sampling: the realised count varies around it; stratified
            designs draw exactly their allocation).
        strategy: ``auto`` (default: the design the planner expects to give the narrowest interval at this
            budget, from the labels already collected, when its width is at most ``AUTO_MARGIN`` of uniform's;
            uniform without at least ``CHECK_MIN_LABELS`` of them),
            ``uniform``, ``uncertainty`` (π ∝ √uncertainty, mixed with a uniform floor ``tau``; checked on the
            labels already collected, and uniform picks instead when the uncertainty does not rank the corrected
            residual) or ``stratified`` (``strata``: item id -> stratum; Neyman allocation when an uncertainty is
            available).
        labels: human scores already collected (item id -> score): the pilot for the check, the planner and a
            residual uncertainty model.
        tau: the uniform floor's share: every pi >= tau * budget / N, so no weight 1/pi exceeds 1/tau times a
            uniform one (default 0.5: at most twice).
        check: a design other than uniform runs only when the labels already collected (at least
            ``CHECK_MIN_LABELS``) pass its checks: the uncertainty ranks the corrected residual (every source; the
            residual model cross-fitted) and the planner expects at most ``AUTO_MARGIN`` of uniform's width;
            uniform picks otherwise, with a note. ``check=False`` runs the design asked for unchecked.

    The returned frame's ``attrs["notes"]`` holds one line per decision (a fallback, the auto choice).
    """
    if strategy not in STRATEGIES:
        raise InputError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}", field="strategy")
    if not 0.0 < tau <= 1.0:
        raise InputError(f"the floor must be in (0, 1], got {tau}", field="tau")
    from scijudge.metrics.frames import complete_judgments

    judgments = complete_judgments(judgments) if len(judgments.columns) else judgments
    if "judge" not in judgments or judge not in set(judgments["judge"]):
        known = sorted(set(judgments["judge"])) if "judge" in judgments else []
        raise InputError(f"no judgments of judge {judge!r}; the runs hold {', '.join(known) or 'none'}", field="judge")
    mine = judgments[(judgments["judge"] == judge) & (judgments["status"] == "ok")].copy()
    mine["item_id"] = mine["item_id"].astype(str)
    items = pd.Index(sorted(pd.unique(mine["item_id"])), name="item_id")  # picks: not of the rows' order
    if not 0 < budget <= items.size:
        raise InputError(f"the budget must be between 1 and the {items.size} judged items, got {budget}",
                         field="budget")
    notes: list[str] = []
    u: np.ndarray | None = None
    source = ""
    if strategy in ("uncertainty", "auto") or (strategy == "stratified" and neyman):
        try:
            series, source = item_uncertainty(mine, labels=labels)
            u = series.groupby(level=0).mean().reindex(items).to_numpy(float)
        except InputError:
            if strategy == "uncertainty":
                raise
    f = mine.groupby("item_id")["score"].mean().reindex(items).to_numpy(float)
    pilot = _pilot(items, labels)
    y_pilot = np.array([float(labels[items[i]]) for i in pilot]) if labels else np.zeros(0)
    if u is not None and strategy in ("uncertainty", "auto") and check and pilot.size >= CHECK_MIN_LABELS:
        shown = _cross_fitted_residual(f, pilot, y_pilot) if source == "residual" else u[pilot]
        passed, rho, p = uncertainty_check(shown, y_pilot, f[pilot])
        if not passed:
            notes.append(f"the {source} uncertainty does not rank the corrected residual on the {pilot.size} "
                         f"labels already collected (Spearman {rho:.2f}, one-sided p = {p:.2g}"
                         + (", residual model cross-fitted on two halves" if source == "residual" else "") + "): "
                         + ("uniform picks instead" if strategy == "uncertainty" else
                            "the uncertainty design is left out"))
            u = None
    stratum = None
    neyman_scale = None
    if strategy == "stratified" or (strategy == "auto" and strata):
        if not strata:
            raise InputError("the stratified design needs strata (a CSV item_id,stratum)", field="strata")
        missing = [i for i in items if i not in strata]
        if missing:
            raise InputError(f"item {missing[0]!r} has no stratum ({len(missing)} items lack one)", field="strata")
        stratum = np.array([str(strata[i]) for i in items])
        if u is not None and not np.isnan(u).any():
            neyman_scale = {s: float(np.sqrt(u[stratum == s]).mean()) for s in np.unique(stratum)}
    chosen = strategy
    if strategy == "uncertainty" and u is None:
        chosen = "uniform"
    if chosen in ("uncertainty", "stratified"):
        chosen = _checked(chosen, f, pilot, y_pilot, budget, u=u, tau=tau, stratum=stratum,
                          neyman_scale=neyman_scale, notes=notes, check=check)
    if strategy == "auto":
        if pilot.size >= CHECK_MIN_LABELS:
            variances = _budget_variances(f, pilot, y_pilot, budget, u=u, tau=tau, stratum=stratum,
                                          neyman_scale=neyman_scale)
            best = min(variances, key=lambda k: (variances[k], k != "uniform"))
            chosen = best if math.sqrt(variances[best] / variances["uniform"]) <= AUTO_MARGIN else "uniform"
            shown = ", ".join(f"{k} {math.sqrt(v) / math.sqrt(variances['uniform']):.3f}" for k, v in variances.items())
            notes.append(f"auto: {chosen} picks (the planner's expected interval width at {budget} labels, from the "
                         f"{pilot.size} labels already collected, relative to uniform: {shown}; another design "
                         f"only below {AUTO_MARGIN:g})")
        else:
            chosen = "uniform"
            notes.append(f"auto: uniform picks (the planner needs at least {CHECK_MIN_LABELS} labels already "
                         f"collected to expect another design to be narrower; {pilot.size} given)")
    try:
        pi, picked = D.select(chosen, budget, big_n=items.size, u=u if chosen == "uncertainty" else None,
                              strata=None if stratum is None else list(stratum), seed=seed, tau=tau,
                              neyman_scale=neyman_scale)
    except ValueError as exc:
        raise InputError(str(exc), field="budget") from None
    frame: dict[str, Any] = {
        "item_id": items, "pi": pi, "picked": picked.astype(bool),
        "stratum": stratum if stratum is not None and chosen == "stratified" else "",
        "uncertainty": u if u is not None else np.nan,
        "uncertainty_source": source if u is not None else "", "design": chosen, "budget": budget, "seed": seed,
        "tau": tau if chosen == "uncertainty" else np.nan,
    }
    out = pd.DataFrame(frame)[list(PICK_COLUMNS)]
    out.attrs["notes"] = notes
    return out


def plan_table(judgments: pd.DataFrame, *, judge: str, labels: Mapping[str, float], width: float,
               alpha: float = 0.1, strata: Mapping[str, str] | None = None, tau: float = DEFAULT_FLOOR,
               ) -> pd.DataFrame:
    """Labels needed per design for a (1 - alpha) interval of total ``width`` (``planner.plan_labels``), from the
    labels already collected (the pilot, taken as a simple random sample): the ``select-labels --plan`` table."""
    from scijudge.estimation.planner import plan_labels

    from scijudge.metrics.frames import complete_judgments

    if width <= 0:
        raise InputError(f"the target width must be > 0, got {width}", field="width")
    judgments = complete_judgments(judgments)
    mine = judgments[(judgments["judge"] == judge) & (judgments["status"] == "ok")].copy()
    if mine.empty:
        raise InputError(f"no judgments of judge {judge!r}", field="judge")
    mine["item_id"] = mine["item_id"].astype(str)
    items = pd.Index(sorted(pd.unique(mine["item_id"])), name="item_id")  # picks: not of the rows' order
    f = mine.groupby("item_id")["score"].mean().reindex(items).to_numpy(float)
    pilot = _pilot(items, labels)
    if pilot.size < 2:
        raise InputError(f"the plan needs labels already collected for at least 2 judged items ({pilot.size} given)",
                         field="labels")
    y = np.array([float(labels[items[i]]) for i in pilot])
    u = None
    try:
        series, source = item_uncertainty(mine, labels=labels)
        u = series.groupby(level=0).mean().reindex(items).to_numpy(float)
    except InputError:
        source = ""
    stratum = None if not strata else [str(strata.get(i, "")) for i in items]
    plan = plan_labels(f, pilot, y, width, alpha=alpha, u_all=u, tau=tau, strata=stratum)
    sequential = _sequential_plan(f, pilot, y, width, alpha)
    rows = [{"design": name, "labels_needed": row["labels"], "labels_sequential": sequential.get(name, math.nan),
             "target_width": width, "alpha": alpha, "n_pilot": int(pilot.size), "n_items": int(items.size),
             "note": (f"uncertainty from {source}, floor {row['tau']:g}" if name == "uncertainty" else
                      "PPI++ on labels alone (lam = 0)" if name == "human-only" else "")
             + ("" if name in sequential else "; no anytime-valid sequence for this design (uniform picks only)")}
            for name, row in plan.items()]
    return pd.DataFrame(rows)


def _sequential_plan(f: np.ndarray, pilot: np.ndarray, y: np.ndarray, width: float, alpha: float,
                     ) -> dict[str, float]:
    """Labels until the anytime-valid sequence (``estimate --sequential``) is ``width`` wide, expected from the
    pilot's spread of ``y - lam (f - mean f)`` (uniform picks, ``lam`` PPI++'s clipped slope) and of ``y``
    (human-only): what a loop that looks after every label should plan for."""
    from scijudge.estimation.anytime import labels_to_width

    fp = f[pilot]
    var_f = float(np.var(fp))
    lam = float(np.clip(np.cov(y, fp, ddof=0)[0, 1] / var_f, 0.0, 1.0)) if var_f > 0 else 0.0
    return {"uniform": labels_to_width(float(np.std(y - lam * (fp - f.mean()))), width, alpha),
            "human-only": labels_to_width(float(np.std(y)), width, alpha)}


def read_picks(path: Any, *, queue_ok: bool = False) -> pd.DataFrame:
    """A picks file written by ``scijudge select-labels`` (CSV with at least item_id, pi, picked). An escalation
    queue of ``scijudge cascade --escalated`` (design ``cascade-escalation``: the items no member trusted, not a
    sample drawn with known probabilities) is refused, or with ``queue_ok`` read as a labelling queue for the viewer:
    one row per labelling unit, (item_id, judge, part) where the queue names the judge, else per item."""
    from pathlib import Path

    file = Path(path)
    try:
        frame = pd.read_csv(file, dtype={"item_id": str, "stratum": str}, keep_default_na=False,
                            na_values={"uncertainty": [""], "tau": [""]})
    except FileNotFoundError:
        raise InputError("picks file not found", file=file) from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise csv_error(exc, file, "a picks CSV") from None
    for column in ("item_id", "pi", "picked"):
        if column not in frame:
            raise InputError(f"a picks file needs columns item_id, pi, picked; {column!r} is missing", file=file,
                             field=column)
    unit = [c for c in ("item_id", "judge", "part") if c in frame]  # a cascade escalates (item, judge, part)
    if "design" in frame and (frame["design"].astype(str) == "cascade-escalation").any():
        if not queue_ok:
            raise InputError("this is an escalation queue of `scijudge cascade --escalated` (the items no member "
                             "trusted, not a sample drawn with known probabilities), so it cannot weight an estimate: "
                             "label its items, then estimate without --picks", file=file, field="design")
        frame = frame.drop_duplicates(unit, keep="first").reset_index(drop=True)
    pi = pd.to_numeric(frame["pi"], errors="coerce")
    bad = frame.index[~((pi > 0) & (pi <= 1))]
    if len(bad):
        raise InputError(f"pi must be in (0, 1], got {frame['pi'].iloc[bad[0]]}", file=file, line=int(bad[0]) + 2,
                         field="pi")
    truth = frame["picked"].astype(str).str.lower().map({"true": True, "false": False, "1": True, "0": False})
    if truth.isna().any():
        row = int(truth.index[truth.isna()][0])
        raise InputError(f"picked must be true or false, got {frame['picked'].iloc[row]!r}", file=file, line=row + 2,
                         field="picked")
    frame["pi"] = pi
    frame["picked"] = truth.astype(bool)
    twice = frame.duplicated(unit if queue_ok and "judge" in frame else ["item_id"])
    if twice.any():
        row = int(frame.index[twice][0])
        raise InputError(f"item {frame['item_id'].iloc[row]!r} appears twice", file=file, line=row + 2, field="item_id")
    return frame
