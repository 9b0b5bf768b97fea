"""Demonstrations in judge specs: the plain-data form stored in TOML and the typed form DSPy prompts with.

A spec stores each demo as ``{<input name>: text, ..., "judgment": {<output fields>}}`` (TOML has no
null, so empty values are left out). Loading turns the judgment back into the spec's typed output, so a
reloaded demo renders exactly like the one the optimizer chose.
"""

from __future__ import annotations

import json
from typing import Any

from scijudge.errors import SpecError, from_validation_error
from scijudge.spec.signatures import OUTPUT_FIELD
from scijudge.spec.judge_spec import JudgeSpec


def _plain(value: Any) -> Any:
    """JSON-ready value without None (TOML cannot hold null)."""
    from pydantic import BaseModel

    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value if v is not None]
    return value


def demo_to_spec(demo: Any, spec: JudgeSpec) -> dict[str, Any]:
    """One DSPy demo (Example or dict) as spec data: only the judge's inputs and its ``judgment``."""
    keys = [i.name for i in spec.inputs] + [OUTPUT_FIELD]
    out: dict[str, Any] = {}
    for key in keys:
        value = demo.get(key) if hasattr(demo, "get") else None
        if value is None:
            continue
        if key == OUTPUT_FIELD and isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                pass
        out[key] = _plain(value) if key == OUTPUT_FIELD else str(value)
    return out


def demos_from_spec(spec: JudgeSpec) -> list[Any]:
    """The spec's demos as DSPy Examples with a typed ``judgment`` (what ``predict.demos`` should hold)."""
    import dspy
    from pydantic import ValidationError

    if not spec.demos:
        return []
    output_type: Any = spec.output_type()
    known = {i.name for i in spec.inputs} | {OUTPUT_FIELD}
    demos = []
    for index, raw in enumerate(spec.demos):
        unknown = sorted(set(raw) - known)
        if unknown:
            raise SpecError(f"demo {index + 1} has field {unknown[0]!r}, which is not an input of this judge",
                            file=spec.source, field=f"demos[{index}].{unknown[0]}")
        values = dict(raw)
        if OUTPUT_FIELD in values and not isinstance(values[OUTPUT_FIELD], output_type):
            try:
                values[OUTPUT_FIELD] = output_type.model_validate(values[OUTPUT_FIELD])
            except ValidationError as exc:
                error = from_validation_error(exc, file=spec.source, error=SpecError,
                                              field_prefix=f"demos[{index}].{OUTPUT_FIELD}")
                raise SpecError(f"demo {index + 1}: {error.reason}", file=spec.source, field=error.field) from None
        demos.append(dspy.Example(**values))
    return demos

