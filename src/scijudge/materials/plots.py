"""Plot data (named series of (x, y) points on described axes) and the synthesis-to-series linking output.

Accepted plot JSON shapes, all normalised to :class:`PlotData`:

* this project's own: ``{"figure", "x_axis": {"label", "unit", "scale"}, "y_axis": {...}, "y2_axis": {...},
  "series": [{"name", "axis": "left"|"right", "points": [[x, y], ...]}]}``;
* LeMaterial's extracted plot data: ``{"metadata": {"x_axis_label", "x_axis_unit", "left_y_axis_label", ...,
  "is_dual_axis"}, "data_series": [{"name", "axis", "points": [{"x", "y"}, ...]}]}``;
* LeMaterial's digitised ground truth: ``{"subplots": [{"x_label", "y_label", "coordinates": {name: [[x, y]]}}]}``
  (one :class:`PlotData` per subplot);
* LeMaterial's line-plot layout: ``{"name_to_coordinates": {name: [[x, y]]}, "title", "x_axis_label", ...}``;
* a bare ``{name: points}`` mapping (every value a point list).

A figure object with none of these (for instance a typo such as ``"seris"``) is an error naming the file,
never read as a figure with zero series.

Points may be ``[x, y]`` pairs, ``{"x", "y"}`` objects, or ``{"x": [...], "y": [...]}`` columns.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from scijudge.errors import InputError
from scijudge.materials._parse import load_json, validation_to_input_error

AxisScale = Literal["linear", "log"]
AxisSide = Literal["left", "right"]


class Axis(BaseModel):
    """One plot axis: its label, unit and scale (None = not stated, read as linear)."""

    model_config = ConfigDict(extra="ignore")

    label: str = Field(default="", description="Axis title, e.g. 'Cycle number'.")
    unit: str = Field(default="", description="Axis unit, e.g. 'mAh/g'.")
    scale: AxisScale | None = Field(default=None, description="'linear' or 'log'; null when not stated.")

    @field_validator("label", "unit", mode="before")
    @classmethod
    def _null_is_empty(cls, value: Any) -> Any:
        return "" if value is None else value

    @field_validator("scale", mode="before")
    @classmethod
    def _read_scale(cls, value: Any) -> Any:
        if value is None or value == "":
            return None
        text = str(value).strip().lower()
        aliases = {"lin": "linear", "linear": "linear", "log": "log", "log10": "log", "logarithmic": "log"}
        if text not in aliases:
            raise ValueError(f"scale must be 'linear' or 'log', got {value!r}")
        return aliases[text]

    @property
    def effective_scale(self) -> AxisScale:
        """The scale used for computing: linear unless stated otherwise."""
        return self.scale or "linear"


def _points_from(value: Any) -> Any:
    """Normalise the accepted point layouts to a list of ``[x, y]`` pairs."""
    if isinstance(value, Mapping) and "x" in value and "y" in value:
        xs, ys = value["x"], value["y"]
        if not isinstance(xs, list) or not isinstance(ys, list):
            raise ValueError("column points need lists under 'x' and 'y'")
        if len(xs) != len(ys):
            raise ValueError(f"'x' has {len(xs)} values but 'y' has {len(ys)}")
        return [[x, y] for x, y in zip(xs, ys, strict=True)]
    if isinstance(value, list):
        if value and isinstance(value[0], (list, tuple)):
            try:  # fast path: a rectangular list of [x, y] pairs needs no per-point Python work
                if np.asarray(value, dtype=float).shape == (len(value), 2):
                    return value
            except (ValueError, TypeError):
                pass  # ragged or non-numeric: fall through to locate the bad point
        out = []
        for i, point in enumerate(value):
            if isinstance(point, Mapping):
                if "x" not in point or "y" not in point:
                    raise ValueError(f"points[{i}] needs both 'x' and 'y'")
                out.append([point["x"], point["y"]])
            elif isinstance(point, (list, tuple)) and len(point) == 2:
                out.append(list(point))
            else:
                raise ValueError(f"points[{i}] must be [x, y] or {{'x': .., 'y': ..}}, got {point!r}")
        return out
    return value


class Series(BaseModel):
    """A named data series; ``axis`` says which y axis it is read against on a dual-axis plot."""

    model_config = ConfigDict(extra="ignore")

    name: str = Field(description="Legend label of the series.")
    axis: AxisSide = Field(default="left", description="'left' or 'right' y axis.")
    points: list[tuple[float, float]] = Field(default_factory=list, description="The (x, y) points.")

    @field_validator("axis", mode="before")
    @classmethod
    def _read_axis(cls, value: Any) -> Any:
        if value is None or value == "":
            return "left"
        text = str(value).strip().lower()
        aliases = {"left": "left", "primary": "left", "y": "left", "y1": "left",
                   "right": "right", "secondary": "right", "y2": "right"}
        if text not in aliases:
            raise ValueError(f"axis must be 'left' or 'right', got {value!r}")
        return aliases[text]

    @field_validator("points", mode="before")
    @classmethod
    def _read_points(cls, value: Any) -> Any:
        return [] if value is None else _points_from(value)

    @field_validator("points")
    @classmethod
    def _finite_points(cls, points: list[tuple[float, float]]) -> list[tuple[float, float]]:
        arr = np.asarray(points, dtype=float).reshape(-1, 2)
        bad = ~np.isfinite(arr)
        if bad.any():
            i, col = (int(v) for v in np.argwhere(bad)[0])
            value = float(arr[i, col])
            raise ValueError(f"points[{i}].{'xy'[col]} is {value!r}; every point must be finite (no NaN/inf)")
        return points

    def array(self) -> np.ndarray:
        """The points as an ``(n, 2)`` float array."""
        return np.asarray(self.points, dtype=float).reshape(-1, 2)


def _from_lematerial_extracted(data: Mapping[str, Any]) -> dict[str, Any]:
    meta = data.get("metadata") or {}
    return {
        "figure": meta.get("subplot_label") or meta.get("plot_title") or data.get("figure") or "",
        "x_axis": {"label": meta.get("x_axis_label"), "unit": meta.get("x_axis_unit")},
        "y_axis": {"label": meta.get("left_y_axis_label"), "unit": meta.get("left_y_axis_unit")},
        "y2_axis": (
            {"label": meta.get("right_y_axis_label"), "unit": meta.get("right_y_axis_unit")}
            if meta.get("is_dual_axis") else None
        ),
        "series": data.get("data_series") or [],
    }


def _from_coordinates(sub: Mapping[str, Any], figure: str) -> dict[str, Any]:
    coords = sub.get("coordinates") or {}
    if not isinstance(coords, Mapping):
        raise ValueError("'coordinates' must map series names to point lists")
    return {
        "figure": sub.get("figure") or figure,
        "x_axis": {"label": sub.get("x_label"), "scale": sub.get("x_scale")},
        "y_axis": {"label": sub.get("y_label"), "scale": sub.get("y_scale")},
        "series": [{"name": name, "points": pts} for name, pts in coords.items()],
    }


def _from_name_to_coordinates(data: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "figure": data.get("figure") or data.get("title") or "",
        "x_axis": {"label": data.get("x_axis_label"), "unit": data.get("x_axis_unit")},
        "y_axis": {"label": data.get("y_left_axis_label"), "unit": data.get("y_left_axis_unit")},
        "series": [{"name": str(name), "points": pts} for name, pts in data["name_to_coordinates"].items()],
    }


def _looks_like_points(value: Any) -> bool:
    """True for a point list (``[[x, y], ...]`` or ``[{"x", "y"}, ...]``) or ``{"x": [...], "y": [...]}`` columns."""
    if isinstance(value, Mapping):
        return set(value) == {"x", "y"} and isinstance(value["x"], list) and isinstance(value["y"], list)
    if not isinstance(value, list):
        return False
    return all(
        (isinstance(p, (list, tuple)) and len(p) == 2) or (isinstance(p, Mapping) and "x" in p and "y" in p)
        for p in value
    )


SERIES_KEYS = ("series", "data_series", "coordinates", "name_to_coordinates")
"""Keys under which a figure object carries its series (a bare ``{name: points}`` mapping needs none)."""


def _is_name_to_points(data: Mapping[str, Any]) -> bool:
    """A bare ``{name: points}`` mapping; at least one list must hold points, so ``{"seris": []}`` is no figure."""
    values = list(data.values())
    return (all(isinstance(k, str) for k in data) and all(_looks_like_points(v) for v in values)
            and any(len(v) for v in values))


class PlotData(BaseModel):
    """One figure (or subplot): its axes and its named series."""

    model_config = ConfigDict(extra="ignore")

    figure: str = Field(default="", description="Figure reference, e.g. 'Fig. 3b'.")
    x_axis: Axis = Field(default_factory=Axis)
    y_axis: Axis = Field(default_factory=Axis)
    y2_axis: Axis | None = Field(default=None, description="Right-hand y axis of a dual-axis plot.")
    series: list[Series] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _accept_public_shapes(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        if "data_series" in data and "series" not in data:
            return _from_lematerial_extracted(data)
        if "coordinates" in data and "series" not in data:
            return _from_coordinates(data, str(data.get("figure") or ""))
        if isinstance(data.get("name_to_coordinates"), Mapping) and "series" not in data:
            return _from_name_to_coordinates(data)
        if not any(key in data for key in SERIES_KEYS) and _is_name_to_points(data):
            return {"series": [{"name": name, "points": pts} for name, pts in data.items()]}
        if not any(key in data for key in SERIES_KEYS):
            keys = ", ".join(repr(k) for k in list(data)[:6]) or "none"
            raise ValueError(
                "no recognisable series: expected one of 'series', 'data_series', 'coordinates', "
                f"'name_to_coordinates' or a {{name: points}} mapping (keys found: {keys})"
            )
        return data

    @field_validator("series")
    @classmethod
    def _positive_on_log_axes(cls, series: list[Series], info: ValidationInfo) -> list[Series]:
        x_axis = info.data.get("x_axis") or Axis()
        y_axis = info.data.get("y_axis") or Axis()
        y2_axis = info.data.get("y2_axis") or y_axis
        for i, s in enumerate(series):
            y_of = y2_axis if s.axis == "right" else y_axis
            for coord, axis, col in (("x", x_axis, 0), ("y", y_of, 1)):
                if axis.effective_scale != "log":
                    continue
                for j, point in enumerate(s.points):
                    if point[col] <= 0:
                        raise ValueError(
                            f"series[{i}] ({s.name!r}) points[{j}].{coord} = {point[col]:g} is not positive, "
                            f"but the {coord} axis is logarithmic"
                        )
        return series

    def axis_of(self, series: Series) -> Axis:
        """The y axis a series is read against (the right axis falls back to the left one)."""
        if series.axis == "right" and self.y2_axis is not None:
            return self.y2_axis
        return self.y_axis


def parse_plot_data(
    text_or_obj: Any,
    *,
    source: str | Path | None = None,
    field: str = "plot_data",
    line: int | None = None,
) -> list[PlotData]:
    """Parse plot data (one figure, a list of figures, or a ground-truth file with subplots)."""
    data = load_json(text_or_obj, source=source, field=field, line=line)
    if isinstance(data, PlotData):
        return [data]
    if isinstance(data, Mapping) and isinstance(data.get("subplots"), list):
        figure = str(data.get("figure") or "")
        entries: list[Any] = []
        for k, sub in enumerate(data["subplots"]):
            if not isinstance(sub, Mapping):
                raise InputError("each subplot must be a JSON object", file=source, line=line,
                                 field=f"{field}.subplots[{k}]")
            entries.append({**sub, "figure": sub.get("figure") or (f"{figure}[{k}]" if figure else str(k))})
        prefix = f"{field}.subplots"
    elif isinstance(data, Mapping) and isinstance(data.get("figures"), list):
        entries, prefix = data["figures"], f"{field}.figures"
    elif isinstance(data, list):
        entries, prefix = data, field
    elif isinstance(data, Mapping):
        entries, prefix = [data], None
    else:
        raise InputError(f"expected a JSON object or list of figures, got {type(data).__name__}",
                         file=source, line=line, field=field)
    out = []
    for i, entry in enumerate(entries):
        where = f"{prefix}[{i}]" if prefix else field
        if isinstance(entry, PlotData):
            out.append(entry)
            continue
        try:
            out.append(PlotData.model_validate(entry))
        except ValidationError as exc:
            raise validation_to_input_error(exc, source=source, field=where, line=line) from exc
    return out


class SeriesRef(BaseModel):
    """A pointer to one plot series: the figure it is in and its legend name."""

    model_config = ConfigDict(extra="ignore")

    figure: str = Field(default="", description="Figure reference, e.g. 'Fig. 4a'.")
    series: str = Field(description="Legend name of the series.")

    @model_validator(mode="before")
    @classmethod
    def _accept_name(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"series": data}
        if isinstance(data, Mapping) and "series" not in data:
            for key in ("series_name", "name", "label"):
                if key in data:
                    return {**data, "series": data[key]}
        return data


class SynthesisLink(BaseModel):
    """One synthesis (by id or target material) and the plot series that show its performance."""

    model_config = ConfigDict(extra="ignore")

    synthesis: str = Field(description="Synthesis id or target material name.")
    series: list[SeriesRef] = Field(default_factory=list, description="Linked plot series.")
    note: str | None = Field(default=None, description="Why the link was made, if the linker said.")

    @model_validator(mode="before")
    @classmethod
    def _accept_aliases(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        out = dict(data)
        if "synthesis" not in out:
            for key in ("synthesis_id", "material", "target_compound", "material_name"):
                if isinstance(out.get(key), str):
                    out["synthesis"] = out[key]
                    break
        if "series" not in out:
            for key in ("plot_series", "linked_series", "links"):
                if key in out:
                    out["series"] = out[key]
                    break
        if isinstance(out.get("series"), (str, Mapping)):
            out["series"] = [out["series"]]
        if out.get("series") is None:
            out["series"] = []
        return out


class LinkingOutput(BaseModel):
    """The artefact the linking judge evaluates: each synthesis mapped to its performance series."""

    model_config = ConfigDict(extra="ignore")

    links: list[SynthesisLink] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _accept_list(cls, data: Any) -> Any:
        return {"links": data} if isinstance(data, list) else data


def parse_linking_output(
    text_or_obj: Any,
    *,
    source: str | Path | None = None,
    field: str = "linking_output",
    line: int | None = None,
) -> LinkingOutput:
    """Parse a linking output (``{"links": [...]}`` or a bare list of links); errors name the field."""
    if isinstance(text_or_obj, LinkingOutput):
        return text_or_obj
    data = load_json(text_or_obj, source=source, field=field, line=line)
    if not isinstance(data, (Mapping, list)):
        raise InputError(f"expected a JSON object or list of links, got {type(data).__name__}",
                         file=source, line=line, field=field)
    try:
        return LinkingOutput.model_validate(data)
    except ValidationError as exc:
        raise validation_to_input_error(exc, source=source, field=field, line=line) from exc
