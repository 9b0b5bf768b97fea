"""Paired comparisons of contenders on the units both rated, with bootstrap p-values and Holm."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from scijudge.metrics import agreement as ag
from scijudge.metrics.bootstrap import (
    holm,
    paired_pvalue,
    percentile_interval,
)
from scijudge.metrics.calibration._blocks import _Context, _Group, _table_reps
from scijudge.metrics.calibration._result import PAIRED_METRICS, POOLED
from scijudge.metrics.calibration.scales import _cat_index
from scijudge.metrics.tables import (
    ordinal_stats,
    verdict_stats,
)


@dataclass
class _PairSpec:
    a: str
    b: str
    judge: str
    track: str
    pool: str
    categories: np.ndarray
    pairs_a: pd.DataFrame
    pairs_b: pd.DataFrame
    block_a: Any
    block_b: Any
    # where a side is on a continuous scale: each side's |raw error| per pair, resampled as the (sum, count)
    # blocks ``_raw_block`` names
    raw_errors: tuple[np.ndarray, np.ndarray] | None = None
    # each side's (human × judge) table of counts on the common units (ordinal track): its point κ
    tables: tuple[np.ndarray, np.ndarray] | None = None


def _raw_block(a: str, b: str, judge: str, tag: str) -> tuple[str, ...]:
    return ("pair-mae", a, b, judge, tag)


def _raw_errors(pairs: pd.DataFrame) -> np.ndarray:
    """|judge - human| on the values the per-rubric MAE uses: raw ones on a continuous scale, else the grid."""
    j = pairs["score_raw"] if "score_raw" in pairs else pairs["score"]
    h = pairs["h_raw"] if "h_raw" in pairs else pairs["h_score"]
    return np.abs(j.to_numpy(float) - h.to_numpy(float))


def _pair_blocks(ord_groups: list[_Group], ver_groups: list[_Group], ctx: _Context) -> list[_PairSpec]:
    """For each two contenders and each shared judge, tables restricted to units both rated."""
    specs = []
    for groups in (ord_groups, ver_groups):
        by_judge: dict[str, dict[str, _Group]] = {}
        for g in groups:
            if len(g.pairs):
                by_judge.setdefault(g.judge, {})[g.contender] = g
        for judge, by_c in sorted(by_judge.items()):
            for a, b in itertools.combinations(sorted(by_c), 2):
                ga, gb = by_c[a], by_c[b]
                key = ["item_id", "part"]
                both = _on_common_units(ga, gb, key)
                if both is None:
                    continue
                pa, pb = both
                cats = ga.categories
                k = cats.size
                blocks = []
                tables = []
                for tag, p in (("a", pa), ("b", pb)):
                    if ga.track == "ordinal":
                        sc = ctx.scales[judge]
                        hi, ji = _cat_index(p["h_score"].to_numpy(float), sc), _cat_index(p["score"].to_numpy(float), sc)
                    else:
                        index = {c: i for i, c in enumerate(cats)}
                        hi = np.array([index[v] for v in p["h_verdict"]], dtype=np.int64)
                        ji = np.array([index[v] for v in p["j_verdict"]], dtype=np.int64)
                    name, cells = ("pair", a, b, judge, tag), hi * k + ji
                    ctx.blocks.add(name, p["item_id"], cells, k * k)
                    blocks.append(name)
                    if ga.track == "ordinal":  # its point κ_w (the verdict track's κ comes from its pairs)
                        tables.append(np.bincount(cells, minlength=k * k).reshape(k, k))
                raw_errors = None
                if ga.track == "ordinal" and ("score_raw" in pa or "score_raw" in pb):
                    raw_errors = (_raw_errors(pa), _raw_errors(pb))
                    for tag, p, errors in (("a", pa, raw_errors[0]), ("b", pb, raw_errors[1])):
                        items = p["item_id"].to_numpy(object)
                        ctx.blocks.add(_raw_block(a, b, judge, tag), np.concatenate([items, items]),
                                       np.repeat(np.array([0, 1]), len(p)), 2,
                                       values=np.concatenate([errors, np.ones(len(p))]))
                specs.append(_PairSpec(a=a, b=b, judge=judge, track=ga.track, pool=ga.pool, categories=cats,
                                       pairs_a=pa, pairs_b=pb, block_a=blocks[0], block_b=blocks[1],
                                       raw_errors=raw_errors,
                                       tables=(tables[0], tables[1]) if tables else None))
    return specs


def _on_common_units(ga: _Group, gb: _Group, key: list[str]) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """Each group's pairs on the units both rated, sorted by unit; None below two common units.

    Where every unit appears once per group (the usual case), a hash lookup of each group's units in the other's
    gives the rows the merges below give, in the same (sorted, unique) order, without three merges per pair of
    contenders (most of the paired comparisons' time on a small panel); repeated units go through the merges."""
    sorted_a, units_a = _sorted_units(ga, key)
    sorted_b, units_b = _sorted_units(gb, key)
    if not (units_a.has_duplicates or units_b.has_duplicates):
        in_a, in_b = units_a.isin(units_b), units_b.isin(units_a)
        if int(in_a.sum()) < 2:
            return None
        return sorted_a[in_a].reset_index(drop=True), sorted_b[in_b].reset_index(drop=True)
    common = ga.pairs[key].merge(gb.pairs[key], on=key)
    if len(common) < 2:
        return None
    return (ga.pairs.merge(common, on=key).sort_values(key).reset_index(drop=True),
            gb.pairs.merge(common, on=key).sort_values(key).reset_index(drop=True))


def _sorted_units(g: _Group, key: list[str]) -> tuple[pd.DataFrame, pd.MultiIndex]:
    """A group's pairs sorted by unit, and their units: once per group, not once per pair of contenders (with
    unique units, selecting from the sorted pairs gives what sorting the selection gives)."""
    if "sorted" not in g.cache:
        ordered = g.pairs.sort_values(key).reset_index(drop=True)
        g.cache["sorted"] = ordered, pd.MultiIndex.from_frame(ordered[key])
    return g.cache["sorted"]


def _point_metric(track: str, pairs: pd.DataFrame, metric: str) -> float:
    """A side's MAE on the grid (ordinal; κ_w comes from its table, ``_table_kappa``) or verdict statistic."""
    if track == "ordinal":
        return ag.mean_absolute_error(pairs["score"].to_numpy(float), pairs["h_score"].to_numpy(float))
    scores = ag.verdict_scores(pairs["j_verdict"].to_numpy(object), pairs["h_verdict"].to_numpy(object))
    return float(getattr(scores, metric))


def _table_kappa(table: np.ndarray, ctx: _Context) -> float:
    """A side's κ_w (scikit-learn's, from the pairs' table): NaN where both sides are constant (one filled cell)."""
    return float("nan") if np.count_nonzero(table) == 1 else ctx.kappa(table)


def _paired_frame(specs: list[_PairSpec], ctx: _Context) -> pd.DataFrame:
    rows = []
    pooled: dict[tuple[str, str, str, str], list[_PairSpec]] = {}
    for s in specs:
        pooled.setdefault((s.a, s.b, s.track, s.pool), []).append(s)
    entries = [(s.judge, [s]) for s in specs] + [(POOLED, v) for _, v in sorted(pooled.items(), key=lambda kv: kv[0])]
    for judge_name, group in entries:
        first = group[0]
        pa = pd.concat([s.pairs_a for s in group], ignore_index=True)
        pb = pd.concat([s.pairs_b for s in group], ignore_index=True)
        k = first.categories.size
        reps_a = _table_reps(ctx, [s.block_a for s in group], k)
        reps_b = _table_reps(ctx, [s.block_b for s in group], k)
        stats_a = stats_b = None  # each side's replicate statistics, computed once for all metrics
        if reps_a is not None and reps_b is not None:
            if first.track == "ordinal":
                tol = float(first.categories[1] - first.categories[0])
                stats_a = ordinal_stats(reps_a, first.categories, tol, only=PAIRED_METRICS["ordinal"])
                stats_b = ordinal_stats(reps_b, first.categories, tol, only=PAIRED_METRICS["ordinal"])
            else:
                stats_a, stats_b = verdict_stats(reps_a), verdict_stats(reps_b)
        raw = [s.raw_errors for s in group if s.raw_errors is not None]  # a continuous side: MAE on raw values
        raw = raw if len(raw) == len(group) else []
        if raw and stats_a is not None and stats_b is not None:
            for stats, tag in ((stats_a, "a"), (stats_b, "b")):
                parts = [ctx.blocks.get(_raw_block(s.a, s.b, s.judge, tag)) for s in group]
                sums = np.sum([q for q in parts if q is not None], axis=0)
                with np.errstate(invalid="ignore", divide="ignore"):
                    stats["mae"] = sums[:, 0] / sums[:, 1]
        tables = [s.tables for s in group if s.tables is not None]  # every spec's (ordinal) or none (verdict)
        for metric in PAIRED_METRICS[first.track]:
            with ctx.caller_threads():  # library point estimates: the caller's BLAS threads (one_blas_thread)
                if raw and metric == "mae":
                    va = float(np.concatenate([errors_a for errors_a, _ in raw]).mean())
                    vb = float(np.concatenate([errors_b for _, errors_b in raw]).mean())
                elif metric == "kappa_w" and tables:
                    va, vb = (_table_kappa(np.sum([t[side] for t in tables], axis=0), ctx) for side in (0, 1))
                else:
                    va = _point_metric(first.track, pa, metric)
                    vb = _point_metric(first.track, pb, metric)
            row: dict[str, Any] = {"a": first.a, "b": first.b, "judge": judge_name, "track": first.pool, "metric": metric,
                                   "n": len(pa), "n_items": int(pa["item_id"].nunique()), "value_a": va, "value_b": vb,
                                   "diff": va - vb}
            if stats_a is not None and stats_b is not None:
                d = stats_a[metric] - stats_b[metric]
                lo, hi = percentile_interval(d, ctx.level)
                row.update(diff_lo=float(lo), diff_hi=float(hi), p=paired_pvalue(d))
            else:
                row.update(diff_lo=float("nan"), diff_hi=float("nan"), p=float("nan"))
            better_high = metric != "mae"
            row["better"] = "" if not math.isfinite(row["diff"]) or row["diff"] == 0 else (
                first.a if (row["diff"] > 0) == better_high else first.b)
            rows.append(row)
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    frame["p_holm"] = np.nan
    per = frame[frame["judge"] != POOLED]
    for idx in per.groupby(["a", "b", "track", "metric"]).groups.values():
        frame.loc[idx, "p_holm"] = holm(frame.loc[idx, "p"].to_numpy(float))
    pooled_rows = frame["judge"] == POOLED
    frame.loc[pooled_rows, "p_holm"] = frame.loc[pooled_rows, "p"]
    # a winner only where the difference holds after Holm; an exact tie is a tie
    significant = frame["p_holm"] < 0.05
    frame["better"] = frame["better"].where(significant, "no significant difference")
    frame.loc[frame["diff"] == 0, "better"] = "tie"
    return frame
