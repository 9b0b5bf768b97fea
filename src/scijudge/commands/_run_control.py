"""How a judging run stops: Ctrl-C/SIGTERM handling, the exit that abandons stuck requests, the resume line."""

from __future__ import annotations

import os
import sys

import typer

from scijudge.commands._console import console
from scijudge.errors import EXIT_INTERRUPTED


def exit_run(store, code: int) -> None:
    """Leave now: the store has every completed judgment committed; threads still waiting on a request are
    abandoned rather than joined."""
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        store.close()
    finally:
        if _still_requesting(_SETTLE_S):  # a request still in flight would hold the interpreter's exit: abandon it
            os._exit(code)
        raise typer.Exit(code)  # nothing left running: exit normally (and usable from CliRunner)


_SETTLE_S = 2.0  # idle pool threads told to stop end within milliseconds, a few tenths of a second on a busy machine


def _still_requesting(settle: float) -> bool:
    """Whether one of the runner's own request threads is still busy after ``settle`` seconds. A pool shut down
    without waiting leaves idle threads that end a moment later: they are waited for, so that a run that merely
    stopped (a missing key, a refused request) exits normally rather than through ``os._exit``, which would also
    end a process that runs the command in-process (a test runner, a notebook)."""
    import threading
    import time

    deadline = time.monotonic() + settle
    for thread in threading.enumerate():
        if thread.name.startswith("scijudge") and not thread.daemon:
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                return True
    return False


def resume_command() -> str:
    """The command line that resumes this run (credentials removed), for the user to copy."""
    import shlex

    return "scijudge " + " ".join(shlex.quote(a) for a in safe_argv())


class StopOnSignal:
    """First Ctrl-C/SIGTERM: stop sending and let requests in flight finish (grace); the second: quit at once."""

    def __init__(self, grace: float) -> None:
        import threading

        self.event = threading.Event()
        self.grace = grace
        self._previous: dict = {}

    def _handle(self, signum, frame) -> None:
        if self.event.is_set():  # one line, written straight to the terminal (no console lock in a handler)
            line = ("\nquit at once: answers still in flight are not stored; every judgment stored so far is kept; "
                    f"resume with: {resume_command()}\n")
            try:
                os.write(2, line.encode(errors="replace"))
            finally:
                os._exit(EXIT_INTERRUPTED)
        self.event.set()
        console.print(f"\nstopping: no new requests; waiting up to {self.grace:g} s for answers in flight "
                      "(press Ctrl-C again to quit at once)", highlight=False)

    def __enter__(self) -> StopOnSignal:
        import signal

        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        import signal

        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def safe_argv() -> list[str]:
    """The command line with every credential removed (values of --*key*/--*token* options, URL userinfo, ...)."""
    from scijudge.redaction import redact_argv

    return redact_argv(sys.argv[1:])
