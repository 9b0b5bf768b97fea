"""Figure-extraction metric: how close digitised plot series are to the ground truth.

For every ground-truth series and the extracted series of the same (normalised) name, both point sets
are mapped into the figure's **axis-normalised space**: log10 is applied on logarithmic axes, then each
axis is scaled by the ground truth's range on that axis across the whole figure (so a unit distance is
the width or height of the plotted data, as a reader sees it). In that space:

* **precision** distances go from each extracted point to its nearest true point (is what was extracted
  really there?), **recall** distances from each true point to its nearest extracted point (was all of it
  extracted?). Each is summarised as RMSE and MAE; the **symmetric** RMSE/MAE pool both directions.
* every distance is capped at ``WORST_DISTANCE`` = √2, the diagonal of the ground truth's normalised box.
  The cap makes the worst case a fixed, reachable number, and stops one wild point from dominating.
* an **empty or missing extracted series scores the worst value, √2, on every measure** — never 0.
  ``score`` = 1 − symmetric RMSE / √2 is 1 for a perfect extraction and 0 for the worst case.

**Source-compatible mode** (``cap=False``, ``scijudge figure-metric --no-cap``) leaves distances uncapped and
adds ``source_rmse`` / ``source_mae``: LeMaterial llm-synthesis's own figure number, computed by its rule —
linear coordinates scaled by the ground truth's x range and its y range pooled over all series, the
extracted→true nearest-neighbour RMSE (or MAE) of each series whose name is in both, averaged over those
series; missing series are ignored, an empty extracted series counts 0, and with no common series the
number is undefined (None). One wild point can then dominate, as it does in the source.

Series names are matched after normalisation (Unicode NFKC, case folding, units in brackets or
parentheses removed, whitespace collapsed). Unmatched series are listed; an extracted series without a
true counterpart is *spurious* and counts against precision. Nearest neighbours come from
``scipy.spatial.cKDTree``, so a series of n points costs O(n log n) rather than O(n²).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, Field
from scipy.spatial import cKDTree

from scijudge.errors import InputError
from scijudge.materials.plots import Axis, PlotData, Series, parse_plot_data

WORST_DISTANCE = math.sqrt(2.0)
"""The capped worst nearest-neighbour distance (diagonal of the unit box); the value of an empty extraction."""

SeriesStatus = Literal["matched", "missing", "empty", "spurious"]

_BRACKETED = re.compile(r"\([^()]*\)|\[[^\[\]]*\]")


def normalize_series_name(name: str) -> str:
    """Canonical form of a series name for matching: NFKC, casefold, bracketed units dropped, spaces collapsed."""
    text = unicodedata.normalize("NFKC", name)
    stripped = text
    while True:
        reduced = _BRACKETED.sub(" ", stripped)
        if reduced == stripped:
            break
        stripped = reduced
    if stripped.strip():
        text = stripped
    return re.sub(r"[\s_]+", " ", text.casefold()).strip()


class SeriesScore(BaseModel):
    """Distances for one series pair (or one unmatched series) in axis-normalised units."""

    figure: str = ""
    truth_name: str | None = None
    extracted_name: str | None = None
    status: SeriesStatus
    n_truth: int = 0
    n_extracted: int = 0
    axis_mismatch: bool = Field(default=False, description="Extracted series claims the other y axis.")
    precision_rmse: float
    precision_mae: float
    recall_rmse: float
    recall_mae: float
    symmetric_rmse: float
    symmetric_mae: float
    score: float = Field(description="1 - symmetric_rmse / sqrt(2): 1 perfect, 0 worst.")


class FigureScore(BaseModel):
    """All series of one figure plus figure-level means (precision over extracted, recall over true series)."""

    figure: str = ""
    series: list[SeriesScore]
    unmatched_truth: list[str] = Field(default_factory=list)
    unmatched_extracted: list[str] = Field(default_factory=list)
    precision_rmse: float
    precision_mae: float
    recall_rmse: float
    recall_mae: float
    symmetric_rmse: float
    symmetric_mae: float
    score: float
    worst: float = WORST_DISTANCE
    capped: bool = Field(default=True, description="Distances capped at sqrt(2) (False in source-compatible mode).")
    source_rmse: float | None = Field(default=None, description="LeMaterial's figure RMSE (only with cap=False).")
    source_mae: float | None = Field(default=None, description="LeMaterial's figure MAE (only with cap=False).")


def _worst_row(figure: str, status: SeriesStatus, truth: Series | None, extracted: Series | None) -> SeriesScore:
    w = WORST_DISTANCE
    return SeriesScore(
        figure=figure, status=status,
        truth_name=truth.name if truth else None, extracted_name=extracted.name if extracted else None,
        n_truth=len(truth.points) if truth else 0, n_extracted=len(extracted.points) if extracted else 0,
        precision_rmse=w, precision_mae=w, recall_rmse=w, recall_mae=w, symmetric_rmse=w, symmetric_mae=w, score=0.0,
    )


def _transform(values: np.ndarray, scale: str) -> np.ndarray:
    return np.log10(values) if scale == "log" else values


def _axis_frame(values: np.ndarray) -> tuple[float, float]:
    """Offset and scale mapping the ground truth's range on one axis onto [0, 1]."""
    lo, hi = float(values.min()), float(values.max())
    span = hi - lo
    if span > 0:
        return lo, span
    # A constant axis has no range: fall back to the magnitude of the value (or 1 at zero).
    return lo, abs(lo) if lo != 0 else 1.0


