"""Errors a user can cause, each naming where the problem is (file, line, field)."""

from __future__ import annotations

from typing import Any

from pathlib import Path


EXIT_DONE = 0
"""Exit codes of ``scijudge judge``: every planned judgment was made and stored."""
EXIT_BAD_INPUT = 2
"""Bad input (items, specs, options): nothing was judged that depends on it."""
EXIT_STOPPED = 3
"""The run stopped early on a run-level fault (endpoint unreachable, auth, model not found, rate limit over
the cap, a streak of transport failures) or another writer; what completed is stored, re-run to resume."""
EXIT_INCOMPLETE = 4
"""The run finished but some judgments got no answer (transport failures, not stored); re-run to retry them."""
EXIT_INTERRUPTED = 130
"""Stopped by Ctrl-C / SIGTERM; answers that arrived are stored, re-run to resume."""


class ScijudgeError(Exception):
    """Base class for every error scijudge raises on purpose; the CLI prints these without a traceback."""

    exit_code = EXIT_BAD_INPUT


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


class DamagedRow(InputError):
    """A stored row that cannot be read (``Run`` names every such row: ``run._damage``); ``detail``: what is wrong."""

    def __init__(self, message: str, *, file: str | Path, field: str, detail: str) -> None:
        super().__init__(message, file=file, field=field)
        self.detail = detail


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


def problem_message(entry: dict[str, Any]) -> str:
    """One pydantic error entry's message as a user reads it (the one wording every boundary uses)."""
    kind, message = entry["type"], str(entry["msg"])
    if kind == "missing":
        return "required field is missing"
    if kind == "extra_forbidden":
        return "unknown field"
    return message.removeprefix("Value error, ").removeprefix("Assertion failed, ")


def validation_problem(exc: object) -> tuple[str, tuple[str | int, ...], str]:
    """(kind, location, message) of a pydantic ValidationError's first entry, for boundaries that word some
    kinds themselves (a recipe lists the allowed settings); the rest use ``from_validation_error``."""
    first = exc.errors()[0]  # type: ignore[attr-defined]
    return first["type"], tuple(first["loc"]), problem_message(first)


def from_validation_error(exc: object, *, file: str | Path | None = None, line: int | None = None,
                          error: type[InputError] = InputError, field_prefix: str = "",
                          line_of: object = None) -> InputError:
    """The first pydantic ValidationError entry as one ``error`` naming file, line and field (the one copy).

    ``line_of(field)`` may map a field path to a line (TOML specs); ``field_prefix`` nests the field
    (``rubrics.2``) when the model validated only part of a record.
    """
    _, loc, message = validation_problem(exc)
    path = ".".join(str(p) for p in loc)
    field = ".".join(p for p in (field_prefix, path) if p) or None
    if line is None and callable(line_of) and field:
        line = line_of(field)
    return error(message, file=file, line=line, field=field)


class EndpointError(ModelError):
    """A run-level fault of the model's endpoint (unreachable, auth, model not found, rate limit over the cap,
    too many transport failures in a row): the run stops and nothing is stored for the judgments it hit."""

    exit_code = EXIT_STOPPED
    resume_helps = True  # False where the same command cannot get further until the user fixes something (no key)


class FatalModelError(EndpointError):
    """The model cannot be used at all (unreachable, key rejected, unknown model): no candidate can do better.
    A run-level fault like ``judge``'s: exit code 3 in every command."""


class BatchFault(EndpointError):
    """A batch provider fault (create, list, poll or download failed): the run stops early (exit 3); every
    answer collected before is stored and every recorded batch is kept for the re-run."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class ResultsUnavailable(BatchFault):
    """An ended batch whose result file could not be downloaded: the batch stays recorded, a re-run collects it."""


class YESciEvalMissing(ModelError):
    """yescieval is not installed or too old; the message says how to install it (one line)."""


class StoreWriteError(ScijudgeError):
    """The run store cannot be written (disk full, read-only file system): the run stops; every judgment
    committed before is kept, and a re-run resumes after it."""

    exit_code = EXIT_STOPPED


class TransportFailure(ScijudgeError):
    """One judgment got no answer (timeouts, server or connection errors after retries): not a judgment, so
    it is never stored; a re-run tries it again."""

    exit_code = EXIT_INCOMPLETE


class RunBusyError(ScijudgeError):
    """Another process is writing the run store."""

    exit_code = EXIT_STOPPED
