"""Shared parsing helpers for materials inputs: JSON loading and readable validation errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from scijudge.errors import InputError, problem_message

_MAX_LISTED_ERRORS = 5


def load_json(value: Any, *, source: str | Path | None, field: str, line: int | None = None) -> Any:
    """Return ``value`` decoded from JSON when it is text, unchanged otherwise; errors name the field."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(f"not UTF-8 text ({exc.reason})", file=source, line=line, field=field) from exc
    if not isinstance(value, str):
        return value
    text = value.strip()
    if not text:
        raise InputError("is empty; expected JSON", file=source, line=line, field=field)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno}, column {exc.colno} of the JSON"
        raise InputError(f"is not valid JSON: {exc.msg} ({where})", file=source, line=line, field=field) from exc


def dotted(loc: tuple[Any, ...]) -> str:
    """Render a pydantic error location as ``a.b[2].c``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def validation_to_input_error(
    exc: ValidationError, *, source: str | Path | None, field: str, line: int | None = None
) -> InputError:
    """Turn a pydantic ValidationError into an InputError naming the first failing field."""
    errors = exc.errors(include_url=False)
    first = errors[0]
    first_loc = dotted(tuple(first["loc"]))
    full_field = f"{field}.{first_loc}" if first_loc else field
    message = _message(first)
    others = []
    for err in errors[1:_MAX_LISTED_ERRORS]:
        loc = dotted(tuple(err["loc"]))
        others.append(f"{field}.{loc}: {_message(err)}" if loc else f"{field}: {_message(err)}")
    if others:
        message += "; also " + "; ".join(others)
    if len(errors) > _MAX_LISTED_ERRORS:
        message += f" (and {len(errors) - _MAX_LISTED_ERRORS} more)"
    return InputError(message, file=source, line=line, field=full_field)


def _message(err: Any) -> str:
    return problem_message(err)
