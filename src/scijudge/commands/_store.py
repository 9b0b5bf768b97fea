"""Writing imported records into a run store: the one place importer commands open a store."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from scijudge.records import JudgeResult


def write_records(path: str | Path, results: Iterable[JudgeResult], imports: dict[str, Any] | None = None) -> int:
    """Record every result through ``Run.record`` and append ``imports`` to the run's ``imports`` meta list."""
    from scijudge.run.store import Run

    written = 0
    with Run(path) as run:
        for result in results:
            run.record(result)
            written += 1
        if imports is not None:
            history = run.meta().get("imports") or []
            run.set_meta(imports=[*history, imports])
    return written
