"""Dawid–Skene (1979): unsupervised EM over categorical ratings, one confusion matrix per member.

Checked against a hand-worked first iteration and against crowd-kit 1.4.2 (tests/metrics/test_jury.py)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from scijudge.errors import InputError
from scijudge.metrics.jury.methods import quorum_reason


@dataclass
class DawidSkeneFit:
    posterior: np.ndarray  # (n_units x K)
    priors: np.ndarray  # (K,)
    confusion: np.ndarray  # (n_members x K true x K observed)
    n_iter: int
    log_likelihood: float
    converged: bool
    trace: list[float] = field(default_factory=list)


def dawid_skene(obs: np.ndarray, n_classes: int, *, max_iter: int = 200, tol: float = 1e-8,
                smoothing: float = 0.0, floor: float = 0.0) -> DawidSkeneFit:
    """EM for the Dawid–Skene model.

    Args:
        obs: (n_units x n_members) class indices, -1 where a member gave no answer (it adds no likelihood term).
        n_classes: number of categories K.
        max_iter, tol: stop when the marginal log-likelihood improves by less than ``tol`` or after ``max_iter``.
        smoothing: pseudo-count added to every confusion cell (0: plain maximum likelihood, which on 5-class
            ratings with few members runs into the boundary and keeps climbing for thousands of iterations).
        floor: lower clip of each cell's count before normalising (crowd-kit 1.4.2 clips at 1e-10).

    Initial posteriors are each unit's vote shares (a soft majority vote); one iteration is an M-step (priors
    and confusions from the posteriors) then an E-step.
    """
    obs = np.asarray(obs, dtype=np.int64)
    n, m = obs.shape
    onehot = np.zeros((n, m, n_classes))
    answered = obs >= 0
    onehot[answered, obs[answered]] = 1.0
    if n == 0 or (answered.sum(axis=1) == 0).any():
        raise InputError("dawid-skene: every unit needs at least one answer")
    t = onehot.sum(axis=1)
    t /= t.sum(axis=1, keepdims=True)
    trace: list[float] = []
    prev, converged, n_iter = -math.inf, False, 0
    priors = confusion = np.zeros(0)
    for _ in range(max_iter):
        n_iter += 1
        priors = t.mean(axis=0)
        counts = np.einsum("ik,ijl->jkl", t, onehot) + smoothing
        if floor > 0:
            counts = np.maximum(counts, floor)
        denom = counts.sum(axis=2, keepdims=True)
        confusion = np.divide(counts, denom, out=np.full_like(counts, 1.0 / n_classes), where=denom > 0)
        with np.errstate(divide="ignore"):
            logc = np.log(confusion)
            logp = np.log(priors)
        ll = logp[None, :] + np.einsum("ijl,jkl->ik", onehot, np.where(np.isfinite(logc), logc, -1e300))
        mx = ll.max(axis=1, keepdims=True)
        t = np.exp(ll - mx)
        z = t.sum(axis=1, keepdims=True)
        t /= z
        loglik = float((mx[:, 0] + np.log(z[:, 0])).sum())
        trace.append(loglik)
        if loglik - prev < tol:
            converged = True
            break
        prev = loglik
    return DawidSkeneFit(t, priors, confusion, n_iter, trace[-1], converged, trace)


def dawid_skene_jury(vals: pd.DataFrame, status: pd.DataFrame, *, categories: Sequence[Any], quorum: int,
                     is_verdict: bool, max_iter: int, tol: float, smoothing: float,
                     floor: float = 0.0) -> tuple[list[dict[str, Any]], DawidSkeneFit | None]:
    """Per unit: the posterior mode (ties: the lowest category), its posterior as ``confidence`` and every
    category's posterior in ``probs``; units below the quorum abstain and do not enter the fit."""
    cats = list(categories)
    index = {c: i for i, c in enumerate(cats)}
    obs = np.full(vals.shape, -1, dtype=np.int64)
    for (r, c), v in np.ndenumerate(vals.to_numpy(object)):
        if v is None or (isinstance(v, float) and math.isnan(v)):
            continue
        key = v if is_verdict else round(float(v), 9)
        if key not in index:
            raise InputError(f"dawid-skene: value {v!r} of item {vals.index[r][0]!r} is not a category of the scale "
                             f"({cats}); map it explicitly", field="method")
        obs[r, c] = index[key]
    n_ans = (obs >= 0).sum(axis=1)
    fit_rows = n_ans >= max(quorum, 1)
    fit = dawid_skene(obs[fit_rows], len(cats), max_iter=max_iter, tol=tol, smoothing=smoothing,
                      floor=floor) if fit_rows.any() else None
    results: list[dict[str, Any]] = []
    pos = 0
    for n, idx in enumerate(vals.index):
        if not fit_rows[n] or fit is None:
            results.append({"status": "abstained",
                            "reason": quorum_reason(int(n_ans[n]), vals.shape[1], quorum, status.loc[idx])})
            continue
        p = fit.posterior[pos]
        pos += 1
        mode = int(np.argmax(p))
        extra: dict[str, Any] = {"posterior_mode": cats[mode], "n_iter": fit.n_iter, "converged": fit.converged}
        if not is_verdict:
            extra["expected_score"] = float(np.dot(p, np.asarray(cats, float)))
        results.append({"status": "ok", "score": None if is_verdict else float(cats[mode]),
                        "verdict": cats[mode] if is_verdict else None, "confidence": float(p[mode]),
                        "probs": {(str(c) if is_verdict else f"{c:g}"): float(q) for c, q in zip(cats, p)},
                        "extra": extra})
    return results, fit
