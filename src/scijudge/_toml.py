"""Read a TOML file for a spec or recipe, with errors that name the file and the line."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from scijudge.errors import InputError


def toml_error_line(exc: tomllib.TOMLDecodeError) -> int | None:
    """The line of a TOML syntax error (an attribute from Python 3.14, in the message before)."""
    line = getattr(exc, "lineno", None)
    if line is None:
        found = re.search(r"at line (\d+)", str(exc))
        line = int(found.group(1)) if found else None
    return line


def read_toml(path: str | Path, *, what: str, error: type[InputError] = InputError) -> tuple[str, dict[str, Any]]:
    """The file's text and parsed table; unreadable, non-UTF-8 or malformed files raise ``error``."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{what} is not UTF-8 text ({exc.reason} at byte {exc.start})", file=path) from exc
    except OSError as exc:
        raise error(f"cannot read {what}: {exc.strerror or exc}", file=path) from exc
    from scijudge._bulk import collector_paused

    try:
        with collector_paused():  # no collection deep in the parser's recursion (see collector_paused)
            return text, tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"malformed TOML: {exc}", file=path, line=toml_error_line(exc)) from exc
    except RecursionError:
        raise error(f"{what} is nested too deeply to read", file=path) from None
