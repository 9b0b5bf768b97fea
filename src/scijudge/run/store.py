"""The run store: a SQLite file where every judgment is written the moment it completes.

WAL journaling with a commit per judgment means a process killed with SIGKILL loses nothing that
completed, and a re-run reads the completed keys and skips them. A newer judgment of the same
(item, judge, part, model, endpoint) becomes the *current* one; older rows stay as history. One process
at a time writes a store (a lock file next to it, released by the OS when the process dies). The store
never knows which judge family produced a row, and imports no DSPy: only ``records`` and ``errors``.

Reading never changes a store or adds a file beside it: an existing file is opened read-only, every committed
row read (a killed writer's WAL included, from a private copy where it cannot be read in place:
``_open.connect_read``), and becomes writable, checked by SQLite's quick_check and migrated to this schema,
only at its first write. A file that is not a store (empty, text, another program's SQLite file), a store of a
newer schema, a damaged one opened to write and a damaged row read are each refused in one line. Reads stream
from the cursor, so exporting a large store takes flat memory.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, NamedTuple

from scijudge._bulk import collector_paused
from scijudge.errors import DamagedRow, InputError, ScijudgeError, StoreWriteError
from scijudge.records import (
    CURRENT_GROUP, JSON_COLUMNS, RUN_COLUMNS, Columns, JudgeResult, safe_endpoint,
)
from scijudge.redaction import redact_data
from scijudge.run._open import ReadConnection, check_columns, check_header, check_tables, connect_read, quick_check
from scijudge.run._damage import damage_error, find_damaged, intact_sql
from scijudge.run._schema import ADDED_IN_V2 as _ADDED_IN_V2
from scijudge.run._schema import GROUP_INDEX as _GROUP_INDEX
from scijudge.run._schema import SCHEMA_VERSION, frame_of, migrate
from scijudge.run._schema import V1_CURRENT as _V1_CURRENT
from scijudge.run._open import STATUSES, check_owner, unreadable, column_names, loads_column
from scijudge.run._writer_lock import WriterLock as _WriterLock
from scijudge.run.rows import CURRENT_AT, chunks, group_of, row_of, rows_of

_CHUNK = 5000
_DONE = f"IN ({', '.join(repr(s) for s in STATUSES)})"  # any other status (a damaged row) is not a judgment
_MODEL, _ENDPOINT = CURRENT_GROUP.index("model"), CURRENT_GROUP.index("endpoint")
_FETCH = 2000


class CurrentRow(NamedTuple):
    """What the planner needs to know about the current judgment of one (item, judge, part, model, endpoint)."""

    key: str
    spec_hash: str
    input_hash: str
    status: str


class Run:
    """A run store file. Safe to share between the threads of one process (writes are serialised)."""

    def __init__(self, path: str | Path, *, create: bool = True) -> None:
        self.path = Path(path)
        exists = self.path.exists()
        if not create and not exists:
            raise InputError("run store not found", file=self.path)
        if exists and self.path.is_dir():
            raise InputError("expected a run store file, got a folder", file=self.path)
        self._lock = threading.RLock()
        self._writer: _WriterLock | None = None
        self._in_transaction = False
        self._columns: dict[str, str] = {c: c for c in RUN_COLUMNS}  # column -> SQL that reads it
        self._db: sqlite3.Connection
        self._reader: ReadConnection | None = None
        self._id = 0  # the store's id (``_open.store_id``), known once opened to write
        self._readonly, self._create = exists, create
        if exists:
            check_header(self.path, allow_empty=create)  # an empty file (to write to): a new store's file
            self._db = self._connect_read()
            self._inspect()
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # e.g. a --run path under an existing file
            raise InputError(f"cannot create the run store's folder: {exc.strerror or exc}", file=self.path) from None
        self._open_write()

    # --- opening -------------------------------------------------------------------------------
    def _connect_read(self) -> sqlite3.Connection:
        """A read-only connection that creates no file and reads every committed row (``_open.connect_read``)."""
        try:
            self._reader = connect_read(self.path)
        except sqlite3.Error as exc:
            raise InputError(f"cannot open the run store ({exc})", file=self.path) from None
        return self._reader.db

    def _close_read(self) -> None:
        if self._reader is not None:
            self._reader.close()  # and its private copy, if it read one
            self._reader = None

    def _inspect(self) -> None:
        """Check the schema of an existing store (without writing): refuse a newer one; read an older one as
        this schema (columns it lacks read as their migrated values)."""
        try:
            tables = {name for (name,) in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            existing = [r[1] for r in self._db.execute("PRAGMA table_info(judgments)")]
            meta = {k: json.loads(v) for k, v in self._db.execute(
                "SELECT key, value FROM meta WHERE key IN ('schema_version', 'api_base') AND value IS NOT NULL")
                } if "meta" in tables else {}
            version, api_base = meta.get("schema_version"), meta.get("api_base")
        except (sqlite3.DatabaseError, ValueError) as exc:
            raise unreadable(exc, self.path) from None
        check_tables(tables, self.path, allow_none=self._create)
        if not existing:
            self._columns = {}  # no judgment yet (an empty file, or only batch bookkeeping): nothing to read
            return
        if isinstance(version, int) and version > SCHEMA_VERSION:
            raise InputError(f"run store has schema version {version}, newer than the version {SCHEMA_VERSION} "
                             "this scijudge reads; upgrade scijudge to read it", file=self.path)
        missing = [c for c in RUN_COLUMNS if c not in existing]
        unknown = [c for c in missing if c not in _ADDED_IN_V2]
        if unknown:
            raise InputError(f"not a scijudge run store (no column {unknown[0]!r})", file=self.path)
        endpoint = safe_endpoint(api_base) if isinstance(api_base, str) else ""
        legacy = {"endpoint": "'" + endpoint.replace("'", "''") + "'", "input_hash": "''", "decoding": "''",
                  "current": _V1_CURRENT}
        self._columns = {c: (legacy[c] if c in missing else c) for c in RUN_COLUMNS}

    def _open_write(self, *, check: bool = False) -> None:
        """Open for writing; ``check``: an existing store passes SQLite's quick_check first (before any write)."""
        try:
            db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
        except sqlite3.Error as exc:
            raise StoreWriteError(f"cannot write the run store {self.path} ({exc})") from None
        try:
            if check:
                check_owner(db, self.path, self.path)  # before anything of a foreign WAL is replayed into the file
                quick_check(db, self.path)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute(f"PRAGMA cache_size = {_WRITE_CACHE_KIB}")  # keys are hashes: the key index is hit at random
            self._db = db
            self._migrate()
        except BaseException as exc:
            db.close()
            if isinstance(exc, sqlite3.OperationalError):
                raise StoreWriteError(f"cannot write the run store {self.path} ({exc})") from None
            if isinstance(exc, sqlite3.DatabaseError):
                raise unreadable(exc, self.path) from None
            raise
        self._columns = {c: c for c in RUN_COLUMNS}
        self._readonly = False

    def _writable(self) -> None:
        """Reopen for writing (migrating an older store) before the first write; called with the lock held."""
        if not self._readonly:
            return
        self._db.close()
        self._close_read()
        try:
            self._open_write(check=True)
        except BaseException:
            self._db = self._connect_read()  # still readable as before
            raise

    def _migrate(self) -> None:
        """Bring a store written by an earlier release up to this schema; give it an id (``_schema.migrate``)."""
        self._id = migrate(self._db, self.path)

    def _commit(self) -> None:
        """Commit, the store's id stamped into the transaction: every page-1 frame of the WAL carries it
        (``_open.check_owner``)."""
        if self._db.in_transaction:
            self._db.execute(f"PRAGMA user_version = {self._id}")
        self._db.commit()

    def close(self) -> None:
        with self._lock:
            if not self._readonly:
                self._checkpoint()
            self._db.close()
            self._close_read()
            if self._writer is not None:
                self._writer.release()
                self._writer = None

    def _checkpoint(self) -> None:
        """Copy the WAL into the store file before closing: SQLite does so itself only when its last connection
        closes, so a reader with the store open (a viewer) would otherwise leave every judgment in the ``-wal``,
        lost to whoever copies or moves the store file alone. Waits at most a few seconds for readers that hold a
        snapshot; never fails the close (the WAL still holds everything)."""
        with suppress(sqlite3.Error):
            self._db.execute(f"PRAGMA busy_timeout = {_CHECKPOINT_WAIT_MS}")
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()

    def __enter__(self) -> Run:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def readonly(self) -> bool:
        """Nothing has been written through this handle: the file is open read-only."""
        return self._readonly

    @contextmanager
    def _reading(self) -> Iterator[None]:
        """SQLite errors while reading as one line naming the store."""
        try:
            yield
        except sqlite3.OperationalError as exc:
            raise InputError(f"cannot read the run store ({exc})", file=self.path) from None
        except sqlite3.DatabaseError as exc:
            raise unreadable(exc, self.path) from None

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """Hold the lock, reopen for writing if needed; SQLite errors as one line (a failed write is undone)."""
        with self._lock:
            self._writable()
            try:
                yield
                if not self._in_transaction:
                    self._commit()
            except BaseException as exc:
                if not self._in_transaction:
                    self._rollback()
                if isinstance(exc, sqlite3.Error):
                    raise self._write_error(exc) from None
                raise

    def _rollback(self) -> None:
        try:
            self._db.rollback()
        except sqlite3.Error:
            pass

    def _write_error(self, exc: sqlite3.Error) -> ScijudgeError:
        if isinstance(exc, sqlite3.OperationalError):
            return StoreWriteError(f"cannot write the run store {self.path} ({exc}); every judgment stored before "
                                   "is kept: free space or move the store, then re-run to resume")
        return unreadable(exc, self.path)

    @contextmanager
    def transaction(self) -> Iterator[Run]:
        """Every write inside is one transaction: committed at the end, undone on any error or Ctrl-C."""
        with self._lock:
            if self._in_transaction:
                yield self
                return
            self._writable()
            self._in_transaction = True
            try:
                yield self
                self._commit()
            except BaseException as exc:
                self._rollback()
                if isinstance(exc, sqlite3.Error):
                    raise self._write_error(exc) from None
                raise
            finally:
                self._in_transaction = False

    # --- one writer ----------------------------------------------------------------------------
    @property
    def writing(self) -> bool:
        """This handle holds the store's writer lock."""
        return self._writer is not None

    def claim_writer(self) -> Run:
        """Become the only process judging into this store; refuse clearly when another one is."""
        if self._writer is None:
            self._writer = _WriterLock(self.path)
            try:
                with self._writing():
                    pass  # open for writing (and migrate) now, before anything is planned or sent
            except BaseException:
                self.release_writer()
                raise
        return self

    def release_writer(self) -> None:
        if self._writer is not None:
            self._writer.release()
            self._writer = None

    # --- writing -----------------------------------------------------------------------------
    def record(self, result: JudgeResult) -> None:
        """Persist one judgment now; it becomes the current one of its group (same key: replaced)."""
        self.record_dump(result.model_dump(mode="json"))

    def record_dump(self, data: dict[str, Any]) -> None:
        """Persist a judgment given as ``JudgeResult.model_dump(mode="json")`` (from a worker process)."""
        values = row_of(data)
        with self._writing():
            self._db.execute(_UPDATE_CURRENT, group_of(values))
            self._db.execute(_INSERT, values)

    def record_many(self, dumps: Iterable[dict[str, Any]], *, chunk: int = _CHUNK) -> int:
        """Persist many judgments (``JudgeResult.model_dump(mode="json")`` dicts), one transaction per ``chunk``
        (or all in one, inside ``transaction()``); returns the rows written.

        The outcome equals ``record_dump`` on each in order: within a chunk only the last row of a group
        becomes current, and the group's current row before the chunk becomes history.
        """
        return self._write_batches([row_of(d) for d in batch] for batch in chunks(dumps, max(1, chunk)))

    def record_columns(self, chunks: Iterable[Columns]) -> int:
        """``record_many`` of judgments given as ``Columns`` chunks (one transaction per chunk, or all in one
        inside ``transaction()``): the same rows, built column by column (bulk imports)."""
        return self._write_batches(rows_of(c) for c in chunks if c.n)

    def _write_batches(self, batches: Iterable[list[Sequence[Any]]]) -> int:
        written = 0
        # A group can have a current row only if its (model, endpoint) had one before this call, or this call
        # wrote it: the UPDATE (a quarter of the cost of a fresh import) is skipped for the others.
        before: set[tuple[str, str]] | None = None
        wrote: set[tuple[Any, ...]] = set()
        deferred = False  # the group index, dropped while an empty table is filled in one transaction
        try:
            for rows in batches:
                last: dict[tuple[Any, ...], int] = {}
                for n, values in enumerate(rows):
                    last[group_of(values)] = n
                if len(last) < len(rows):  # a group twice in this chunk: only its last row is current
                    current = set(last.values())
                    rows = [values if n in current else [*values[:CURRENT_AT], 0] for n, values in enumerate(rows)]
                with self._writing():
                    if before is None:
                        before = self.model_endpoints()
                        if self._in_transaction and not self._db.execute("SELECT 1 FROM judgments LIMIT 1").fetchone():
                            # building an index once from all rows costs less than updating it row by row;
                            # the transaction undoes the drop if it fails, and readers never see it
                            self._db.execute("DROP INDEX IF EXISTS judgments_group")
                            deferred = True
                    stale = [g for g in last if (g[_MODEL], g[_ENDPOINT]) in before or g in wrote]
                    if stale:
                        if deferred:
                            self._db.execute(_GROUP_INDEX)
                            deferred = False
                        self._db.executemany(_UPDATE_CURRENT, stale)
                    self._db.executemany(_INSERT, rows)
                wrote.update(last)
                written += len(rows)
        finally:
            if deferred:
                with self._writing():
                    self._db.execute(_GROUP_INDEX)
        return written

    def set_meta(self, **values: Any) -> None:
        """Record run-level facts (command, version); callers must never pass secrets."""
        with self._writing():
            self._db.executemany("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                                 [(k, json.dumps(redact_data(v))) for k, v in values.items()])

    # --- reading -----------------------------------------------------------------------------
    def _select(self, names: Sequence[str]) -> str:
        return ", ".join(self._columns[c] if self._columns[c] == c else f"{self._columns[c]} AS {c}" for c in names)

    def _current_is(self) -> str:
        return f"{self._columns['current']} = 1"

    def _query(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        with self._lock, self._reading():
            return self._db.execute(sql, args).fetchall()

    def meta(self) -> dict[str, Any]:
        try:
            rows = self._query("SELECT key, value FROM meta")
        except InputError:
            if not self.has_table("meta"):
                return {}
            raise
        return {k: json.loads(v) for k, v in rows}

    def has_table(self, name: str) -> bool:
        """The store's file has this table (``batches``: it was judged with ``--batch``)."""
        return bool(self._query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)))

    def completed_keys(self, *, include_abstained: bool = True) -> set[str]:
        """Keys already judged; abstentions count unless the caller wants to retry them."""
        return self.keys_by_state(include_abstained=include_abstained)[0]

    def keys_by_state(self, *, include_abstained: bool = True) -> tuple[set[str], set[str]]:
        """Keys already judged, and keys whose row is damaged (a JSON text cut short): judged again."""
        if not self._columns:
            return set(), set()
        query = (f"SELECT key, {intact_sql(self._columns, self._has_json())} FROM judgments WHERE status "
                 + (_DONE if include_abstained else "= 'ok'"))
        done: set[str] = set()
        damaged: set[str] = set()
        for key, intact in self._query(query):
            (done if intact else damaged).add(key)
        return done, damaged

    @contextmanager
    def _naming_damage(self, history: bool) -> Iterator[None]:
        """A damaged row met while reading: one line naming every damaged row read (``_damage``)."""
        try:
            yield
        except DamagedRow:
            found = self.damaged_rows(history=history)
            if not found:
                raise
            raise damage_error(found, self.path) from None

    def damaged_rows(self, *, history: bool = False) -> list[Any]:
        """The current rows (or all) that cannot be read, as ``_damage.Damaged``: a scan with the readers' checks."""
        if not self._columns:
            return []
        where = "" if history else f" WHERE {self._current_is()}"
        with self._lock, self._reading():
            fetched = self._db.execute(f"SELECT rowid, {self._select(RUN_COLUMNS)} FROM judgments{where}").fetchall()
        return find_damaged(fetched, self.path)

    def current_index(self) -> dict[tuple[str, ...], CurrentRow]:
        """The current judgment of every (item, judge, part, model, endpoint) group."""
        if not self._columns:
            return {}
        names = [*CURRENT_GROUP, "key", "spec_hash", "input_hash", "status"]
        fetched = self._query(f"SELECT {self._select(names)} FROM judgments WHERE {self._current_is()} AND status {_DONE}")
        width = len(CURRENT_GROUP)
        return {tuple(r[:width]): CurrentRow(*r[width:]) for r in fetched}

    def current_of(self, group: Sequence[str]) -> CurrentRow | None:
        """The current judgment of one (item, judge, part, model, endpoint), if any (an indexed look-up)."""
        if not self._columns:
            return None
        where = " AND ".join(f"{self._columns[c]} = ?" for c in CURRENT_GROUP)
        fetched = self._query(f"SELECT {self._select(['key', 'spec_hash', 'input_hash', 'status'])} FROM judgments "
                              f"WHERE {where} AND {self._current_is()} LIMIT 1", list(group))
        return CurrentRow(*fetched[0]) if fetched else None

    def model_endpoints(self, *, spec_hash_not: str | None = None) -> set[tuple[str, str]]:
        """The (model, endpoint) pairs of current judgments (optionally: of those whose spec hash differs)."""
        if not self._columns:
            return set()
        where = self._current_is() + (" AND spec_hash != ?" if spec_hash_not is not None else "")
        args = [spec_hash_not] if spec_hash_not is not None else []
        return {(m, e) for m, e in self._query(
            f"SELECT DISTINCT {self._select(['model', 'endpoint'])} FROM judgments WHERE {where}", args)}

    def __len__(self) -> int:
        if not self._columns:
            return 0
        return int(self._query("SELECT COUNT(*) FROM judgments")[0][0])

    def rows(self, *, history: bool = False, columns: Sequence[str] | None = None,
             decode: bool = True) -> Iterator[dict[str, Any]]:
        """Current judgments (or every row with ``history=True``) as plain dicts, in insertion order.

        Streams from the cursor (flat memory). ``columns`` reads only those; ``decode=False`` leaves the JSON
        columns (``probs``, ``result``, ``attempts``) as their stored text.
        """
        names = column_names(columns)
        if not self._columns:
            return
        where = "" if history else f" WHERE {self._current_is()}"
        json_columns = [c for c in JSON_COLUMNS if c in names] if decode else []
        with self._naming_damage(history):
            for values in self._stream(f"SELECT {self._select(names)} FROM judgments{where} ORDER BY rowid", names):
                row = dict(zip(names, values))
                for column in json_columns:
                    row[column] = loads_column(row[column], column, self.path, row.get("item_id"))
                if "current" in row:
                    row["current"] = bool(row["current"])
                yield row

    def _stream(self, sql: str, names: Sequence[str]) -> Iterator[tuple[Any, ...]]:
        """The rows of one query (its first columns: ``names``), fetched in chunks under the store's lock (flat
        memory on large stores); a chunk with a damaged row is refused (``check_columns``) before any of it is given."""
        with self._lock, self._reading():
            cursor = self._db.execute(sql)
        try:
            while True:
                with self._lock, self._reading():
                    fetched = cursor.fetchmany(_FETCH)
                if not fetched:
                    return
                check_columns(names, list(zip(*fetched)), fetched, self.path)
                yield from fetched
        finally:
            with self._lock, suppress(sqlite3.ProgrammingError):  # the store was closed before the reader
                cursor.close()

    def raw_rows(self, *, history: bool = False) -> Iterator[dict[str, Any]]:
        """Like ``rows()``, but a JSON column that SQLite finds well-formed comes as its stored text
        (``RawJSON``) instead of being decoded; the others are decoded (and raise when corrupt). For writers
        that copy JSON through (exports): decoding and encoding again is most of their cost."""
        with self._naming_damage(history):
            for values in self.raw_tuples(history=history):
                yield self.raw_row(values)

    def raw_tuples(self, *, history: bool = False, skip: Sequence[int] = ()) -> Iterator[tuple[Any, ...]]:
        """The rows as stored, for writers that copy them through: values in ``RUN_COLUMNS`` order (JSON
        columns as their text, ``current`` 0/1), then one flag, true where SQLite found every JSON column of the
        row well-formed (always false where SQLite has no JSON functions); a damaged row is refused in one line.
        ``raw_row`` turns one into a ``raw_rows()`` dict. Streams from the cursor: a tuple costs a fraction of a
        dict. ``skip``: rowids left out (``damaged_rows``)."""
        if not self._columns:
            return
        where = "" if history else f" WHERE {self._current_is()}"
        if skip:
            where += (" AND " if where else " WHERE ") + f"rowid NOT IN ({', '.join(str(int(r)) for r in skip)})"
        valid = " AND ".join(self._well_formed(c) for c in JSON_COLUMNS)
        with self._naming_damage(history):
            yield from self._stream(f"SELECT {self._select(RUN_COLUMNS)}, {valid} FROM judgments{where} ORDER BY "
                                    "rowid", RUN_COLUMNS)

    def raw_row(self, values: Sequence[Any]) -> dict[str, Any]:
        """One ``raw_tuples()`` tuple as a ``raw_rows()`` dict (JSON columns as ``RawJSON`` when well-formed,
        else decoded: a corrupt one raises, naming the row)."""
        row = dict(zip(RUN_COLUMNS, values))
        ok = values[len(RUN_COLUMNS)]
        for column in JSON_COLUMNS:
            raw = row[column]
            if raw is not None:
                row[column] = RawJSON(raw) if ok else loads_column(raw, column, self.path, row.get("item_id"))
        row["current"] = bool(row["current"])
        return row

    def _well_formed(self, column: str) -> str:
        """SQL that is true where the row's ``column`` is NULL or JSON SQLite finds well-formed (false for every
        row where SQLite has no JSON functions)."""
        if not self._has_json():
            return "0"
        return f"({self._columns[column]} IS NULL OR json_valid({self._columns[column]}))"

    def _has_json(self) -> bool:
        """SQLite was built with its JSON functions (built in since 3.38)."""
        try:
            self._query("SELECT json_valid('[]')")
        except InputError:
            return False
        return True

    def results(self, *, history: bool = False) -> list[JudgeResult]:
        """Current judgments (or all) as typed JudgeResults."""
        skip = {"key", "current"}
        return [JudgeResult.model_validate({k: v for k, v in r.items() if k not in skip})
                for r in self.rows(history=history)]

    def to_pandas(self, *, history: bool = False, columns: Sequence[str] | None = None) -> Any:
        """One row per current judgment (or every row with ``history=True``), columns as in ``RUN_COLUMNS``.

        ``columns`` reads only those, in one query; the JSON columns among them are decoded, others never are.
        """
        import pandas as pd

        names = column_names(columns)
        if not self._columns:
            return pd.DataFrame(columns=names)
        where = "" if history else f" WHERE {self._current_is()}"
        json_columns = [c for c in JSON_COLUMNS if c in names]
        with self._naming_damage(history), collector_paused():  # 10^5 rows of tuples: the collector's passes
            return self._frame(names, json_columns, where)  # would walk them again and again

    def _frame(self, names: list[str], json_columns: list[str], where: str) -> Any:
        """The frame of the fetched rows (``_schema.frame_of``)."""
        with self._lock, self._reading():
            fetched = self._db.execute(f"SELECT {self._select(names)} FROM judgments{where} ORDER BY rowid").fetchall()
        return frame_of(fetched, names, json_columns, self.path)

    def export(self, out: str | Path, fmt: str = "jsonl", *, history: bool = False,
               skip_damaged: Sequence[int] = ()) -> int:
        """Write current judgments (or all) to JSONL or CSV, streamed, to a temporary file renamed to ``out`` when
        every row was written (never over this store); returns the number of rows written. ``skip_damaged``: the
        rowids of ``damaged_rows()`` to leave out (else a damaged row refuses the whole export)."""
        from scijudge._files import refuse_overwrite
        from scijudge.run.export import write_tuples

        refuse_overwrite(out, stores=[self.path])
        if fmt not in ("jsonl", "csv"):
            raise InputError(f"unknown export format {fmt!r}: use jsonl or csv", field="format")
        with self._naming_damage(history):
            return write_tuples(self.raw_tuples(history=history, skip=skip_damaged), out, fmt, self.raw_row)


class RawJSON(str):
    """A JSON column's stored text, known to be well-formed JSON (``Run.raw_rows``)."""

    __slots__ = ()


_INSERT = f"INSERT OR REPLACE INTO judgments ({', '.join(RUN_COLUMNS)}) VALUES ({', '.join('?' for _ in RUN_COLUMNS)})"
_UPDATE_CURRENT = f"UPDATE judgments SET current = 0 WHERE {' AND '.join(f'{c} = ?' for c in CURRENT_GROUP)} AND current = 1"


_CHECKPOINT_WAIT_MS = 5000
_WRITE_CACHE_KIB = -65536  # at most 64 MiB of page cache for a writer (SQLite's default is 2 MiB)