def _nearest(query: np.ndarray, reference: np.ndarray, cap: bool = True) -> np.ndarray:
    """Distance from each query point to its nearest reference point, capped at the worst distance if asked."""
    distances, _ = cKDTree(reference).query(query, k=1)
    return np.minimum(distances, WORST_DISTANCE) if cap else np.asarray(distances, dtype=float)


def _source_compatible(extracted: PlotData, truth: PlotData) -> tuple[float | None, float | None]:
    """LeMaterial's figure RMSE and MAE, by its rule (see the module docstring); None without common series."""
    ex = {s.name: s.array() for s in extracted.series}
    tr = {s.name: s.array() for s in truth.series}
    common = sorted(set(ex) & set(tr))
    if not common:
        return None, None
    pooled = np.concatenate(list(tr.values()))
    x_span = float(pooled[:, 0].max() - pooled[:, 0].min()) or 1e-8
    y_span = float(pooled[:, 1].max() - pooled[:, 1].min()) or 1e-8
    rmses, maes = [], []
    for name in common:
        e, t = ex[name], tr[name]
        if not len(e):
            rmses.append(0.0)
            maes.append(0.0)
            continue
        scale = np.array([x_span, y_span])
        d = cKDTree(t / scale).query(e / scale, k=1)[0]
        rmses.append(_rmse(d))
        maes.append(float(np.mean(d)))
    return float(np.mean(rmses)), float(np.mean(maes))


def _rmse(d: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(d))))


def _check_scales(extracted: PlotData, truth: PlotData, source: str | Path | None) -> None:
    pairs: list[tuple[str, Axis, Axis | None]] = [
        ("x_axis", extracted.x_axis, truth.x_axis),
        ("y_axis", extracted.y_axis, truth.y_axis),
        ("y2_axis", extracted.y2_axis or Axis(), truth.y2_axis or truth.y_axis),
    ]
    for name, mine, theirs in pairs:
        if mine.scale is not None and theirs is not None and mine.scale != theirs.effective_scale:
            raise InputError(
                f"the extracted {name.replace('_', ' ')} is {mine.scale!r} but the ground truth's is "
                f"{theirs.effective_scale!r}; the two cannot be compared",
                file=source, field=f"{name}.scale",
            )


