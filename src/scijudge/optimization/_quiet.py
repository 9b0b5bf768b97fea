"""Quiet optimizations: third-party logs, warnings, prints and progress bars go to a log file, not the terminal.

DSPy's optimizers log every trial, warn about inputs outside the signature and draw tqdm bars; litellm and
optuna add their own lines. A quiet run sends all of that to ``<out>/optimize.log`` so the terminal shows
only scijudge's result (and errors, which the CLI prints as one line).
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator
from pathlib import Path

NOISY_LOGGERS = ("dspy", "LiteLLM", "litellm", "optuna", "gepa", "httpx", "httpcore")


@contextlib.contextmanager
def quiet_to(log_path: Path | None) -> Iterator[None]:
    """Within the block, route logging of ``NOISY_LOGGERS``, warnings, stdout and stderr to ``log_path``."""
    if log_path is None:
        yield
        return
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "a", encoding="utf-8") as stream:
        handler = logging.StreamHandler(stream)
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
        saved = []
        for name in NOISY_LOGGERS:
            logger = logging.getLogger(name)
            saved.append((logger, list(logger.handlers), logger.propagate))
            logger.handlers = [handler]
            logger.propagate = False

        def to_log(message, category, filename, lineno, file=None, line=None):
            stream.write(warnings.formatwarning(message, category, filename, lineno, line))

        try:
            with warnings.catch_warnings(), contextlib.redirect_stdout(stream), contextlib.redirect_stderr(stream):
                warnings.showwarning = to_log
                yield
        finally:
            for logger, handlers, propagate in saved:
                logger.handlers = handlers
                logger.propagate = propagate
