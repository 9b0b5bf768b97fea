"""Strict JSON schema and answer parsing of the structured-output chain (pure: no DSPy, no network).

``strict_schema`` builds the ``{"judgment": <output>}`` schema in the strict form OpenAI-style providers
accept; ``parse_answer`` reads an answer text exactly as the chain does (code fences and chatter tolerated, a
missing wrapper key recovered, never evaluated) and raises ``InvalidAnswer`` with the outcome it counts as.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

import pydantic

from scijudge.records import Outcome
from scijudge.spec.signatures import OUTPUT_FIELD


class _Invalid(Exception):
    def __init__(self, outcome: Outcome, message: str) -> None:
        super().__init__(message)
        self.outcome = outcome


_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.IGNORECASE)


def _json_object(text: str) -> dict[str, Any]:
    """The first JSON object in the text (code fences and chatter around it tolerated); never evaluated."""
    stripped = _FENCE.sub("", text.strip())
    try:
        value = json.loads(stripped)
    except json.JSONDecodeError:
        value = None
        decoder = json.JSONDecoder()
        for start in (m.start() for m in re.finditer(r"\{", stripped)):
            try:
                value, _ = decoder.raw_decode(stripped, start)
                break
            except json.JSONDecodeError:
                continue
    if not isinstance(value, dict):
        raise _Invalid("parse_error", "the answer is not a JSON object")
    return value


@lru_cache(maxsize=256)
def _strict_schema_json(output_type: type[pydantic.BaseModel]) -> str:
    return json.dumps(_build_strict_schema(output_type))


def strict_schema(output_type: type[pydantic.BaseModel]) -> dict[str, Any]:
    """A JSON schema for ``{"judgment": <output>}`` in the strict form OpenAI-style providers accept (cached)."""
    schema: dict[str, Any] = json.loads(_strict_schema_json(output_type))
    return schema


def _build_strict_schema(output_type: type[pydantic.BaseModel]) -> dict[str, Any]:
    schema = output_type.model_json_schema()
    defs = schema.pop("$defs", {})
    defs[output_type.__name__] = schema
    root: dict[str, Any] = {
        "type": "object",
        "properties": {OUTPUT_FIELD: {"$ref": f"#/$defs/{output_type.__name__}"}},
        "required": [OUTPUT_FIELD],
        "additionalProperties": False,
        "$defs": defs,
    }

    def enforce(part: Any) -> None:
        if isinstance(part, dict):
            if "$ref" in part:  # strict providers reject keywords beside a $ref
                for key in [k for k in part if k != "$ref"]:
                    del part[key]
            if part.get("type") == "object" and "properties" in part:
                part["required"] = list(part["properties"])
                part["additionalProperties"] = False
            part.pop("default", None)
            part.pop("title", None)
            for value in part.values():
                enforce(value)
        elif isinstance(part, list):
            for value in part:
                enforce(value)

    enforce(root)
    return root


def response_format_for(strategy: str, output_type: type[pydantic.BaseModel]) -> dict[str, Any]:
    """The lm15 response_format a strategy asks for."""
    if strategy == "json_schema":
        return {"type": "json_schema", "name": "judgment", "schema": strict_schema(output_type), "strict": True}
    return {"type": "json_object"}


InvalidAnswer = _Invalid  # public name: ``parse_answer`` raises it with ``.outcome`` (parse_error / validation_error)


def parse_answer(text: str, signature: Any) -> tuple[Any, bool]:
    """Parse and validate an answer text for a judge signature exactly as the chain does: (value, recovered)."""
    return _parse(text, signature.output_fields[OUTPUT_FIELD].annotation)


def _parse(text: str, output_type: type[pydantic.BaseModel]) -> tuple[Any, bool]:
    data = _json_object(text)
    recovered = False
    if OUTPUT_FIELD in data:
        value = data[OUTPUT_FIELD]
        if isinstance(value, str):  # some models JSON-encode the inner object
            try:
                value = json.loads(value)
            except json.JSONDecodeError as exc:
                raise _Invalid("parse_error", f"'{OUTPUT_FIELD}' is a string, not an object") from exc
    else:
        value, recovered = data, True
    if value is None:
        raise _Invalid("validation_error", f"'{OUTPUT_FIELD}' is null")
    try:
        return output_type.model_validate(value), recovered
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise _Invalid("validation_error", f"{where}: {first['msg']}") from exc


def _drop_empty_optional(signature: Any, inputs: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """Leave optional inputs out of the prompt entirely when they are empty (no empty headings)."""
    drop = tuple(
        name for name, info in _input_fields(signature)
        if not info.is_required() and inputs.get(name) in (None, "")
    )
    if not drop:
        return signature, inputs
    return _without(signature, drop), {k: v for k, v in inputs.items() if k not in drop}


@lru_cache(maxsize=512)
def _input_fields(signature: Any) -> tuple[tuple[str, Any], ...]:
    """A signature's input fields in order (DSPy builds the mapping anew on every ``input_fields`` read; a signature
    class never changes its fields: ``delete``, ``with_instructions`` and the like make a new class)."""
    return tuple(signature.input_fields.items())


@lru_cache(maxsize=512)
def _output_type(signature: Any) -> Any:
    return signature.output_fields[OUTPUT_FIELD].annotation


@lru_cache(maxsize=512)
def _without(signature: Any, names: tuple[str, ...]) -> Any:
    """Signature minus some inputs; cached because building a signature class costs ~1 ms."""
    for name in names:
        signature = signature.delete(name)
    return signature