def _index_truth(truth: PlotData, source: str | Path | None) -> dict[str, int]:
    index: dict[str, int] = {}
    for i, s in enumerate(truth.series):
        key = normalize_series_name(s.name)
        if key in index:
            raise InputError(
                f"ground-truth series {s.name!r} and {truth.series[index[key]].name!r} have the same normalised "
                f"name {key!r}; rename one", file=source, field=f"series[{i}].name",
            )
        if not s.points:
            raise InputError(f"ground-truth series {s.name!r} has no points", file=source, field=f"series[{i}].points")
        index[key] = i
    return index


def score_figure(
    extracted: PlotData | None,
    truth: PlotData,
    *,
    extracted_source: str | Path | None = None,
    truth_source: str | Path | None = None,
    cap: bool = True,
) -> FigureScore:
    """Score one extracted figure against its ground truth (``extracted=None`` means nothing was extracted)."""
    if not truth.series:
        raise InputError("the ground truth has no series", file=truth_source, field="series")
    truth_index = _index_truth(truth, truth_source)
    figure = truth.figure or (extracted.figure if extracted else "")
    extracted = extracted or PlotData(series=[])
    _check_scales(extracted, truth, extracted_source)

    x_scale = truth.x_axis.effective_scale
    truth_arrays = {id(s): s.array() for s in truth.series}
    x0, xs = _axis_frame(_transform(np.concatenate(list(truth_arrays.values()))[:, 0], x_scale))
    frames: dict[str, tuple[float, float, float, float, str]] = {}
    for side in ("left", "right"):
        members = [s for s in truth.series if s.axis == side]
        if not members:
            continue
        y_scale = truth.axis_of(members[0]).effective_scale
        y0, ys = _axis_frame(_transform(np.concatenate([truth_arrays[id(s)] for s in members])[:, 1], y_scale))
        frames[side] = (x0, xs, y0, ys, y_scale)

    def normalised(series: Series, side: str, source: str | Path | None, where: str) -> np.ndarray:
        fx0, fxs, fy0, fys, y_scale = frames[side]  # the frame of the true series' y axis
        arr = truth_arrays[id(series)] if id(series) in truth_arrays else series.array()
        for col, scale, coord in ((0, x_scale, "x"), (1, y_scale, "y")):
            if scale == "log" and arr.size and (arr[:, col] <= 0).any():
                j = int(np.argmax(arr[:, col] <= 0))
                raise InputError(
                    f"series {series.name!r} has {coord} = {arr[j, col]:g} on a logarithmic axis",
                    file=source, field=f"{where}.points[{j}].{coord}",
                )
        out = np.empty_like(arr)
        out[:, 0] = (_transform(arr[:, 0], x_scale) - fx0) / fxs
        out[:, 1] = (_transform(arr[:, 1], y_scale) - fy0) / fys
        return out

    extracted_by_key: dict[str, int] = {}
    spurious: list[int] = []
    for j, s in enumerate(extracted.series):
        key = normalize_series_name(s.name)
        if key in truth_index and key not in extracted_by_key:
            extracted_by_key[key] = j
        else:  # no true counterpart, or a duplicate name: the first one is matched, later ones are spurious
            spurious.append(j)

    rows: list[SeriesScore] = []
    for key, i in truth_index.items():
        t = truth.series[i]
        found = extracted_by_key.get(key)
        if found is None:
            rows.append(_worst_row(figure, "missing", t, None))
            continue
        j = found
        e = extracted.series[j]
        if not e.points:
            rows.append(_worst_row(figure, "empty", t, e))
            continue
        tn = normalised(t, t.axis, truth_source, f"series[{i}]")
        en = normalised(e, t.axis, extracted_source, f"series[{j}]")
        d_p, d_r = _nearest(en, tn, cap), _nearest(tn, en, cap)
        pooled = np.concatenate([d_p, d_r])
        sym_rmse = _rmse(pooled)
        rows.append(SeriesScore(
            figure=figure, status="matched", truth_name=t.name, extracted_name=e.name,
            n_truth=len(tn), n_extracted=len(en), axis_mismatch=e.axis != t.axis,
            precision_rmse=_rmse(d_p), precision_mae=float(d_p.mean()),
            recall_rmse=_rmse(d_r), recall_mae=float(d_r.mean()),
            symmetric_rmse=sym_rmse, symmetric_mae=float(pooled.mean()),
            score=max(0.0, 1.0 - sym_rmse / WORST_DISTANCE),
        ))
    for j in spurious:
        rows.append(_worst_row(figure, "spurious", None, extracted.series[j]))

    def mean_of(attr: str, selected: Sequence[SeriesScore]) -> float:
        return float(np.mean([getattr(r, attr) for r in selected])) if selected else WORST_DISTANCE

    with_extracted = [r for r in rows if r.status in ("matched", "empty", "spurious")]
    with_truth = [r for r in rows if r.status != "spurious"]
    symmetric_rmse = mean_of("symmetric_rmse", rows)
    source_rmse, source_mae = (None, None) if cap else _source_compatible(extracted, truth)
    return FigureScore(
        capped=cap, source_rmse=source_rmse, source_mae=source_mae,
        figure=figure,
        series=rows,
        unmatched_truth=[r.truth_name for r in rows if r.status == "missing" and r.truth_name is not None],
        unmatched_extracted=[r.extracted_name for r in rows if r.status == "spurious" and r.extracted_name is not None],
        precision_rmse=mean_of("precision_rmse", with_extracted),
        precision_mae=mean_of("precision_mae", with_extracted),
        recall_rmse=mean_of("recall_rmse", with_truth),
        recall_mae=mean_of("recall_mae", with_truth),
        symmetric_rmse=symmetric_rmse,
        symmetric_mae=mean_of("symmetric_mae", rows),
        score=max(0.0, 1.0 - symmetric_rmse / WORST_DISTANCE),
    )


