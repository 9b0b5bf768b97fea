"""The selective curve of each contender and judge with rating probabilities, for ``calibrate``: agreement with
humans of the most confident judgments against their coverage, with the threshold fixed-sequence testing would
guarantee marked (a one-member cascade at ``target`` and ``risk``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from scijudge.errors import InputError
from scijudge.metrics.selective.fst import fixed_sequence, selective_curve

CURVE_TARGET = 0.8
CURVE_RISK = 0.1
CURVE_COLUMNS = ("contender", "judge", "threshold", "n_kept", "n_labelled", "coverage", "agreement", "guaranteed",
                 "target", "risk", "tolerance")
MAX_POINTS = 60


def selective_curves(judgments: pd.DataFrame, labels: pd.DataFrame, *, target: float = CURVE_TARGET,
                     risk: float = CURVE_RISK, tolerance: float = 0.0) -> pd.DataFrame:
    """One curve per (contender, judge) whose ok judgments carry a confidence (``probs``, else a stored
    ``confidence``; ``scijudge.run.cascade.unit_confidence``), over its labelled units (agreement as
    ``scijudge.cascade`` defines it); at most ``MAX_POINTS`` points each, plus the guaranteed one
    (``guaranteed`` true; none when no threshold reaches ``target``)."""
    from scijudge.metrics.selective.api import _agreement, label_targets
    from scijudge.run.cascade import unit_confidence

    if judgments.empty or ("probs" not in judgments and "confidence" not in judgments):
        return pd.DataFrame(columns=list(CURVE_COLUMNS))
    judgments = judgments.assign(**{c: judgments[c] if c in judgments else None for c in ("probs", "confidence")})
    conf_all = pd.Series([unit_confidence(s, v, p, c) for s, v, p, c in zip(
        judgments["score"], judgments["verdict"], judgments["probs"], judgments["confidence"])],
        index=judgments.index, dtype=object)
    ok = judgments[(judgments["status"] == "ok") & conf_all.notna()]
    if ok.empty:
        return pd.DataFrame(columns=list(CURVE_COLUMNS))
    targets = label_targets(labels).set_index(["item_id", "judge", "part"])
    who = ok["contender"] if "contender" in ok else ok["model"]
    out: list[pd.DataFrame] = []
    for (contender, judge), g in ok.groupby([who, ok["judge"]], sort=True):
        part = g["part"].astype(str) if "part" in g else pd.Series("", index=g.index)
        lab = targets.reindex(pd.MultiIndex.from_arrays([g["item_id"].astype(str), g["judge"], part]))
        conf = conf_all.loc[g.index].to_numpy(float)
        agree = np.array([_agreement(s, v, hs, hv, tolerance) for s, v, hs, hv in
                          zip(g["score"], g["verdict"], lab["h_score"].to_numpy(float),
                              lab["h_verdict"].to_numpy(object))], dtype=float)
        use = np.isfinite(conf) & np.isfinite(agree)
        if not use.any():
            continue
        curve = selective_curve(conf[use], agree[use] > 0.5)
        fst = fixed_sequence(conf[use], agree[use] > 0.5, target=target, delta=risk)
        curve["guaranteed"] = False
        if fst.threshold is not None:
            curve.loc[curve["n_kept"] == fst.n_kept, "guaranteed"] = True
        step = max(1, len(curve) // MAX_POINTS)
        keep = (np.arange(len(curve)) % step == 0) | curve["guaranteed"].to_numpy() | (
            np.arange(len(curve)) == len(curve) - 1)
        out.append(curve[keep].assign(contender=contender, judge=judge, n_labelled=int(use.sum()), target=target,
                                      risk=risk, tolerance=tolerance))
    if not out:
        return pd.DataFrame(columns=list(CURVE_COLUMNS))
    return pd.concat(out, ignore_index=True)[list(CURVE_COLUMNS)]


def selective_options(options: Mapping[str, float] | None) -> dict[str, float]:
    """``calibrate(selective=...)`` checked: only target, risk and tolerance, each in range."""
    given = dict(options or {})
    unknown = sorted(set(given) - {"target", "risk", "tolerance"})
    if unknown:
        raise InputError(f"selective takes target, risk and tolerance, not {unknown[0]!r}", field="selective")
    for name in ("target", "risk"):
        if name in given and not 0 < float(given[name]) < 1:
            raise InputError(f"selective {name} must be between 0 and 1, got {given[name]}", field=f"selective.{name}")
    if "tolerance" in given and not float(given["tolerance"]) >= 0:
        raise InputError(f"selective tolerance must be >= 0, got {given['tolerance']}", field="selective.tolerance")
    return {k: float(v) for k, v in given.items()}


def guaranteed_points(curves: pd.DataFrame) -> pd.DataFrame:
    """Per (contender, judge): the guaranteed point, or NaNs when no threshold reaches the target."""
    rows: list[dict[str, Any]] = []
    for (contender, judge), g in curves.groupby(["contender", "judge"], sort=True):
        mark = g[g["guaranteed"]]
        first = g.iloc[0]
        rows.append({"contender": contender, "judge": judge, "n_labelled": int(first["n_labelled"]),
                     "target": first["target"], "risk": first["risk"],
                     "tolerance": float(first["tolerance"]) if "tolerance" in first else 0.0,
                     "threshold": float(mark["threshold"].iloc[0]) if len(mark) else np.nan,
                     "coverage": float(mark["coverage"].iloc[0]) if len(mark) else 0.0,
                     "agreement": float(mark["agreement"].iloc[0]) if len(mark) else np.nan,
                     "agreement_all": float(g["agreement"].iloc[-1])})
    return pd.DataFrame(rows, columns=["contender", "judge", "n_labelled", "target", "risk", "tolerance", "threshold",
                                       "coverage", "agreement", "agreement_all"])
