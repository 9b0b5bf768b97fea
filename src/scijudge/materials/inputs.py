"""Check and complete the inputs of the two materials judges before any LM call.

A judge call on a truncated paper or a broken JSON extraction wastes tokens and yields a meaningless
score, so these checks fail early with an error naming the file, line and field.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from scijudge.errors import InputError
from scijudge.materials.ontology import infer_target_material, parse_ontology, parse_syntheses
from scijudge.materials.plots import parse_linking_output, parse_plot_data

MIN_SOURCE_CHARS = 50
"""Shortest source text (after trimming) a materials judge accepts: LeMaterial's own limit.

Anything shorter than about one sentence is nearly always a truncated file or the wrong field. The limit is
the source method's (50 characters), so every paper it judges is judged here too.
"""

OLD_INPUT_NAMES = {"extracted_ontology_json": "extracted_synthesis"}
"""Earlier names of the synthesis judge's inputs, still accepted (the judge's spec lists them as aliases)."""


def check_source_text(
    text: Any,
    *,
    field: str = "source_text",
    source: str | Path | None = None,
    line: int | None = None,
    min_chars: int = MIN_SOURCE_CHARS,
) -> str:
    """Return the source text if it is a string of at least ``min_chars`` characters; raise otherwise."""
    if not isinstance(text, str):
        raise InputError(f"must be text, got {type(text).__name__}", file=source, line=line, field=field)
    length = len(text.strip())
    if length < min_chars:
        raise InputError(
            f"is {length} characters long; a materials judge needs at least {min_chars} characters of paper text",
            file=source, line=line, field=field,
        )
    return text


def _as_json_text(value: Any) -> str:
    """The value as JSON text for the prompt: text is kept verbatim, objects are serialised."""
    if isinstance(value, str):
        return value
    if hasattr(value, "model_dump"):
        value = value.model_dump(mode="json")
    return json.dumps(value, ensure_ascii=False)


def _require(item: Mapping[str, Any], name: str, source: str | Path | None, line: int | None) -> Any:
    if name not in item or item[name] is None:
        raise InputError("is missing", file=source, line=line, field=name)
    return item[name]


def prepare_synthesis_inputs(
    item: Mapping[str, Any], *, source: str | Path | None = None, line: int | None = None
) -> dict[str, str]:
    """Validate a synthesis-judge item and fill ``target_material`` from the ontology when absent."""
    text = check_source_text(_require(item, "source_text", source, line), source=source, line=line)
    if item.get("extracted_synthesis") is None and item.get("extracted_ontology_json") is not None:
        item = {**item, "extracted_synthesis": item["extracted_ontology_json"]}
    raw = _require(item, "extracted_synthesis", source, line)
    ontology = parse_ontology(raw, source=source, line=line, field="extracted_synthesis")
    target = item.get("target_material")
    if not (isinstance(target, str) and target.strip()):
        target = infer_target_material(raw if isinstance(raw, Mapping) else ontology) or ""
    return {"source_text": text, "extracted_synthesis": _as_json_text(raw), "target_material": target}


def prepare_linking_inputs(
    item: Mapping[str, Any], *, source: str | Path | None = None, line: int | None = None
) -> dict[str, str]:
    """Validate a linking-judge item: paper text length and the three JSON inputs."""
    text = check_source_text(_require(item, "paper_text", source, line), field="paper_text", source=source, line=line)
    syntheses = _require(item, "syntheses", source, line)
    plot_data = _require(item, "plot_data", source, line)
    linking = _require(item, "linking_output", source, line)
    parse_syntheses(syntheses, source=source, line=line, field="syntheses")
    parse_plot_data(plot_data, source=source, line=line, field="plot_data")
    parse_linking_output(linking, source=source, line=line, field="linking_output")
    return {
        "paper_text": text,
        "syntheses": _as_json_text(syntheses),
        "plot_data": _as_json_text(plot_data),
        "linking_output": _as_json_text(linking),
    }