def _pair_figures(
    extracted: list[PlotData], truth: list[PlotData], extracted_source: str | Path | None
) -> list[tuple[PlotData | None, PlotData]]:
    """Pair figures by normalised figure id when every figure has a unique id, else by position."""
    def keys(figs: list[PlotData]) -> list[str]:
        return [normalize_series_name(f.figure) if f.figure else "" for f in figs]

    tk, ek = keys(truth), keys(extracted)
    if all(tk) and len(set(tk)) == len(tk) and all(ek) and len(set(ek)) == len(ek):
        by_key = dict(zip(ek, extracted, strict=True))
        return [(by_key.get(k), t) for k, t in zip(tk, truth, strict=True)]
    if extracted and len(extracted) != len(truth):
        raise InputError(
            f"{len(extracted)} extracted figures but {len(truth)} ground-truth figures, and the figures lack "
            "unique 'figure' ids to pair them by", file=extracted_source, field="figure",
        )
    return [(extracted[i] if extracted else None, t) for i, t in enumerate(truth)]


def figure_metric(
    extracted: Any,
    truth: Any,
    *,
    extracted_source: str | Path | None = None,
    truth_source: str | Path | None = None,
    cap: bool = True,
) -> list[FigureScore]:
    """Score extracted plot data (JSON text, dicts or PlotData; one figure or several) against ground truth."""
    ex = [] if extracted is None else parse_plot_data(extracted, source=extracted_source, field="plot_data")
    tr = parse_plot_data(truth, source=truth_source, field="plot_data")
    return [
        score_figure(e, t, extracted_source=extracted_source, truth_source=truth_source, cap=cap)
        for e, t in _pair_figures(ex, tr, extracted_source)
    ]


def figure_scores_frame(scores: Sequence[FigureScore]) -> Any:
    """One row per series (all figures) as a pandas DataFrame."""
    import pandas as pd

    return pd.DataFrame([row.model_dump() for fig in scores for row in fig.series])
