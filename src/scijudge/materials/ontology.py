"""The general synthesis ontology: a typed synthesis procedure as extracted from a materials paper.

Field names follow the public JSON of LeMaterial's annotation folders (``annotations/<paper>/result*.json``)
so those files validate as they are. Every detail a paper may leave out is optional and may be ``null``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from scijudge.errors import InputError
from scijudge.materials._parse import load_json, validation_to_input_error

EXTRACTION_FAILED_MARKER = "Extraction failed"
"""Text LeMaterial writes into ``notes`` when the extractor produced nothing usable."""

SYNTHESIS_METHODS: tuple[str, ...] = (
    "PVD", "CVD", "arc discharge", "ball milling", "spray pyrolysis", "electrospinning", "sol-gel", "hydrothermal",
    "solvothermal", "precipitation", "coprecipitation", "combustion", "microwave-assisted", "sonochemical",
    "template-directed", "solid-state", "flux growth", "float zone & Bridgman", "arc melting & induction melting",
    "spark plasma sintering", "electrochemical deposition", "chemical bath deposition", "liquid-phase epitaxy",
    "self-assembly", "atomic layer deposition", "molecular beam epitaxy", "pulsed laser deposition",
    "ion implantation", "lithographic patterning", "wet impregnation", "incipient wetness impregnation",
    "mechanical mixing", "solution-based", "mechanochemical", "other",
)
"""LeMaterial's allowed synthesis methods (its general ontology); anything else is read as "other"."""

MATERIAL_TYPES: tuple[str, ...] = (
    "metals & alloys", "ceramics & glasses", "polymers & soft matter", "composites", "semiconductors & electronic",
    "nanomaterials", "two-dimensional materials", "framework & porous materials", "biomaterials & biological",
    "liquid materials", "hybrid & organic-inorganic", "functional materials & catalysts", "energy & sustainability",
    "smart & responsive materials", "emerging & quantum materials", "other",
)
"""LeMaterial's allowed target-compound types; anything else is read as "other"."""


def _list_key(text: str) -> str:
    """Comparison key: case, spaces, hyphens and underscores ignored; 'and' read as '&'."""
    return re.sub(r"[^0-9a-z&]", "", f" {text.casefold()} ".replace(" and ", " & "))


_METHOD_KEYS = {_list_key(m): m for m in SYNTHESIS_METHODS}
_TYPE_KEYS = {_list_key(t): t for t in MATERIAL_TYPES}


def _from_list(value: Any, keys: dict[str, str]) -> tuple[str | None, str | None]:
    """(allowed value, the text as stated when it is not on the list) for a free-text or listed value."""
    text = _text_or_none(value)
    if text is None or not str(text).strip():
        return None, None
    found = keys.get(_list_key(str(text)))
    return (found, None) if found else ("other", str(text).strip())


_NO_TARGET = {"", "unknown", "n/a", "na", "none", "null", "-", "not specified", "not given"}


def _finite_or_none(value: float | None) -> float | None:
    if value is not None and not math.isfinite(value):
        raise ValueError("must be a finite number (NaN and infinity are not quantities)")
    return value


def _text_or_none(value: Any) -> Any:
    """Accept numbers and one-level dicts where the schema wants text (e.g. ``{"descriptive": "excess"}``)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return f"{value:g}"
    if isinstance(value, Mapping):
        parts = [str(v) for v in value.values() if v is not None and not isinstance(v, (Mapping, list))]
        return " ".join(parts) if parts else None
    return value


class _OntologyModel(BaseModel):
    """Base of the ontology models: unknown keys are ignored so that newer files still load."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class Material(_OntologyModel):
    """A chemical used in the synthesis, with the amount and purity when the paper gives them."""

    name: str = Field(description="Material name as written in the paper, e.g. 'cobalt nitrate hexahydrate'.")
    vendor: str | None = Field(default=None, description="Supplier, e.g. 'Sigma-Aldrich'; null if not stated.")
    amount: float | None = Field(default=None, description="Numeric amount without unit; null if not stated.")
    unit: str | None = Field(default=None, description="Unit of the amount: 'g', 'mmol', 'mL', 'mol%', 'excess'...")
    purity: str | None = Field(default=None, description="Purity or grade, e.g. '99.9%', 'analytical grade'.")

    @field_validator("amount")
    @classmethod
    def _finite(cls, value: float | None) -> float | None:
        return _finite_or_none(value)

    @field_validator("vendor", "unit", "purity", mode="before")
    @classmethod
    def _as_text(cls, value: Any) -> Any:
        return _text_or_none(value)


