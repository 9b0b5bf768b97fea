"""The human ceiling: agreement among annotators where at least two labelled a unit."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from scijudge.metrics import agreement as ag
from scijudge.metrics.calibration._blocks import _Context, _intervals, _isin
from scijudge.metrics.calibration._result import POOLED, ScaleTuple
from scijudge.metrics.calibration.scales import scale_text, to_grid


@dataclass
class _CeilingSpec:
    judge: str
    track: str
    pool: str
    categories: np.ndarray
    matrix: np.ndarray  # units × annotators, NaN missing (ordinal) or category index (verdict)
    unit_items: np.ndarray
    annotators: list[str]
    block: Any = None


def _ceiling_blocks(lab: pd.DataFrame, scales: dict[str, ScaleTuple], ctx: _Context) -> list[_CeilingSpec]:
    """Annotator × unit matrices for judges where some unit has ≥2 annotators, registered for bootstrap."""
    specs: list[_CeilingSpec] = []
    if int(lab.duplicated(["item_id", "judge", "part"]).sum()) < 2:  # one label per unit (the usual case): no judge
        return specs  # can have the two units with ≥2 labels asked below, so skip the per-track copies and look-ups
    for track in ("ordinal", "verdict"):
        sel = lab[lab["score"].notna()] if track == "ordinal" else lab[lab["verdict"].notna()]
        sel = sel[_isin(sel["item_id"], ctx.blocks._lookup)]
        for judge, g in sel.groupby("judge", sort=True):
            if track == "ordinal" and judge not in scales:
                continue
            per_unit = g.groupby(["item_id", "part"]).size()
            if (per_unit >= 2).sum() < 2:
                continue
            if track == "ordinal":
                categories = ag.scale_values(*scales[judge])
                wide = g.pivot(index=["item_id", "part"], columns="annotator", values="score")
                matrix = wide.to_numpy(float)
                if judge in ctx.continuous or any(j == judge for _, j in ctx.partly):  # on the grid, like κ/α
                    matrix = to_grid(matrix, scales[judge])
                pool = scale_text(scales[judge], judge in ctx.continuous)
            else:
                categories = np.array(sorted(g["verdict"].unique()), dtype=object)
                index = {c: float(i) for i, c in enumerate(categories)}
                wide = g.assign(v=g["verdict"].map(index)).pivot(index=["item_id", "part"], columns="annotator", values="v")
                matrix = wide.to_numpy(float)
                pool = "verdict"
            spec = _CeilingSpec(judge=judge, track=track, pool=pool, categories=categories, matrix=matrix,
                                unit_items=wide.index.get_level_values(0).to_numpy(), annotators=list(wide.columns))
            values = categories if track == "ordinal" else np.arange(categories.size, dtype=float)
            counts = ag._category_counts(matrix, values)
            m = counts.sum(axis=1)
            k = values.size
            keep = m >= 2
            # per-unit coincidence contributions (Krippendorff) and AC2 unit statistics (Gwet), both additive
            c = counts[keep]
            per_unit_o = (c[:, :, None] * c[:, None, :] - c[:, :, None] * np.eye(k)[None]) / (m[keep] - 1)[:, None, None]
            weights = "quadratic" if track == "ordinal" else "identity"
            unit_stats = ag.ac2_unit_stats(counts, values, weights)
            items_o = np.repeat(spec.unit_items[keep], k * k)
            cells_o = np.tile(np.arange(k * k), int(keep.sum()))
            width = k * k + unit_stats.shape[1]
            items_a = np.repeat(spec.unit_items, unit_stats.shape[1])
            cells_a = k * k + np.tile(np.arange(unit_stats.shape[1]), len(spec.unit_items))
            spec.block = ("ceil", track, judge)
            ctx.blocks.add(spec.block, np.concatenate([items_o, items_a]), np.concatenate([cells_o, cells_a]), width,
                           np.concatenate([per_unit_o.reshape(-1), unit_stats.reshape(-1)]))
            specs.append(spec)
    return specs


def _pairwise_human(spec: _CeilingSpec) -> tuple[float, float]:
    """Mean over annotator pairs (≥2 shared units) of quadratic kappa (ordinal) or Cohen kappa (verdict),
    and of exact agreement."""
    kappas, exacts = [], []
    for a, b in itertools.combinations(range(spec.matrix.shape[1]), 2):
        both = ~np.isnan(spec.matrix[:, a]) & ~np.isnan(spec.matrix[:, b])
        if both.sum() < 2:
            continue
        x, y = spec.matrix[both, a], spec.matrix[both, b]
        exacts.append(ag.exact_agreement(x, y))
        values = spec.categories if spec.track == "ordinal" else np.arange(spec.categories.size, dtype=float)
        if np.ptp(np.r_[x, y]) > 0:
            kappas.append(ag.weighted_kappa(x, y, values, "quadratic" if spec.track == "ordinal" else None))
    return (float(np.mean(kappas)) if kappas else float("nan"), float(np.mean(exacts)) if exacts else float("nan"))


def _ceiling_frame(specs: list[_CeilingSpec], ctx: _Context) -> pd.DataFrame:
    rows = []
    by_pool: dict[tuple[str, str], list[_CeilingSpec]] = {}
    for spec in specs:
        by_pool.setdefault((spec.track, spec.pool), []).append(spec)
    entries = [(s.judge, [s]) for s in specs] + [(POOLED, v) for (t, p), v in sorted(by_pool.items()) if len(v) > 1 and t == "ordinal"]
    for judge_name, group in entries:
        first = group[0]
        values = first.categories if first.track == "ordinal" else np.arange(first.categories.size, dtype=float)
        k = values.size
        matrix = np.vstack([np.pad(s.matrix, ((0, 0), (0, max(x.matrix.shape[1] for x in group) - s.matrix.shape[1])),
                                   constant_values=np.nan) for s in group])
        n_rated = (~np.isnan(matrix)).sum(axis=1)
        row: dict[str, Any] = {"judge": judge_name, "track": first.pool, "n_units": int((n_rated >= 2).sum()),
                               "n_annotators": len(set().union(*[s.annotators for s in group]))}
        weights = "quadratic" if first.track == "ordinal" else "identity"
        levels = ("ordinal", "interval") if first.track == "ordinal" else ("nominal",)
        stats: dict[str, np.ndarray] = {}
        reps_all = [ctx.blocks.get(s.block) for s in group]
        reps = None if reps_all[0] is None else np.sum([r for r in reps_all if r is not None], axis=0)
        for level in levels:
            row[f"alpha_{level}"] = ag.krippendorff_alpha(matrix, values, level)  # type: ignore[arg-type]
            if reps is not None:
                stats[f"alpha_{level}"] = ag.alpha_from_coincidence(reps[:, : k * k].reshape(-1, k, k), values, level)  # type: ignore[arg-type]
        row["ac2"] = ag.gwet_ac2(matrix, values, weights)  # type: ignore[arg-type]
        if reps is not None:
            stats["ac2"] = ag.ac2_from_unit_stats(reps[:, k * k:], values, weights)
        names = tuple(stats) if stats else tuple(f"alpha_{lv}" for lv in levels) + ("ac2",)
        _intervals(row, stats or None, names, ctx.level)
        if len(group) == 1:
            row["pairwise_kappa"], row["pairwise_exact"] = _pairwise_human(first)
        else:
            pk = [_pairwise_human(s) for s in group]
            row["pairwise_kappa"] = float(np.nanmean([p[0] for p in pk])) if any(np.isfinite(p[0]) for p in pk) else float("nan")
            row["pairwise_exact"] = float(np.nanmean([p[1] for p in pk])) if any(np.isfinite(p[1]) for p in pk) else float("nan")
        rows.append(row)
    return pd.DataFrame(rows)
