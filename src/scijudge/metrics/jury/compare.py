"""A jury against each of its members on human labels: paired by item, Holm-corrected, with cost per judgment.

"Beats its best member" is a claim about every member: picking the best member on the same data and testing
once would be biased. The table therefore tests the jury against each member (paired t over items of the
per-item difference in absolute error, Holm across the jury's members), marks the member with the lowest
error, and states both verdicts: Holm (each member's adjusted p) and intersection–union (all unadjusted p
below ``alpha`` with the jury better: valid for "beats every member" without adjustment).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from scijudge.errors import InputError
from scijudge.metrics.bootstrap import holm
from scijudge.metrics.jury.api import JURY_PREFIX, label_consensus
from scijudge.metrics.jury.members import normalise
from scijudge.vocab import FEW_UNITS

COLUMNS = ["jury", "member", "best_member", "n_items", "n_units", "mae_member", "mae_jury", "diff", "diff_lo",
           "diff_hi", "p", "p_holm", "cost_member", "cost_jury", "interval", "warning"]


def _paired_t(d: np.ndarray, level: float) -> tuple[float, float, float, float]:
    """Mean of ``d`` with its t interval and the two-sided p that the mean is zero (scipy.stats.t)."""
    from scipy import stats

    n = d.size
    mean = float(d.mean()) if n else math.nan
    if n < 2:
        return mean, math.nan, math.nan, math.nan
    se = float(d.std(ddof=1)) / math.sqrt(n)
    if se == 0:
        return mean, mean, mean, (1.0 if mean == 0 else 0.0)
    half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * se
    p = float(2 * stats.t.sf(abs(mean / se), n - 1))
    return mean, mean - half, mean + half, p


def _members_of(rows: pd.DataFrame) -> list[tuple[str, str]]:
    found: dict[tuple[str, str], None] = {}
    for result in rows["result"]:
        if isinstance(result, str):
            import json

            result = json.loads(result)
        for entry in (result or {}).get("members", []):
            if entry.get("model") is not None:
                found[(str(entry["model"]), str(entry.get("endpoint") or ""))] = None
    return list(found)


def _cost(rows: pd.DataFrame) -> float:
    costs = pd.to_numeric(rows["cost"], errors="coerce").dropna()
    return float(costs.mean()) if len(costs) else math.nan


def jury_vs_best_member(frame: pd.DataFrame, labels: Any, *, level: float = 0.95, alpha: float = 0.05) -> pd.DataFrame:
    """One row per (jury, member): mean per-item difference in absolute error, member minus jury (> 0: the jury is
    closer to the human consensus), its t interval over items, p, Holm-adjusted p across the jury's members,
    each one's MAE on the paired units and its mean cost per judgment.

    Args:
        frame: run-store rows holding the jury's rows (model ``jury:NAME``) and its members' rows (several stores
            concatenated).
        labels: human labels (path, HumanLabels or frame); the consensus is the annotators' median (unsnapped).

    The frame's ``attrs`` hold ``beats_every_member`` per jury: ``{"holm": bool, "intersection_union": bool}``.
    """
    df = normalise(frame)
    if "result" not in df.columns:
        raise InputError("judgments lack a run-store column", field="result")
    cons = label_consensus(labels)
    juries = sorted(m for m in df["model"].unique() if m.startswith(JURY_PREFIX))
    if not juries:
        raise InputError("no jury judgments (model jury:NAME) among the runs", field="model")
    keys = ["item_id", "judge", "part"]
    out_rows: list[dict[str, Any]] = []
    verdicts: dict[str, dict[str, bool]] = {}
    for name in juries:
        jrows = df[df["model"] == name]
        judges = set(jrows["judge"])
        j_ok = jrows[(jrows["status"] == "ok") & jrows["score"].notna()][[*keys, "score"]]
        rows = []
        for model, endpoint in _members_of(jrows):
            mrows = df[(df["model"] == model) & (df["endpoint"] == endpoint) & df["judge"].isin(judges)]
            if mrows.empty:
                continue
            m_ok = mrows[(mrows["status"] == "ok") & mrows["score"].notna()][[*keys, "score"]]
            paired = (j_ok.merge(m_ok, on=keys, suffixes=("_jury", "_member"))
                      .merge(cons[[*keys, "h_score"]], on=keys))
            e_j = (paired["score_jury"] - paired["h_score"]).abs()
            e_m = (paired["score_member"] - paired["h_score"]).abs()
            per_item = paired.assign(d=e_m - e_j).groupby("item_id")["d"].mean().to_numpy(float)
            diff, lo, hi, p = _paired_t(per_item, level)
            n_items = int(per_item.size)
            label = model if not endpoint else f"{model}@{endpoint}"
            rows.append({"jury": name, "member": label, "n_items": n_items, "n_units": int(len(paired)),
                         "mae_member": float(e_m.mean()) if len(paired) else math.nan,
                         "mae_jury": float(e_j.mean()) if len(paired) else math.nan,
                         "diff": diff, "diff_lo": lo, "diff_hi": hi, "p": p, "cost_member": _cost(mrows),
                         "cost_jury": _cost(jrows), "interval": f"paired t over items, {level:.0%}",
                         "warning": (f"only {n_items} items: a wide interval" if n_items < FEW_UNITS else "")})
        if not rows:
            raise InputError(f"{name}: none of its members' judgments are among the runs; pass the members' stores "
                             "too", field="run")
        adjusted = holm([r["p"] for r in rows])
        best = min(r["mae_member"] for r in rows)
        for r, padj in zip(rows, adjusted):
            r["p_holm"] = float(padj)
            r["best_member"] = bool(r["mae_member"] == best)
        verdicts[name] = {
            "holm": all(r["diff"] > 0 and r["p_holm"] < alpha for r in rows),
            "intersection_union": all(r["diff"] > 0 and r["p"] < alpha for r in rows),
        }
        out_rows += rows
    table = pd.DataFrame(out_rows, columns=COLUMNS)
    table.attrs["beats_every_member"] = verdicts
    return table