class Equipment(_OntologyModel):
    """An instrument or vessel, with its vendor and operating settings when stated."""

    name: str = Field(description="Equipment name, e.g. 'Teflon-lined autoclave', 'tube furnace'.")
    instrument_vendor: str | None = Field(default=None, description="Manufacturer, if stated.")
    settings: str | None = Field(default=None, description="Operating settings, e.g. 'ramp 5 °C/min', '300 rpm'.")

    @field_validator("instrument_vendor", "settings", mode="before")
    @classmethod
    def _as_text(cls, value: Any) -> Any:
        return _text_or_none(value)


class Conditions(_OntologyModel):
    """Physical conditions of one step; each quantity carries its own unit field."""

    temperature: float | None = Field(default=None, description="Temperature value; null if not stated.")
    temp_unit: str | None = Field(default=None, description="'C', 'K' or 'F'.")
    duration: float | None = Field(default=None, description="Duration value; null if not stated.")
    time_unit: str | None = Field(default=None, description="'s', 'min', 'h', 'days'...")
    pressure: float | None = Field(default=None, description="Pressure value; null if not stated.")
    pressure_unit: str | None = Field(default=None, description="'Pa', 'MPa', 'bar', 'atm', 'torr'...")
    atmosphere: str | None = Field(default=None, description="Gas or environment: 'air', 'Ar', 'N2', 'vacuum'...")
    stirring: bool | None = Field(default=None, description="Whether the mixture is stirred.")
    stirring_speed: float | None = Field(default=None, description="Stirring speed in rpm.")
    ph: float | None = Field(default=None, description="pH of the solution.")

    @field_validator("temperature", "duration", "pressure", "stirring_speed", "ph")
    @classmethod
    def _finite(cls, value: float | None) -> float | None:
        return _finite_or_none(value)

    @field_validator("temp_unit", "time_unit", "pressure_unit", "atmosphere", mode="before")
    @classmethod
    def _as_text(cls, value: Any) -> Any:
        return _text_or_none(value)


class ProcessStep(_OntologyModel):
    """One ordered step of the procedure."""

    step_number: int = Field(description="Position of the step in the procedure, starting at 1.")
    action: str = Field(
        description="Main action: add, mix, heat, cool, reflux, age, filter, wash, dry, reduce, calcine, "
        "dissolve, precipitate, centrifuge, sonicate, anneal, ion exchange, or another verb."
    )
    description: str | None = Field(default=None, description="The step in words, close to the paper's text.")
    materials: list[Material] = Field(default_factory=list, description="Materials used in this step.")
    equipment: list[Equipment] = Field(default_factory=list, description="Equipment used in this step.")
    conditions: Conditions | None = Field(default=None, description="Conditions of this step.")
    safety_notes: str | None = Field(default=None, description="Safety remarks stated for this step.")

    @field_validator("materials", "equipment", mode="before")
    @classmethod
    def _null_is_empty(cls, value: Any) -> Any:
        return [] if value is None else value


