"""The one way the CLI and the terminal reports make a rich console (light: no pandas, so ``--help`` stays fast)."""

from __future__ import annotations

from typing import Any


def plain_console(**options: Any) -> Any:
    """A rich console that prints text as it is: no ``:name:`` emoji codes, so a rationale's ":x:" stays ":x:". Data
    put into markup strings is still escaped where it is printed (``rich.markup.escape``) or passed as ``Text``."""
    from rich.console import Console

    return Console(emoji=False, **options)
