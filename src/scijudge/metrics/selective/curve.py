"""The selective curve of each contender and judge with rating probabilities, for ``calibrate``: agreement with
humans of the most confident judgments against their coverage, with the threshold fixed-sequence testing would
guarantee marked (a one-member cascade at ``target`` and ``risk``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from scijudge.metrics.selective.fst import fixed_sequence, selective_curve

CURVE_TARGET = 0.8
CURVE_RISK = 0.1
CURVE_COLUMNS = ("contender", "judge", "threshold", "n_kept", "n_labelled", "coverage", "agreement", "guaranteed",
                 "target", "risk")
MAX_POINTS = 60


def selective_curves(judgments: pd.DataFrame, labels: pd.DataFrame, *, target: float = CURVE_TARGET,
                     risk: float = CURVE_RISK, tolerance: float = 0.0, seed: int = 0) -> pd.DataFrame:
    """One curve per (contender, judge) whose ok judgments carry ``probs``, over its labelled units (agreement as
    ``scijudge.cascade`` defines it); at most ``MAX_POINTS`` points each, plus the guaranteed one
    (``guaranteed`` true; none when no threshold reaches ``target``)."""
    from scijudge.metrics.selective.api import _agreement, label_targets
    from scijudge.run.cascade import confidence_of, tie_key

    if "probs" not in judgments or judgments.empty:
        return pd.DataFrame(columns=list(CURVE_COLUMNS))
    ok = judgments[(judgments["status"] == "ok") & judgments["probs"].map(lambda p: isinstance(p, dict) and bool(p))]
    if ok.empty:
        return pd.DataFrame(columns=list(CURVE_COLUMNS))
    targets = label_targets(labels).set_index(["item_id", "judge", "part"])
    who = ok["contender"] if "contender" in ok else ok["model"]
    out: list[pd.DataFrame] = []
    for (contender, judge), g in ok.groupby([who, ok["judge"]], sort=True):
        part = g["part"].astype(str) if "part" in g else pd.Series("", index=g.index)
        lab = targets.reindex(pd.MultiIndex.from_arrays([g["item_id"].astype(str), g["judge"], part]))
        conf = np.array([confidence_of(s, v, p) for s, v, p in zip(g["score"], g["verdict"], g["probs"])], dtype=float)
        agree = np.array([_agreement(s, v, hs, hv, tolerance) for s, v, hs, hv in
                          zip(g["score"], g["verdict"], lab["h_score"].to_numpy(float),
                              lab["h_verdict"].to_numpy(object))], dtype=float)
        use = np.isfinite(conf) & np.isfinite(agree)
        if not use.any():
            continue
        tie = np.array([tie_key(seed, str(i), str(judge), str(p)) for i, p in zip(g["item_id"], part)])[use]
        curve = selective_curve(conf[use], tie, agree[use] > 0.5)
        fst = fixed_sequence(conf[use], tie, agree[use] > 0.5, target=target, delta=risk)
        curve["guaranteed"] = False
        if fst.threshold is not None:
            curve.loc[curve["n_kept"] == fst.n_kept, "guaranteed"] = True
        step = max(1, len(curve) // MAX_POINTS)
        keep = (np.arange(len(curve)) % step == 0) | curve["guaranteed"].to_numpy() | (
            np.arange(len(curve)) == len(curve) - 1)
        out.append(curve[keep].assign(contender=contender, judge=judge, n_labelled=int(use.sum()), target=target,
                                      risk=risk))
    if not out:
        return pd.DataFrame(columns=list(CURVE_COLUMNS))
    return pd.concat(out, ignore_index=True)[list(CURVE_COLUMNS)]


def guaranteed_points(curves: pd.DataFrame) -> pd.DataFrame:
    """Per (contender, judge): the guaranteed point, or NaNs when no threshold reaches the target."""
    rows: list[dict[str, Any]] = []
    for (contender, judge), g in curves.groupby(["contender", "judge"], sort=True):
        mark = g[g["guaranteed"]]
        first = g.iloc[0]
        rows.append({"contender": contender, "judge": judge, "n_labelled": int(first["n_labelled"]),
                     "target": first["target"], "risk": first["risk"],
                     "threshold": float(mark["threshold"].iloc[0]) if len(mark) else np.nan,
                     "coverage": float(mark["coverage"].iloc[0]) if len(mark) else 0.0,
                     "agreement": float(mark["agreement"].iloc[0]) if len(mark) else np.nan,
                     "agreement_all": float(g["agreement"].iloc[-1])})
    return pd.DataFrame(rows, columns=["contender", "judge", "n_labelled", "target", "risk", "threshold", "coverage",
                                       "agreement", "agreement_all"])
