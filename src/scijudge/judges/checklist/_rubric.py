"""A checklist item's rubric as the judge reads it: validated criteria with ids, and whole-rubric totals."""

from __future__ import annotations

import math
from typing import Any

from pydantic import ValidationError

from scijudge.data import Item
from scijudge.errors import InputError, from_validation_error
from scijudge.spec.rubric_criteria import Criterion


def rubric_entries(item: Item, *, any_axis: bool = True) -> list[dict[str, Any]]:
    """The item's criteria from ``meta["rubrics"]``, each with an ``id``; bad entries name the item."""
    file, line = item.origin
    rubrics = item.meta.get("rubrics")
    if not isinstance(rubrics, list) or not rubrics:
        raise InputError(f"item {item.id!r} has no rubric: the checklist judge needs meta.rubrics "
                         "(load tasks and reports with load_checklist_items)", file=file, line=line,
                         field="meta.rubrics")
    entries: list[dict[str, Any]] = []
    seen: set[str] = set()
    for index, raw in enumerate(rubrics):
        try:
            criterion = Criterion.model_validate(raw, context={"any_axis": any_axis})
        except ValidationError as exc:
            raise from_validation_error(exc, file=file, line=line, field_prefix=f"meta.rubrics.{index}") from None
        entry = criterion.as_meta()
        if isinstance(raw, dict) and isinstance(raw.get("id"), str) and raw["id"]:
            entry["id"] = raw["id"]
        if entry["id"] in seen:
            raise InputError(f"item {item.id!r}: duplicated criterion id {entry['id']!r}", file=file, line=line,
                             field=f"meta.rubrics.{index}")
        seen.add(entry["id"])
        entries.append(entry)
    return entries


def rubric_summary(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts and weight totals of a whole rubric, overall and per axis (what compliance needs for criteria
    that have no row in the run store)."""
    def totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
        return {"n": len(rows),
                "positive_weight": math.fsum(r["weight"] for r in rows if r["weight"] > 0),
                "negative_weight": math.fsum(r["weight"] for r in rows if r["weight"] < 0)}

    axes = sorted({e["axis"] for e in entries})
    return {**totals(entries), "axes": {a: totals([e for e in entries if e["axis"] == a]) for a in axes}}



TASK_FACETS: tuple[str, ...] = ("domain", "conceptual_breadth", "logical_nesting", "exploration")
"""A ResearchRubrics task's domain and its three complexity dimensions, carried into every judgment's result."""


def task_facets(item: Item) -> dict[str, str]:
    """The task's domain and complexity labels found in the item's meta (only those present, as text)."""
    return {name: str(item.meta[name]) for name in TASK_FACETS if item.meta.get(name) not in (None, "")}
