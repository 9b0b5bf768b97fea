"""The two consoles the CLI prints to: ``out`` for results (stdout), ``console`` for messages (stderr)."""

from __future__ import annotations

from rich.console import Console

console = Console(stderr=True)
out = Console()


# What the library's messages say to a Python caller, and what the command line calls it (the library speaks of its
# keyword arguments; a command's user never typed one). tests/commands/test_cli_words.py reaches each message.
_CLI_WORDS: tuple[tuple[str, str], ...] = (
    ("pass the right scale (scale=(lo, hi, step) or (lo, hi, step, 'continuous') / --scale)",
     "pass the right --scale lo,hi,step (or lo,hi,step,continuous)"),
    ("pass scale= (--scale) or the spec (specs=)", "pass --scale or the spec file (--spec)"),
    ("or pass scale=", "or pass --scale"),
)


def in_cli_words(text: str) -> str:
    """A library message as the command line says it: keyword arguments named as the options a user types."""
    for python, cli in _CLI_WORDS:
        text = text.replace(python, cli)
    return text