class SynthesisOntology(_OntologyModel):
    """A complete synthesis procedure for one target material."""

    synthesis_id: str | None = Field(default=None, description="Identifier of the procedure within its paper.")
    target_compound: str = Field(description="The material being made, e.g. 'LiFePO4/C'.")
    target_compound_type: Literal[MATERIAL_TYPES] | None = Field(  # type: ignore[valid-type]
        default=None, description="Class of material, one of LeMaterial's types (e.g. 'ceramics & glasses') or 'other'.")
    synthesis_method: Literal[SYNTHESIS_METHODS] | None = Field(  # type: ignore[valid-type]
        default=None, description="Overall route, one of LeMaterial's methods (e.g. 'solid-state', 'sol-gel') or 'other'.")
    stated_compound_type: str | None = Field(
        default=None, description="The type as written when it is not on LeMaterial's list (then the type is 'other').")
    stated_synthesis_method: str | None = Field(
        default=None, description="The method as written when it is not on LeMaterial's list (then it is 'other').")
    starting_materials: list[Material] = Field(default_factory=list, description="All precursors and reagents.")
    steps: list[ProcessStep] = Field(default_factory=list, description="The ordered process steps.")
    equipment: list[Equipment] = Field(default_factory=list, description="Major equipment of the procedure.")
    notes: str | None = Field(default=None, description="Other remarks, variations or observations.")

    @field_validator("starting_materials", "steps", "equipment", mode="before")
    @classmethod
    def _null_is_empty(cls, value: Any) -> Any:
        return [] if value is None else value

    @model_validator(mode="before")
    @classmethod
    def _allowed_values(cls, data: Any) -> Any:
        """Map method and type onto LeMaterial's lists; an unlisted value becomes 'other', its text kept."""
        if not isinstance(data, Mapping):
            return data
        out = dict(data)
        for name, stated, keys in (("synthesis_method", "stated_synthesis_method", _METHOD_KEYS),
                                   ("target_compound_type", "stated_compound_type", _TYPE_KEYS)):
            if name in out:
                value, as_written = _from_list(out[name], keys)
                out[name] = value
                if as_written is not None and not out.get(stated):
                    out[stated] = as_written
        return out

    @property
    def extraction_failed(self) -> bool:
        """True when LeMaterial marked this entry as a failed extraction (nothing to judge)."""
        return EXTRACTION_FAILED_MARKER.lower() in (self.notes or "").lower()


_WRAPPER_KEYS = ("synthesis", "human_recipe")


def _unwrap(data: Any) -> Any:
    """Accept the LeMaterial wrapper ``{"material": ..., "synthesis": {...}}`` around an ontology."""
    if isinstance(data, Mapping) and "target_compound" not in data:
        for key in _WRAPPER_KEYS:
            inner = data.get(key)
            if isinstance(inner, Mapping):
                return inner
    return data


def parse_ontology(
    text_or_obj: Any,
    *,
    source: str | Path | None = None,
    field: str = "extracted_synthesis",
    line: int | None = None,
) -> SynthesisOntology:
    """Parse one synthesis ontology from JSON text, a dict or a model; errors name file, line and field.

    A LeMaterial result entry (``{"material", "synthesis", "evaluation"}``) is unwrapped to its synthesis.
    """
    if isinstance(text_or_obj, SynthesisOntology):
        return text_or_obj
    data = _unwrap(load_json(text_or_obj, source=source, field=field, line=line))
    if not isinstance(data, Mapping):
        raise InputError(
            f"expected a JSON object describing one synthesis, got {type(data).__name__}",
            file=source, line=line, field=field,
        )
    try:
        return SynthesisOntology.model_validate(data)
    except ValidationError as exc:
        raise validation_to_input_error(exc, source=source, field=field, line=line) from exc


def parse_syntheses(
    text_or_obj: Any,
    *,
    source: str | Path | None = None,
    field: str = "syntheses",
    line: int | None = None,
) -> list[SynthesisOntology]:
    """Parse a list of ontologies (or a single one, or ``{"syntheses": [...]}``); errors name the index."""
    data = load_json(text_or_obj, source=source, field=field, line=line)
    if isinstance(data, Mapping):
        listed = data.get("syntheses")
        data = listed if isinstance(listed, list) else [data]
    if not isinstance(data, list):
        raise InputError(
            f"expected a JSON list of syntheses, got {type(data).__name__}", file=source, line=line, field=field
        )
    return [parse_ontology(entry, source=source, field=f"{field}[{i}]", line=line) for i, entry in enumerate(data)]


def infer_target_material(ontology: Any) -> str | None:
    """The target material named by an ontology (its ``target_compound``), or None when it names none."""
    named_only = isinstance(ontology, Mapping) and "target_compound" not in ontology
    if named_only and isinstance(ontology.get("material"), str):
        named = ontology["material"].strip()
        if named.lower() not in _NO_TARGET:
            return named
    parsed = parse_ontology(ontology, field="extracted_synthesis")
    target = " ".join(parsed.target_compound.split())
    return None if target.lower() in _NO_TARGET else target


def is_extraction_failure(entry: Any) -> bool:
    """True for a LeMaterial entry whose synthesis notes say the extraction failed."""
    data = _unwrap(entry)
    if isinstance(data, SynthesisOntology):
        return data.extraction_failed
    if isinstance(data, Mapping):
        return EXTRACTION_FAILED_MARKER.lower() in str(data.get("notes") or "").lower()
    return False
