"""The two consoles the CLI prints to: ``out`` for results (stdout), ``console`` for messages (stderr)."""

from __future__ import annotations

from scijudge.report.console import plain_console

console = plain_console(stderr=True)
out = plain_console()

CONSOLE_SCRIPT = False  # set by ``scijudge.cli.main``: this process runs one command, then exits


def run_as_console_script() -> None:
    """Say that this process is the console script: it runs one command, then exits (``settle_after_imports``)."""
    global CONSOLE_SCRIPT
    CONSOLE_SCRIPT = True


def settle_after_imports() -> None:
    """In the console script, once a heavy command's libraries are imported, move every object alive now (the
    libraries' own, millions once pandas, scipy and scikit-learn are in) out of the collector's sight: each full
    collection of the run then scans only what the command itself made (0.4-0.9 s of a calibrate's CPU on the
    bundled jury panel). Those objects live until the process exits anyway. Nothing changes when a command is
    called in-process (tests, notebooks)."""
    if CONSOLE_SCRIPT:
        import gc

        gc.freeze()


def plural(n: int, word: str, many: str | None = None) -> str:
    """``n`` and the noun in agreement with it: "1 bad row", "2 bad rows" (``many``: an irregular plural)."""
    return f"{n} {word if n == 1 else (many or word + 's')}"


# What the library's messages say to a Python caller, and what the command line calls it (the library speaks of its
# keyword arguments; a command's user never typed one). tests/commands/test_cli_words.py reaches each message.
_CLI_WORDS: tuple[tuple[str, str], ...] = (
    ("pass the right scale (scale=(lo, hi, step) or (lo, hi, step, 'continuous') / --scale)",
     "pass the right --scale lo,hi,step (or lo,hi,step,continuous)"),
    ("pass scale= (--scale) or the spec (specs=)", "pass --scale or the spec file (--spec)"),
    ("or pass scale=", "or pass --scale"),
    ("allow extra labels (allow_extra_labels=True)", "pass --allow-extra-labels to leave them out"),
)


def in_cli_words(text: str) -> str:
    """A library message as the command line says it: keyword arguments named as the options a user types."""
    for python, cli in _CLI_WORDS:
        text = text.replace(python, cli)
    return text
