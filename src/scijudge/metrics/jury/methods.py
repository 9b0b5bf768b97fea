"""Aggregation rules over one judge's wide table of member values: mean, median, strict majority, weighted.

Each returns one dict per unit: ``status``, ``score`` / ``verdict``, ``reason`` (abstentions name the rule and
the members), optional ``confidence`` and ``extra`` (kept in the jury row's ``result``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from scijudge.errors import InputError
from scijudge.metrics.jury.members import absent_text
from scijudge.spec.scales import Scale

FITS = ("inverse_mse", "ridge")


def default_quorum(n_members: int) -> int:
    """A strict majority of the members."""
    return n_members // 2 + 1


def quorum_reason(n_answered: int, n_members: int, quorum: int, status: pd.Series) -> str:
    absent = absent_text(status)
    return (f"quorum not met: {n_answered} of {n_members} members answered (quorum {quorum})"
            + (f"; {absent}" if absent else ""))


def central(vals: pd.DataFrame, status: pd.DataFrame, how: str, quorum: int) -> list[dict[str, Any]]:
    """Mean or median of the members that answered; abstains below the quorum."""
    out: list[dict[str, Any]] = []
    m = vals.shape[1]
    for idx, row in zip(vals.index, vals.to_numpy(float)):
        have = row[np.isfinite(row)]
        if have.size < quorum:
            out.append({"status": "abstained", "reason": quorum_reason(int(have.size), m, quorum, status.loc[idx])})
            continue
        score = float(np.mean(have)) if how == "mean" else float(np.median(have))
        out.append({"status": "ok", "score": score})
    return out


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def majority(vals: pd.DataFrame, status: pd.DataFrame, *, scale: Scale | None, is_verdict: bool) -> list[dict[str, Any]]:
    """Strict majority of ALL members: a value wins with more than half of every member's vote (abstaining and
    missing members count in the denominator); otherwise the jury abstains. ``probs``: each value's vote share
    of all members (a cascade's confidence in the jury)."""
    m = vals.shape[1]
    out: list[dict[str, Any]] = []
    for idx, values in zip(vals.index, vals.to_numpy(object)):
        votes: dict[Any, int] = {}
        for v in values:
            if _missing(v):
                continue
            if not is_verdict:
                v = float(v)
                if scale is not None and not scale.on_grid(v):
                    raise InputError(f"majority needs whole ratings on the scale {scale.text()}; item {idx[0]!r} has "
                                     f"{v:g} (use mean or median, or map the scale explicitly)", field="method")
                if scale is None and abs(v - round(v)) > 1e-9:
                    raise InputError(f"majority needs whole-number ratings or verdicts; item {idx[0]!r} has {v:g}",
                                     field="method")
            votes[v] = votes.get(v, 0) + 1
        shown = {(k if is_verdict else f"{k:g}"): c for k, c in sorted(votes.items(), key=lambda kv: (-kv[1], str(kv[0])))}
        top = max(votes.items(), key=lambda kv: kv[1]) if votes else None
        if top is not None and 2 * top[1] > m:
            out.append({"status": "ok", "score": None if is_verdict else top[0], "verdict": top[0] if is_verdict else None,
                        "confidence": top[1] / m, "probs": {k: c / m for k, c in shown.items()},  # vote shares
                        "extra": {"votes": shown}})
        else:
            absent = absent_text(status.loc[idx])
            out.append({"status": "abstained", "extra": {"votes": shown},
                        "reason": f"no strict majority of {m} members: votes {shown}" + (f"; {absent}" if absent else "")})
    return out


# ---- weighted, cross-fitted ----------------------------------------------------------------------------------
def fold_assignment(items: Sequence[str], k: int, seed: int) -> dict[str, int]:
    """Items -> fold 0..k-1, balanced, deterministic for (items, k, seed)."""
    ordered = sorted(set(items))
    order = np.random.default_rng(seed).permutation(len(ordered))
    return {ordered[i]: int(pos % k) for pos, i in enumerate(order)}


def fit_inverse_mse(x: np.ndarray, y: np.ndarray, eps: float = 1e-6) -> dict[str, Any]:
    """w_m proportional to 1 / MSE_m, each member's MSE on the training units it answered (NaN: not answered)."""
    w = np.zeros(x.shape[1])
    for j in range(x.shape[1]):
        ok = np.isfinite(x[:, j])
        if ok.any():
            w[j] = 1.0 / max(float(np.mean((x[ok, j] - y[ok]) ** 2)), eps)
    if w.sum() <= 0:
        raise InputError("no member answered any labelled training unit: weights cannot be fitted", field="labels")
    return {"weights": w / w.sum(), "intercept": 0.0}


def fit_ridge(x: np.ndarray, y: np.ndarray, alpha: float) -> dict[str, Any]:
    """y = a + sum_m b_m x_m on units every member answered; the intercept is not penalised (centred closed form)."""
    full = np.isfinite(x).all(axis=1)
    if full.sum() < 2:
        raise InputError("ridge weights need at least 2 labelled training units that every member answered",
                         field="labels")
    xf, yf = x[full], y[full]
    xm, ym = xf.mean(axis=0), yf.mean()
    xc, yc = xf - xm, yf - ym
    b = np.linalg.solve(xc.T @ xc + alpha * np.eye(x.shape[1]), xc.T @ yc)
    return {"weights": b, "intercept": float(ym - xm @ b)}


def _predict(fit: dict[str, Any], row: np.ndarray, kind: str, quorum: int, scale: Scale | None) -> tuple[float | None, str | None]:
    have = np.isfinite(row)
    if kind == "ridge":
        if not have.all():
            return None, "ridge weights need every member's score"
        y = float(fit["intercept"] + row @ fit["weights"])
    else:
        if have.sum() < quorum:
            return None, f"quorum not met: {int(have.sum())} of {row.size} members answered (quorum {quorum})"
        w = fit["weights"][have]
        if w.sum() <= 0:
            return None, "no answering member has a fitted weight"
        y = float(row[have] @ w / w.sum())
    if scale is not None:
        y = min(max(y, scale.lo), scale.hi)
    return y, None


def weighted(vals: pd.DataFrame, status: pd.DataFrame, labels: pd.Series, *, kind: str, quorum: int, folds: int,
             seed: int, alpha: float, scale: Scale | None) -> tuple[list[dict[str, Any]], pd.DataFrame]:
    """Cross-fitted weighted jury of one judge. ``labels``: human consensus indexed like ``vals`` (NaN: none).

    Every labelled unit is scored with weights fitted on the labelled units of *other items* (K folds by item);
    units without a label use weights fitted on all labelled units. Returns the per-unit results and the fold
    table (item_id, part, labelled, fold, n_fit_units, fit_items) that says which units were held out.
    """
    if kind not in FITS:
        raise InputError(f"unknown weight fit {kind!r}: use {' or '.join(FITS)}", field="fit")
    lab = labels.reindex(vals.index)
    labelled = lab.notna().to_numpy()
    items = [i for (i, _), has in zip(vals.index, labelled) if has]
    if len(set(items)) < 2:
        raise InputError("weighted needs labels for at least 2 judged items of each judge (--labels DEV.jsonl)",
                         field="labels")
    k = max(2, min(folds, len(set(items))))
    fold_of = fold_assignment(items, k, seed)
    x = vals.to_numpy(float)
    y = lab.to_numpy(float)
    item_ids = np.array([i for i, _ in vals.index], dtype=object)
    unit_fold = np.array([fold_of.get(i, -1) for i in item_ids])

    def fit_on(mask: np.ndarray) -> dict[str, Any]:
        return fit_ridge(x[mask], y[mask], alpha) if kind == "ridge" else fit_inverse_mse(x[mask], y[mask])

    fits = {f: fit_on(labelled & (unit_fold != f)) for f in range(k)}
    fit_all = fit_on(labelled)
    results: list[dict[str, Any]] = []
    table = []
    members = list(vals.columns)
    for n, idx in enumerate(vals.index):
        if labelled[n]:
            f = int(unit_fold[n])
            fit, train = fits[f], labelled & (unit_fold != f)
        else:
            f, fit, train = -1, fit_all, labelled
        score, reason = _predict(fit, x[n], kind, quorum, scale)
        extra = {"weights": {str(m): float(w) for m, w in zip(members, fit["weights"])},
                 "intercept": float(fit["intercept"]), "fit": kind, "fold": f, "folds": k,
                 "held_out": bool(labelled[n]), "n_fit_units": int(train.sum())}
        if reason is not None:
            absent = absent_text(status.loc[idx])
            reason = reason + (f"; {absent}" if absent else "")
        results.append({"status": "ok" if score is not None else "abstained", "score": score, "reason": reason,
                        "extra": extra})
        table.append({"item_id": idx[0], "part": idx[1], "labelled": bool(labelled[n]), "fold": f,
                      "n_fit_units": int(train.sum()), "fit_items": tuple(sorted(set(item_ids[train])))})
    return results, pd.DataFrame(table)
