"""The two consoles the CLI prints to: ``out`` for results (stdout), ``console`` for messages (stderr)."""

from __future__ import annotations

from rich.console import Console

console = Console(stderr=True)
out = Console()
