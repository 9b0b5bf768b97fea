"""Scores on an ordinal scale: point estimates, intervals, confidence calibration, per rubric and pooled."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from scijudge.errors import InputError
from scijudge.metrics import agreement as ag
from scijudge.metrics.bootstrap import (
    holm,
)
from scijudge.metrics.calibration import continuous as cont
from scijudge.metrics.calibration._blocks import (
    _Context,
    _coverage,
    _Group,
    _intervals,
    _per_rubric_and_pooled,
    pools,
    _rank,
    _table_reps,
)
from scijudge.metrics.calibration.scales import _cat_index, scale_text, to_grid
from scijudge.metrics.tables import (
    ORDINAL_STATS,
    ordinal_stats,
)


def _ordinal_point(j: np.ndarray, h: np.ndarray, values: np.ndarray, tol: float, table: np.ndarray,
                   reliability: dict[str, float] | None, pearson: float,
                   kappa: Callable[..., float]) -> tuple[dict[str, float], list[str]]:
    """Point estimates from the library-backed functions, plus why any of them is undefined. ``table``: the pairs'
    ``ag.confusion``, which both kappas are computed from (by ``kappa``: ``_Context.kappa`` remembers them for the
    paired comparisons); ``reliability``: their ``ag.ordinal_reliability`` (None for fewer than 2 pairs);
    ``pearson``: their ``ag.pearson``, computed on the caller's BLAS threads."""
    notes: list[str] = []
    n = j.size
    out: dict[str, float] = {
        "exact": ag.exact_agreement(j, h),
        "within1": ag.within_agreement(j, h, tol),
        "mae": ag.mean_absolute_error(j, h),
        "top_share_judge": ag.top_share(j, values[-1]),
        "top_share_human": ag.top_share(h, values[-1]),
    }
    bias = ag.mean_bias(j, h)
    out.update(bias=bias.bias, bias_t=bias.t, bias_p=bias.p_ttest, bias_p_wilcoxon=bias.p_wilcoxon)
    j_const, h_const = n < 2 or np.ptp(j) == 0, n < 2 or np.ptp(h) == 0
    if n < 2:
        notes.append("fewer than 2 pairs: correlations, kappa, alpha, AC2 and ICC undefined")
    elif j_const or h_const:
        who = "judge and human" if j_const and h_const else ("judge" if j_const else "human")
        notes.append(f"{who} ratings constant: correlations and ICC undefined")
    with np.errstate(all="ignore"):
        defined = n >= 2 and not (j_const and h_const)
        out["kappa_w"] = kappa(table) if defined else float("nan")
        out["kappa_linear"] = kappa(table, "linear") if defined else float("nan")
        pair = np.column_stack([h, j])
        nan = float("nan")
        out.update(reliability if reliability is not None  # = krippendorff_alpha ×2 and gwet_ac2
                   else {"alpha_ordinal": nan, "alpha_interval": nan, "ac2": nan})
        out["spearman"] = ag.spearman(j, h)
        out["kendall"] = ag.kendall_tau_b(j, h)
        out["pearson"] = pearson
        icc = ag.icc(pair) if n >= 2 and not (j_const and h_const) else {"ICC(A,1)": float("nan"), "ICC(C,1)": float("nan")}
        out["icc_a1"], out["icc_c1"] = icc["ICC(A,1)"], icc["ICC(C,1)"]
        out["sd_ratio"] = ag.sd_ratio(j, h) if not h_const else float("nan")
    for name in ("kappa_w", "alpha_ordinal", "alpha_interval"):
        if n >= 2 and not math.isfinite(out[name]) and j_const and h_const:
            notes.append(f"{name} undefined: every rating is the same value")
            break
    if h_const and n >= 2:
        notes.append("sd_ratio undefined: human ratings constant")
    if not math.isfinite(out["bias_p"]):
        notes.append("bias test undefined: fewer than 2 pairs")
    return out, notes


