"""Where shipped data lives: ``scijudge/_data`` in an installed wheel, the top level of a source checkout."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def shipped_paths(relative: str) -> list[Path]:
    """Existing locations of a shipped file or folder (``signatures``, ``datasets/...``), wheel first."""
    candidates = (_PACKAGE / "_data" / relative, _PACKAGE.parent.parent / relative)
    return [c for c in candidates if c.exists()]


def shipped_path(relative: str) -> Path | None:
    """The first existing location of a shipped file or folder, or None."""
    found = shipped_paths(relative)
    return found[0] if found else None


def bundled_path(relative: str) -> Path:
    """A file or folder shipped with scijudge (``datasets/yescieval_example/items.jsonl``, ``signatures``), found
    through the installed package (``scijudge/_data``) or a source checkout; an error naming it when absent."""
    found = shipped_path(relative)
    if found is None:
        from scijudge.errors import InputError

        raise InputError("not shipped with this installation of scijudge", file=relative)
    return found
