"""Writing imported records into a run store: the one place importer commands open a store."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scijudge.records import CURRENT_GROUP, Columns, JudgeResult, judgment_keys


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
    retired: int = 0  # rows of an earlier import of the same file (same SHA-256) this import did not rewrite
    earlier_paths: list[str] = field(default_factory=list)  # where that earlier import read the file


def import_records(path: str | Path, chunks: Iterable[Columns], *, imported_spec: str,
                   meta: Any = None, supersede: bool = False, sha256: str | None = None,
                   scales: Any = None) -> ImportCounts:
    """Write record chunks (``Columns``; ``chunks_of`` makes them from dumps) into ``path`` in ONE
    transaction: whole or not at all (a bad file, Ctrl-C).

    A row that would make a judgment scijudge made (any spec hash other than ``imported_spec``) history is
    refused with its line, unless ``supersede``. ``meta()`` (called after the rows) is appended to the run's
    ``imports`` meta list. With ``sha256`` (the file's), the current rows of an earlier import of the same file
    that this import does not rewrite (written under an older item naming) become history, counted in
    ``retired``: a re-import never leaves two current copies of one judgment. ``scales`` (judge -> scale, or a
    callable giving them after the rows) are recorded in the run's ``scales`` meta, in the same transaction.
    """
    from scijudge.run import reimport
    from scijudge.run.store import Run

    counts = ImportCounts()
    pending = (chunk for chunk in chunks if chunk.n)
    first = next(pending, None)  # a file with no good row (or a bad file) creates no store
    if first is None:
        return counts
    created = not Path(path).exists()
    try:
        with Run(path) as run:
            run.claim_writer()  # not while a judging run (or another import) writes this store
            judged = run.model_endpoints(spec_hash_not=imported_spec)
            earlier = reimport.imported_from(run, imported_spec, sha256) if sha256 else {}
            counts.earlier_paths = sorted(set(earlier.values()))
            before = len(run)
            written_keys: set[str] = set()

            def checked() -> Iterator[Columns]:
                for chunk in itertools.chain([first], pending):
                    if judged:
                        _check_supersede(run, chunk, judged, imported_spec, supersede, counts)
                    if earlier:
                        written_keys.update(judgment_keys(*(chunk.column(c) for c in _KEY_FIELDS)))
                    yield chunk

            with run.transaction():
                counts.written = run.record_columns(checked())
                counts.replaced = counts.written - (len(run) - before)
                counts.retired = reimport.make_history(run, (k for k in earlier if k not in written_keys))
                if meta is not None:
                    record = meta() if callable(meta) else meta
                    if counts.earlier_paths:  # a re-import: say what it replaced
                        record = {**record, "reimport_of": counts.earlier_paths, "replaced": counts.replaced,
                                  "retired": counts.retired}
                    run.set_meta(imports=[*(run.meta().get("imports") or []), record])
                recorded = scales() if callable(scales) else scales
                if recorded:
                    run.set_meta(scales={**(run.meta().get("scales") or {}), **recorded})
    except BaseException:
        if created:  # an interrupted or refused import into a new store leaves no (empty) store behind
            _remove_new_store(Path(path))
        raise
    return counts


def _remove_new_store(path: Path) -> None:
    """Remove a store this import created (its file, WAL, shared memory and lock file), once it is closed."""
    for name in (path.name, path.name + "-wal", path.name + "-shm", path.name + ".lock"):
        try:
            (path.parent / name).unlink()
        except OSError:
            pass


def _check_supersede(run: Any, chunk: Columns, judged: set[tuple[str, str]], imported_spec: str, supersede: bool,
                     counts: ImportCounts) -> None:
    """Refuse (or with ``supersede`` count) rows that would make a judgment scijudge made history."""
    from scijudge.errors import InputError

    groups = zip(*(chunk.column(c) for c in CURRENT_GROUP))
    for n, group in enumerate(groups):
        if (group[_MODEL], group[_ENDPOINT]) not in judged:
            continue
        current = run.current_of(list(group))
        if current is None or current.spec_hash == imported_spec:
            continue
        if not supersede:
            result = chunk.column("result")[n] or {}
            raise InputError(
                f"item {group[0]!r}, judge {group[1]!r}, model {group[_MODEL]!r} was judged by scijudge in this "
                "store: importing would make that judgment history. Import into another --run, or pass "
                "--supersede", file=result.get("imported_from"), line=result.get("line"), field="model")
        counts.superseded += 1


def chunks_of(dumps: Iterable[dict[str, Any]], size: int = 5000) -> Iterator[Columns]:
    """Record dumps as ``Columns`` chunks of up to ``size``."""
    from scijudge.run.rows import chunks

    return (Columns.of(batch) for batch in chunks(dumps, size))


_MODEL, _ENDPOINT = CURRENT_GROUP.index("model"), CURRENT_GROUP.index("endpoint")
_KEY_FIELDS = ("item_id", "judge", "part", "spec_hash", "model", "endpoint", "input_hash", "decoding")
"""``judgment_key``'s fields, in its order."""
