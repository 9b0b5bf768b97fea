"""Choosing which items to label: a design's inclusion probabilities over a judge's stored judgments.

``select_labels`` returns one row per judged item with its inclusion probability ``pi`` and whether it was
``picked``; ``estimate(..., picks=...)`` then weights the labels by ``1/pi`` (active PPI) or by stratum
(stratified PPI), so the estimate stays unbiased whatever the design. Uncertainty (for the ``uncertainty``
design, and for Neyman allocation across strata) comes, in this order, from the judge's rating distribution
(``probs``, e.g. decision mode or ``--rating-probs``), from the disagreement of several models judging the
same items (a jury), or from a residual model fitted on labels already collected (``labels=``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from scijudge.errors import InputError
from scijudge.estimation import designs as D

STRATEGIES: tuple[str, ...] = ("uniform", "uncertainty", "stratified")
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
                     "residual model", field="--strategy")


def select_labels(judgments: pd.DataFrame, *, judge: str, budget: int, strategy: str, seed: int,
                  strata: Mapping[str, str] | None = None, labels: Mapping[str, float] | None = None,
                  tau: float = 0.1, neyman: bool = True) -> pd.DataFrame:
    """The items to label: one row per item judged by ``judge`` (``item_id``, ``pi``, ``picked`` and the design).

    Args:
        judgments: stored judgments (``Run.to_pandas()`` rows, or several stores concatenated).
        budget: the expected number of labels (Poisson sampling: the realised count varies around it; stratified
            designs draw exactly their allocation).
        strategy: ``uniform``, ``uncertainty`` (π ∝ √uncertainty, mixed with a uniform floor ``tau``) or
            ``stratified`` (``strata``: item id -> stratum; Neyman allocation when an uncertainty is available).
        labels: human scores already collected (item id -> score), for a residual uncertainty model.
    """
    if strategy not in STRATEGIES:
        raise InputError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}", field="--strategy")
    from scijudge.metrics.frames import complete_judgments

    judgments = complete_judgments(judgments) if len(judgments.columns) else judgments
    if "judge" not in judgments or judge not in set(judgments["judge"]):
        known = sorted(set(judgments["judge"])) if "judge" in judgments else []
        raise InputError(f"no judgments of judge {judge!r}; the runs hold {', '.join(known) or 'none'}", field="--judge")
    mine = judgments[(judgments["judge"] == judge) & (judgments["status"] == "ok")].copy()
    mine["item_id"] = mine["item_id"].astype(str)
    items = pd.Index(pd.unique(mine["item_id"]), name="item_id")
    if not 0 < budget <= items.size:
        raise InputError(f"the budget must be between 1 and the {items.size} judged items, got {budget}",
                         field="--budget")
    u: np.ndarray | None = None
    source = ""
    if strategy == "uncertainty" or (strategy == "stratified" and neyman):
        try:
            series, source = item_uncertainty(mine, labels=labels)
            u = series.groupby(level=0).mean().reindex(items).to_numpy(float)
        except InputError:
            if strategy == "uncertainty":
                raise
    stratum = None
    neyman_scale = None
    if strategy == "stratified":
        if not strata:
            raise InputError("the stratified design needs strata (a CSV item_id,stratum)", field="--strata")
        missing = [i for i in items if i not in strata]
        if missing:
            raise InputError(f"item {missing[0]!r} has no stratum ({len(missing)} items lack one)", field="--strata")
        stratum = np.array([str(strata[i]) for i in items])
        if u is not None and not np.isnan(u).any():
            neyman_scale = {s: float(np.sqrt(u[stratum == s]).mean()) for s in np.unique(stratum)}
    try:
        pi, picked = D.select(strategy, budget, big_n=items.size, u=u, strata=None if stratum is None else list(stratum),
                              seed=seed, tau=tau,
                              neyman_scale=neyman_scale)
    except ValueError as exc:
        raise InputError(str(exc), field="--budget") from None
    frame: dict[str, Any] = {
        "item_id": items, "pi": pi, "picked": picked.astype(bool),
        "stratum": stratum if stratum is not None else "", "uncertainty": u if u is not None else np.nan,
        "uncertainty_source": source, "design": strategy, "budget": budget, "seed": seed,
        "tau": tau if strategy == "uncertainty" else np.nan,
    }
    return pd.DataFrame(frame)[list(PICK_COLUMNS)]


def read_picks(path: Any) -> pd.DataFrame:
    """A picks file written by ``scijudge select-labels`` (CSV with at least item_id, pi, picked)."""
    from pathlib import Path

    file = Path(path)
    try:
        frame = pd.read_csv(file, dtype={"item_id": str, "stratum": str}, keep_default_na=False,
                            na_values={"uncertainty": [""], "tau": [""]})
    except FileNotFoundError:
        raise InputError("picks file not found", file=file) from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise InputError(f"not a picks CSV ({exc})", file=file) from None
    for column in ("item_id", "pi", "picked"):
        if column not in frame:
            raise InputError(f"a picks file needs columns item_id, pi, picked; {column!r} is missing", file=file,
                             field=column)
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
    if frame["item_id"].duplicated().any():
        row = int(frame.index[frame["item_id"].duplicated()][0])
        raise InputError(f"item {frame['item_id'].iloc[row]!r} appears twice", file=file, line=row + 2, field="item_id")
    return frame
