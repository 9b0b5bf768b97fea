"""Verdicts (categorical judgments): accuracy, kappa, F1 and MCC per rubric and pooled per family."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from scijudge.metrics import agreement as ag
from scijudge.metrics.calibration._blocks import (
    _Context,
    _coverage,
    _Group,
    _intervals,
    _per_rubric_and_pooled,
    _rank,
    _table_reps,
)
from scijudge.metrics.calibration.ordinal import _calibration
from scijudge.metrics.tables import (
    VERDICT_STATS,
    verdict_stats,
)


def _verdict_groups(matched: pd.DataFrame, cons: pd.DataFrame, ctx: _Context) -> list[_Group]:
    if matched.empty:
        return []
    matched = matched.assign(j_verdict=matched["verdict"])
    fam_of = matched.groupby("judge")["family"].first()
    classes: dict[str, set[str]] = {}
    for judge, fam in fam_of.items():
        sel = matched[matched["judge"] == judge]
        classes.setdefault(fam, set()).update(sel["h_verdict"].dropna())
        classes[fam].update(sel.loc[sel["status"] == "ok", "j_verdict"].dropna())
    cats = {fam: np.array(sorted(c), dtype=object) for fam, c in classes.items()}
    groups = []
    for (contender, judge), g in matched.groupby(["contender", "judge"], sort=True):
        fam = str(fam_of[judge])
        usable = (g["status"] == "ok") & g["j_verdict"].notna()
        pairs = g[usable]
        categories = cats[fam]
        grp = _Group(contender=contender, judge=judge, track="verdict", pool=f"verdict:{fam}", model=str(g["model"].iloc[0]),
                     spec_hash=",".join(sorted(g["spec_hash"].unique())), family=fam, categories=categories,
                     pairs=pairs, counts=_coverage(g, cons, judge, usable))
        if len(pairs):
            index = {c: i for i, c in enumerate(categories)}
            k = categories.size
            hi = np.array([index[v] for v in pairs["h_verdict"]], dtype=np.int64)
            ji = np.array([index[v] for v in pairs["j_verdict"]], dtype=np.int64)
            grp.block = ("ver", contender, judge)
            ctx.blocks.add(grp.block, pairs["item_id"], hi * k + ji, k * k)
        groups.append(grp)
    return groups


def _verdict_row(groups: list[_Group], ctx: _Context, judge_name: str) -> tuple[dict[str, Any], list[dict], list[dict]]:
    first = groups[0]
    pairs = pd.concat([g.pairs for g in groups], ignore_index=True)
    counts = {k: sum(g.counts[k] for g in groups) for k in first.counts}
    row: dict[str, Any] = {"contender": first.contender, "model": first.model, "judge": judge_name,
                           "spec_hash": first.spec_hash if len(groups) == 1 else "", "family": first.family,
                           "classes": ",".join(first.categories), **counts,
                           "n_items": int(pairs["item_id"].nunique()) if len(pairs) else 0}
    expected = counts["n_judged"] + counts["n_missing"]
    row["coverage"] = counts["n"] / expected if expected else float("nan")
    conf_rows: list[dict] = []
    if pairs.empty:
        row["notes"] = "no usable judgment (all abstained or missing)"
        return row, conf_rows, []
    h = pairs["h_verdict"].to_numpy(object)
    j = pairs["j_verdict"].to_numpy(object)
    with ctx.caller_threads():  # library point estimates: the caller's BLAS threads (one_blas_thread)
        scores = ag.verdict_scores(j, h)
    row.update({k: getattr(scores, k) for k in VERDICT_STATS})
    notes = []
    if not math.isfinite(scores.kappa):
        notes.append("kappa and MCC undefined: a single verdict class")
    reps_tables = _table_reps(ctx, [g.block for g in groups], first.categories.size)
    reps = verdict_stats(reps_tables) if reps_tables is not None else None
    _intervals(row, reps, VERDICT_STATS, ctx.level)
    cal, bins = _calibration(pairs, "verdict", None, ctx.n_bins)
    row.update(cal)
    row["notes"] = "; ".join(notes)
    from sklearn.metrics import confusion_matrix

    cm = confusion_matrix(h, j, labels=first.categories)
    for a, hv in enumerate(first.categories):
        for b, jv in enumerate(first.categories):
            conf_rows.append({"contender": first.contender, "judge": judge_name, "track": first.pool,
                              "human": hv, "judge_value": jv, "count": int(cm[a, b])})
    rel_rows = [{"contender": first.contender, "judge": judge_name, "track": first.pool,
                 "source": cal["calibration_source"], **b} for b in bins]
    return row, conf_rows, rel_rows


def _verdict_frames(groups: list[_Group], ctx: _Context) -> tuple[pd.DataFrame, pd.DataFrame, list[dict], list[dict]]:
    rows, pooled, conf_rows, rel_rows = _per_rubric_and_pooled(groups, ctx, _verdict_row)
    leaderboard = _rank(pd.DataFrame(pooled), "kappa", "family") if pooled else pd.DataFrame()
    return pd.DataFrame(rows), leaderboard, conf_rows, rel_rows