def _calibration(group: pd.DataFrame, track: str, values: np.ndarray | None, n_bins: int,
                 prob_rows: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Brier score and ECE (equal-width and equal-mass) from rating probabilities or a confidence.

    ``prob_rows``: (which rows have probabilities, their ``_prob_matrix``) when already known (pooled rows reuse
    their rubrics' matrices)."""
    out: dict[str, Any] = {"calibration_source": None, "n_calibration": 0, "brier": float("nan"),
                           "ece": float("nan"), "ece_mass": float("nan")}
    bins: list[dict[str, Any]] = []
    correct: np.ndarray
    if track == "ordinal":
        has = _has_probs(group) if prob_rows is None else prob_rows[0]
        n_probs = int(np.count_nonzero(has))
        if n_probs and values is not None:
            probs = _prob_matrix(group[has], values) if prob_rows is None else prob_rows[1]
            h = group["h_score"].to_numpy(float)[has]  # one column, not a copy of every column of those rows
            top = probs.argmax(axis=1)
            correct = np.isclose(values[top], h)
            conf = probs.max(axis=1)
            out.update(calibration_source="probs", n_calibration=n_probs,
                       brier=ag.brier_multiclass(probs, h, values))
        else:
            sel = group[group["confidence"].notna()]
            if sel.empty:
                return out, bins
            conf = sel["confidence"].to_numpy(float)
            correct = np.isclose(sel["score"].to_numpy(float), sel["h_score"].to_numpy(float))
            out.update(calibration_source="confidence", n_calibration=len(sel), brier=ag.brier_binary(conf, correct))
    else:
        sel = group[group["confidence"].notna()]
        if sel.empty:
            return out, bins
        conf = sel["confidence"].to_numpy(float)
        correct = (sel["j_verdict"] == sel["h_verdict"]).to_numpy()
        out.update(calibration_source="confidence", n_calibration=len(sel), brier=ag.brier_binary(conf, correct))
    if np.any((conf < 0) | (conf > 1)):
        raise InputError("confidence values must lie in [0, 1]", field="confidence")
    for strategy, key in (("uniform", "ece"), ("quantile", "ece_mass")):
        b = ag.reliability_bins(conf, correct, n_bins, strategy)  # type: ignore[arg-type]
        out[key] = ag.calibration_error_of_bins(b)  # = expected_calibration_error, from the same bins
        for i in range(len(b["count"])):
            bins.append({"strategy": strategy, "bin": i, "lower": float(b["lower"][i]), "upper": float(b["upper"][i]),
                         "count": int(b["count"][i]), "confidence": float(b["confidence"][i]),
                         "accuracy": float(b["accuracy"][i])})
    return out, bins


def _has_probs(frame: pd.DataFrame) -> np.ndarray:
    """Which rows carry rating probabilities (a non-empty dict)."""
    return np.array([isinstance(p, dict) and len(p) > 0 for p in frame["probs"].tolist()], dtype=bool)


def _group_probs(groups: list[_Group], values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``_has_probs`` and ``_prob_matrix`` of the groups' pairs concatenated, each group's computed once (the
    rubric's row, then its pooled row): rows are independent, so the pieces stack to the whole."""
    parts = []
    for g in groups:
        if "probs" not in g.cache:
            has = _has_probs(g.pairs)
            g.cache["probs"] = (has, _prob_matrix(g.pairs, values, has))
        parts.append(g.cache["probs"])
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def _prob_matrix(frame: pd.DataFrame, values: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """Every row's ``probs`` (or those of the rows in ``mask``, without copying the frame's other columns) as a
    renormalised vector on the scale points: ``_prob_row`` for each row, computed per distinct key set (the keys
    are parsed once, the values in one array), with the same arithmetic in the same order so every bit matches.
    Rows the fast path cannot vouch for (unusual keys or values, a bad probability, a zero sum) go through
    ``_prob_row`` itself, in row order, so the first bad row raises the same error."""
    dicts = frame["probs"].tolist()
    positions = np.arange(len(dicts)) if mask is None else np.flatnonzero(mask)
    if positions.size < len(dicts):
        dicts = [dicts[i] for i in positions]
    out = np.zeros((len(dicts), values.size))
    key_sets = list(map(tuple, dicts))
    by_keys: dict[tuple[Any, ...], list[int]] = {}
    if key_sets and key_sets.count(key_sets[0]) == len(key_sets):  # one key set for all (the usual case)
        by_keys[key_sets[0]] = list(range(len(key_sets)))
    else:
        for i, keys in enumerate(key_sets):
            by_keys.setdefault(keys, []).append(i)
    slow: list[int] = []
    for keys, rows in by_keys.items():
        idx = _key_indices(keys, values)
        some = dicts if len(rows) == len(dicts) else [dicts[i] for i in rows]
        flat = list(itertools.chain.from_iterable(p.values() for p in some))
        try:
            given = np.array(flat, dtype=float).reshape(len(rows), len(keys))
        except (TypeError, ValueError, OverflowError):
            idx = None
        if idx is None or not set(map(type, flat)) <= {float, int}:
            slow += rows
            continue
        vec = np.zeros((len(rows), values.size))
        for col, at in enumerate(idx):  # += in key order, as _prob_row adds them (keys may share a point)
            vec[:, at] += given[:, col]
        total = vec.sum(axis=1)  # the same pairwise order as one row's vec.sum()
        good = np.isfinite(given).all(axis=1) & (given >= 0).all(axis=1) & (total > 0)
        at_rows = np.asarray(rows)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[at_rows[good]] = vec[good] / total[good, None]
        slow += at_rows[~good].tolist()
    for i in sorted(slow):
        out[i] = _prob_row(dicts[i], values, frame.iloc[int(positions[i])])
    return out


def _key_indices(keys: tuple[Any, ...], values: np.ndarray) -> list[int] | None:
    """The scale point of each probability key, as ``_prob_row`` finds it; None if any key is not one."""
    found = []
    for key in keys:
        if not isinstance(key, str):
            return None
        try:
            v = float(key)
        except ValueError:
            return None
        idx = int(np.argmin(np.abs(values - v)))
        if not abs(values[idx] - v) < 1e-6:
            return None
        found.append(idx)
    return found


def _prob_row(probs: dict[str, Any], values: np.ndarray, row: pd.Series) -> np.ndarray:
    vec = np.zeros(values.size)
    for key, p in probs.items():
        try:
            v = float(key)
            idx = int(np.argmin(np.abs(values - v)))
            ok = abs(values[idx] - v) < 1e-6
            p = float(p)
        except (TypeError, ValueError):
            ok = False
        if not ok or not math.isfinite(p) or p < 0:
            raise InputError(f"judgment of item {row['item_id']!r} ({row['judge']!r}) has a rating probability "
                             f"{key!r}: {p!r} that is not a point of the scale with a probability >= 0",
                             file=row.get("source") or None, field="probs")
        vec[idx] += p
    total = vec.sum()
    if total <= 0:
        raise InputError(f"judgment of item {row['item_id']!r} ({row['judge']!r}) has rating probabilities that sum to 0",
                         file=row.get("source") or None, field="probs")
    return vec / total  # renormalised: logprob-derived probabilities rarely sum to exactly 1


def _ordinal_groups(matched: pd.DataFrame, cons: pd.DataFrame, ctx: _Context) -> list[_Group]:
    groups = []
    for (contender, judge), g in matched.groupby(["contender", "judge"], sort=True):
        sc = ctx.scales[judge]
        values = ag.scale_values(*sc)
        usable = (g["status"] == "ok") & g["score"].notna()
        pairs = g[usable]
        is_cont = ctx.is_continuous(contender, judge)  # each contender on its own scale (scales.resolve_contender_scales)
        if is_cont:  # raw values kept for MAE/bias/correlations/ICC; the grid copy feeds κ/α and the tables
            h_raw = pairs["h_score"] if judge in ctx.continuous else pairs["h_median"]
            pairs = pairs.assign(score_raw=pairs["score"], h_raw=h_raw,
                                 score=to_grid(pairs["score"].to_numpy(float), sc),
                                 h_score=to_grid(h_raw.to_numpy(float), sc))
        grp = _Group(contender=contender, judge=judge, track="ordinal", pool=scale_text(sc, is_cont),
                     model=str(g["model"].iloc[0]),
                     spec_hash=",".join(sorted(g["spec_hash"].unique())), family=str(g["family"].iloc[0]),
                     categories=values, pairs=pairs, counts=_coverage(g, cons, judge, usable))
        if len(pairs):
            k = values.size
            hi = _cat_index(pairs["h_score"].to_numpy(float), sc)
            ji = _cat_index(pairs["score"].to_numpy(float), sc)
            grp.block = ("ord", contender, judge)
            ctx.blocks.add(grp.block, pairs["item_id"], hi * k + ji, k * k)
            if is_cont:
                cells, vals = cont.moment_cells(*cont.split_raw(pairs))
                items = np.repeat(pairs["item_id"].to_numpy(), cont.N_MOMENTS)
                ctx.blocks.add(("mom", contender, judge), items, cells, cont.N_MOMENTS, vals)
        groups.append(grp)
    return groups


_Points = dict[tuple[int, ...], tuple[np.ndarray, dict[str, float], list[str]]]


def _library_points(groups: list[_Group], ctx: _Context) -> _Points:
    """(confusion table, ``_ordinal_point``) of every row ``_ordinal_frames`` makes that has pairs (each rubric, each
    pool). Pearson's r is the one estimate whose bits depend on the BLAS thread count (scipy sums its dot product in
    per-thread parts; ``tests/metrics/calibration/test_fast_paths.py`` checks that Spearman's ρ, Kendall's τ, the
    t statistic, both kappas and the ICCs give the bits they give on the caller's threads), so the r of every row
    is computed in one short stretch on the caller's threads (one_blas_thread): after a stretch of multi-threaded
    BLAS calls the helper threads spin for a while, and while the whole of the point estimates ran on them that was
    about 0.5 s of CPU."""
    prepared = []
    for gs in [[g] for g in groups] + pools(groups):
        if not any(len(g.pairs) for g in gs):
            continue
        values = gs[0].categories
        j = np.concatenate([g.pairs["score"].to_numpy(float) for g in gs])  # = the row's concatenated pairs
        h = np.concatenate([g.pairs["h_score"].to_numpy(float) for g in gs])
        cm = ag.confusion(j, h, values)
        # our own α and AC2 stay on calibrate's one BLAS thread: on the caller's threads their one small product
        # cost twenty times its work in helper threads, and with two ratings per unit its sums are exact on any
        with np.errstate(all="ignore"):
            reliability = ag.ordinal_reliability(np.column_stack([h, j]), values) if j.size >= 2 else None
        prepared.append((_row_key(gs), j, h, values, cm, reliability))
    with ctx.caller_threads(), np.errstate(all="ignore"):  # the caller's BLAS threads (one_blas_thread)
        pearsons = [ag.pearson(j, h) for _, j, h, *_ in prepared]
    return {key: (cm, *_ordinal_point(j, h, values, float(values[1] - values[0]), cm, reliability, r, ctx.kappa))
            for (key, j, h, values, cm, reliability), r in zip(prepared, pearsons)}


def _row_key(groups: list[_Group]) -> tuple[int, ...]:
    return tuple(id(g) for g in groups)


def _ordinal_row(groups: list[_Group], ctx: _Context, judge_name: str,
                 points: _Points) -> tuple[dict[str, Any], list[dict], list[dict]]:
    first = groups[0]
    values = first.categories
    tol = float(values[1] - values[0])
    pairs = pd.concat([g.pairs for g in groups], ignore_index=True)
    counts = {k: sum(g.counts[k] for g in groups) for k in first.counts}
    row: dict[str, Any] = {"contender": first.contender, "model": first.model, "judge": judge_name,
                           "spec_hash": first.spec_hash if len(groups) == 1 else "", "family": first.family,
                           "scale": first.pool, **counts,
                           "n_items": int(pairs["item_id"].nunique()) if len(pairs) else 0}
    expected = counts["n_judged"] + counts["n_missing"]
    row["coverage"] = counts["n"] / expected if expected else float("nan")
    conf_rows: list[dict] = []
    rel_rows: list[dict] = []
    if pairs.empty:
        row["notes"] = "no usable judgment (all abstained or missing)"
        return row, conf_rows, rel_rows
    cm, point, point_notes = points[_row_key(groups)]
    row.update(point)
    notes = list(point_notes)  # this row's own list: the rounding note is added below
    reps_tables = _table_reps(ctx, [g.block for g in groups], values.size)
    reps = ordinal_stats(reps_tables, values, tol) if reps_tables is not None else None
    if "score_raw" in pairs and pairs["score_raw"].notna().all():
        with ctx.caller_threads():
            row.update(cont.raw_point(*cont.split_raw(pairs)))
        moments = cont.replicate_moments([ctx.blocks.get(("mom", g.contender, g.judge)) for g in groups])
        if reps is not None and moments is not None:
            reps.update(cont.moment_stats(moments))
        draws = ctx.blocks.pair_counts(pairs["item_id"].to_numpy())
        if reps is not None and draws is not None:
            reps.update(cont.rank_replicates(draws, *cont.split_raw(pairs)))
        notes.append(cont.rounding_note(tol))
    _intervals(row, reps, ORDINAL_STATS, ctx.level)
    cal, bins = _calibration(pairs, "ordinal", values, ctx.n_bins, _group_probs(groups, values))
    row.update(cal)
    row["notes"] = "; ".join(notes)
    for a, hv in enumerate(values):
        for b, jv in enumerate(values):
            conf_rows.append({"contender": first.contender, "judge": judge_name, "track": first.pool,
                              "human": float(hv), "judge_value": float(jv), "count": int(cm[a, b])})
    for one_bin in bins:
        rel_rows.append({"contender": first.contender, "judge": judge_name, "track": first.pool,
                         "source": cal["calibration_source"], **one_bin})
    return row, conf_rows, rel_rows


def _ordinal_frames(groups: list[_Group], ctx: _Context) -> tuple[pd.DataFrame, pd.DataFrame, list[dict], list[dict]]:
    points = _library_points(groups, ctx)
    rows, pooled, conf_rows, rel_rows = _per_rubric_and_pooled(
        groups, ctx, lambda gs, c, name: _ordinal_row(gs, c, name, points))
    per_rubric = pd.DataFrame(rows)
    if not per_rubric.empty and "bias_p" in per_rubric:  # no bias_p at all when every judgment abstained
        per_rubric["bias_p_holm"] = np.nan
        for idx in per_rubric.groupby(["contender", "scale"]).groups.values():
            per_rubric.loc[idx, "bias_p_holm"] = holm(per_rubric.loc[idx, "bias_p"].to_numpy(float))
    leaderboard = _rank(pd.DataFrame(pooled), "kappa_w", "scale")
    return per_rubric, leaderboard, conf_rows, rel_rows
