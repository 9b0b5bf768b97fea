"""Checks the CLI safety tests share: a folder's bytes before and after, and an error that is one line."""

from __future__ import annotations

import hashlib
from pathlib import Path


def digest(folder: Path) -> dict[str, str]:
    """Each plain file of ``folder`` by name, with its sha256 (what "no input changed" compares)."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def one_line_error(result, *needles: str) -> None:
    """A CliRunner result that exited 2 with one ``error:`` line holding every needle, and no traceback."""
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    text = result.output.strip()
    assert text.startswith("error: ") and "\n" not in text and "Traceback" not in text, text
    for needle in needles:
        assert needle in text, text
