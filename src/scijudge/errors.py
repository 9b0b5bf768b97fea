"""Errors a user can cause, each naming where the problem is (file, line, field)."""

from __future__ import annotations

from pathlib import Path


class ScijudgeError(Exception):
    """Base class for every error scijudge raises on purpose; the CLI prints these without a traceback."""


class InputError(ScijudgeError, ValueError):
    """Bad user input, located by file, line and field so that it can be fixed."""

    def __init__(
        self,
        message: str,
        *,
        file: str | Path | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.file = str(file) if file is not None else None
        self.line = line
        self.field = field
        self.reason = message
        super().__init__(self._render())

    def _render(self) -> str:
        where = []
        if self.file:
            where.append(self.file + (f":{self.line}" if self.line is not None else ""))
        elif self.line is not None:
            where.append(f"line {self.line}")
        if self.field:
            where.append(f"field '{self.field}'")
        return (", ".join(where) + ": " if where else "") + self.reason


class SpecError(InputError):
    """A judge spec (TOML) that cannot be loaded or compiled."""


class UnknownJudgeError(ScijudgeError, KeyError):
    """A judge name that is neither shipped nor a path to a spec file."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else "unknown judge"


class ModelError(ScijudgeError, ValueError):
    """A model string or engine that cannot be built (unknown prefix, missing weights, missing extra)."""


class BudgetExceeded(ScijudgeError, RuntimeError):
    """An optimization or batch would exceed its configured LM-call or cost budget."""


def from_validation_error(exc: object, *, file: str | Path | None = None, line: int | None = None,
                          error: type[InputError] = InputError, field_prefix: str = "",
                          line_of: object = None) -> InputError:
    """The first pydantic ValidationError entry as one ``error`` naming file, line and field (the one copy).

    ``line_of(field)`` may map a field path to a line (TOML specs); ``field_prefix`` nests the field
    (``rubrics.2``) when the model validated only part of a record.
    """
    first = exc.errors()[0]  # type: ignore[attr-defined]
    field = ".".join(str(p) for p in first["loc"])
    field = ".".join(p for p in (field_prefix, field) if p) or None
    kind, message = first["type"], str(first["msg"])
    if kind == "missing":
        message = "required field is missing"
    elif kind == "extra_forbidden":
        message = "unknown field"
    message = message.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if line is None and callable(line_of) and field:
        line = line_of(field)
    return error(message, file=file, line=line, field=field)
