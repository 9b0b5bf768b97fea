"""Writing imported records into a run store: the one place importer commands open a store."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scijudge.records import CURRENT_GROUP, JudgeResult


def write_records(path: str | Path, results: Iterable[JudgeResult], imports: dict[str, Any] | None = None) -> int:
    """Record every result (``Run.record_many``) and append ``imports`` to the run's ``imports`` meta list,
    all in one transaction."""
    from scijudge.run.store import Run

    with Run(path) as run, run.transaction():
        written = run.record_many(r.model_dump(mode="json") for r in results)
        if imports is not None:
            run.set_meta(imports=[*(run.meta().get("imports") or []), imports])
    return written


@dataclass
class ImportCounts:
    """What an import did to the store."""

    written: int = 0
    replaced: int = 0  # rows that replaced an earlier import's row under the same key
    superseded: int = 0  # judgments made by scijudge that an imported row made history (only with supersede)


def import_records(path: str | Path, dumps: Iterable[dict[str, Any]], *, imported_spec: str,
                   meta: Any = None, supersede: bool = False) -> ImportCounts:
    """Write record dumps into ``path`` in ONE transaction: whole or not at all (a bad file, Ctrl-C).

    A row that would make a judgment scijudge made (any spec hash other than ``imported_spec``) history is
    refused with its line, unless ``supersede``. ``meta()`` (called after the rows) is appended to the run's
    ``imports`` meta list.
    """
    from scijudge.errors import InputError
    from scijudge.run.store import Run

    counts = ImportCounts()
    rows = iter(dumps)
    first = next(rows, None)  # a file with no good row (or a bad file) creates no store
    if first is None:
        return counts
    rows = itertools.chain([first], rows)
    with Run(path) as run:
        run.claim_writer()  # not while a judging run (or another import) writes this store
        judged = run.model_endpoints(spec_hash_not=imported_spec)
        before = len(run)

        def checked() -> Iterator[dict[str, Any]]:
            for dump in rows:
                if (dump["model"], dump["endpoint"]) in judged:
                    current = run.current_of([dump[c] for c in CURRENT_GROUP])
                    if current is not None and current.spec_hash != imported_spec:
                        if not supersede:
                            line = (dump.get("result") or {}).get("line")
                            raise InputError(
                                f"item {dump['item_id']!r}, judge {dump['judge']!r}, model {dump['model']!r} was "
                                "judged by scijudge in this store: importing would make that judgment history. "
                                "Import into another --run, or pass --supersede", file=(dump.get("result") or {})
                                .get("imported_from"), line=line, field="model")
                        counts.superseded += 1
                yield dump

        with run.transaction():
            counts.written = run.record_many(checked())
            counts.replaced = counts.written - (len(run) - before)
            if meta is not None:
                record = meta() if callable(meta) else meta
                run.set_meta(imports=[*(run.meta().get("imports") or []), record])
    return counts
