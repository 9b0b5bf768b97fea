"""The run store: a SQLite file where every judgment is written the moment it completes.

WAL journaling with a commit per judgment means a process killed with SIGKILL loses nothing that
completed, and a re-run reads the completed keys and skips them. A newer judgment of the same
(item, judge, part, model, endpoint) becomes the *current* one; older rows stay as history. One process
at a time writes a store (a lock file next to it, released by the OS when the process dies). The store
never knows which judge family produced a row, and imports no DSPy: only ``records`` and ``errors``.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from scijudge.errors import InputError, RunBusyError
from scijudge.records import COLUMN_SQL, CURRENT_GROUP, JSON_COLUMNS, RUN_COLUMNS, JudgeResult, judgment_key, safe_endpoint
from scijudge.redaction import redact, redact_data

SCHEMA_VERSION = 2
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS judgments ({", ".join(f"{name} {sql}" for name, sql in COLUMN_SQL.items())});
CREATE INDEX IF NOT EXISTS judgments_item ON judgments(item_id, judge);
CREATE INDEX IF NOT EXISTS judgments_group ON judgments(item_id, judge, part, model, endpoint, current);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
"""
_ADDED_IN_V2 = {name: COLUMN_SQL[name] for name in ("endpoint", "input_hash", "decoding", "current")}


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
        if not create and not self.path.exists():
            raise InputError("run store not found", file=self.path)
        if self.path.exists() and self.path.is_dir():
            raise InputError("expected a run store file, got a folder", file=self.path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # e.g. a --run path under an existing file
            raise InputError(f"cannot create the run store's folder: {exc.strerror or exc}", file=self.path) from None
        self._lock = threading.Lock()
        self._writer: _WriterLock | None = None
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._migrate()
        except (sqlite3.DatabaseError, sqlite3.OperationalError) as exc:
            raise InputError(f"not a scijudge run store ({exc})", file=self.path) from None

    def _migrate(self) -> None:
        """Bring a store written by an earlier release up to this schema (columns added, history marked)."""
        existing = [r[1] for r in self._db.execute("PRAGMA table_info(judgments)")]
        if existing:
            missing = {c: d for c, d in _ADDED_IN_V2.items() if c not in existing}
            if missing:
                with self._db:
                    for column, decl in missing.items():
                        self._db.execute(f"ALTER TABLE judgments ADD COLUMN {column} {decl}")
                    self._db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
                    row = self._db.execute("SELECT value FROM meta WHERE key = 'api_base'").fetchone()
                    endpoint = safe_endpoint(json.loads(row[0])) if row and row[0] else ""
                    # Rows of v1 had no endpoint: the store's recorded api_base is the best evidence there is.
                    self._db.execute("UPDATE judgments SET endpoint = ?", (endpoint,))
                    self._db.execute(
                        "UPDATE judgments SET current = CASE WHEN rowid IN (SELECT MAX(rowid) FROM judgments "
                        f"GROUP BY {', '.join(CURRENT_GROUP)}) THEN 1 ELSE 0 END")
        with self._db:
            self._db.executescript(_SCHEMA)
            self._db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
                             (json.dumps(SCHEMA_VERSION),))

    def close(self) -> None:
        with self._lock:
            self._db.close()
            if self._writer is not None:
                self._writer.release()
                self._writer = None

    def __enter__(self) -> Run:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- one writer ----------------------------------------------------------------------------
    @property
    def writing(self) -> bool:
        """This handle holds the store's writer lock."""
        return self._writer is not None

    def claim_writer(self) -> Run:
        """Become the only process judging into this store; refuse clearly when another one is."""
        if self._writer is None:
            self._writer = _WriterLock(self.path)
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
        row = _row(_redacted(data))
        columns = list(RUN_COLUMNS)
        placeholders = ", ".join("?" for _ in columns)
        group = " AND ".join(f"{c} = ?" for c in CURRENT_GROUP)
        with self._lock:
            self._db.execute(f"UPDATE judgments SET current = 0 WHERE {group} AND current = 1",
                             [row[c] for c in CURRENT_GROUP])
            self._db.execute(f"INSERT OR REPLACE INTO judgments ({', '.join(columns)}) VALUES ({placeholders})",
                             [row[c] for c in columns])
            self._db.commit()

    def set_meta(self, **values: Any) -> None:
        """Record run-level facts (command, version); callers must never pass secrets."""
        with self._lock:
            self._db.executemany("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                                 [(k, json.dumps(redact_data(v))) for k, v in values.items()])
            self._db.commit()

    # --- reading -----------------------------------------------------------------------------
    def meta(self) -> dict[str, Any]:
        with self._lock:
            rows = self._db.execute("SELECT key, value FROM meta").fetchall()
        return {k: json.loads(v) for k, v in rows}

    def completed_keys(self, *, include_abstained: bool = True) -> set[str]:
        """Keys already judged; abstentions count unless the caller wants to retry them."""
        query = "SELECT key FROM judgments" + ("" if include_abstained else " WHERE status = 'ok'")
        with self._lock:
            return {k for (k,) in self._db.execute(query)}

    def current_index(self) -> dict[tuple[str, ...], CurrentRow]:
        """The current judgment of every (item, judge, part, model, endpoint) group."""
        query = f"SELECT {', '.join(CURRENT_GROUP)}, key, spec_hash, input_hash, status FROM judgments WHERE current = 1"
        with self._lock:
            fetched = self._db.execute(query).fetchall()
        width = len(CURRENT_GROUP)
        return {tuple(r[:width]): CurrentRow(*r[width:]) for r in fetched}

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM judgments").fetchone()[0]

    def rows(self, *, history: bool = False) -> Iterator[dict[str, Any]]:
        """Current judgments (or every row with ``history=True``) as plain dicts, in insertion order."""
        where = "" if history else " WHERE current = 1"
        try:
            with self._lock:
                fetched = self._db.execute(
                    f"SELECT {', '.join(RUN_COLUMNS)} FROM judgments{where} ORDER BY rowid").fetchall()
        except sqlite3.DatabaseError as exc:
            raise InputError(f"corrupt run store ({exc})", file=self.path) from None
        for values in fetched:
            row = dict(zip(RUN_COLUMNS, values))
            for column in JSON_COLUMNS:
                try:
                    row[column] = json.loads(row[column]) if row[column] is not None else None
                except (ValueError, TypeError, RecursionError):
                    raise InputError(f"corrupt run store: unreadable {column} in the row of item {row['item_id']!r}",
                                     file=self.path, field=column) from None
            row["current"] = bool(row["current"])
            yield row

    def results(self, *, history: bool = False) -> list[JudgeResult]:
        """Current judgments (or all) as typed JudgeResults."""
        skip = {"key", "current"}
        return [JudgeResult.model_validate({k: v for k, v in r.items() if k not in skip})
                for r in self.rows(history=history)]

    def to_pandas(self, *, history: bool = False) -> Any:
        """One row per current judgment (or every row with ``history=True``), columns as in ``RUN_COLUMNS``."""
        import pandas as pd

        return pd.DataFrame(list(self.rows(history=history)), columns=list(RUN_COLUMNS))

    def export(self, out: str | Path, fmt: str = "jsonl", *, history: bool = False) -> int:
        """Write current judgments (or all) to JSONL or CSV; returns the number of rows written."""
        out = Path(out)
        rows = [redact_data(row) for row in self.rows(history=history)]  # stores written before redaction existed
        if fmt == "jsonl":
            with out.open("w", encoding="utf-8") as handle:
                for row in rows:
                    handle.write(json.dumps(row, ensure_ascii=False) + "\n")
            return len(rows)
        if fmt == "csv":
            import pandas as pd

            frame = pd.DataFrame(rows, columns=list(RUN_COLUMNS))
            for column in JSON_COLUMNS:
                frame[column] = frame[column].map(lambda v: json.dumps(v) if v is not None else "")
            frame.to_csv(out, index=False)
            return len(frame)
        raise InputError(f"unknown export format {fmt!r}: use jsonl or csv", field="format")


def _redacted(data: dict[str, Any]) -> dict[str, Any]:
    """Errors a provider returned may echo credentials: redact the reason and each attempt's error."""
    if data.get("reason") is None and not any(a.get("error") for a in data.get("attempts") or ()):
        return data
    data = dict(data, reason=redact(data.get("reason")))
    data["attempts"] = [dict(a, error=redact(a.get("error"))) for a in data.get("attempts") or ()]
    return data


def _row(dump: dict[str, Any]) -> dict[str, Any]:
    data = {"endpoint": "", "input_hash": "", "decoding": "", **dump}
    data["key"] = judgment_key(data["item_id"], data["judge"], data["part"], data["spec_hash"], data["model"],
                               data["endpoint"], data["input_hash"], data["decoding"])
    data["current"] = 1
    for column in JSON_COLUMNS:
        data[column] = json.dumps(data[column]) if data[column] is not None else None
    return data


class _WriterLock:
    """An exclusive lock file ``<store>.lock`` holding the writer's PID; the OS drops it when that process dies."""

    def __init__(self, store: Path) -> None:
        self.path = store.with_name(store.name + ".lock")
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: no advisory locks; one writer is not enforced
            return
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(self._fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(self._fd)
            self._fd = -1
            raise RunBusyError(f"run store {store} is being written by another process (pid {holder}); wait for "
                               "it to finish or stop it, or use another --run file") from None
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, str(os.getpid()).encode(), 0)

    def release(self) -> None:
        if self._fd >= 0:
            try:
                os.ftruncate(self._fd, 0)
            finally:
                os.close(self._fd)  # closing drops the flock
                self._fd = -1
