"""Batch bookkeeping in the run store's SQLite file: every batch and its keys, written before it is created.

The order that makes a kill harmless: ``intend`` (a client id and the keys) is committed before the batch
is created remotely, ``submitted`` records the remote id right after, and a re-run polls every batch not
yet ``processed`` before submitting anything. A batch whose remote id was never recorded is looked up by
the client id sent as batch metadata. Its own tables and connection (WAL), so the judgment table is untouched.

Two more tables keep what was paid for across kills and narrower re-runs:
- ``batch_progress``: per judgment key, the stage it goes to next, every attempt so far (cost included) and
  the batch whose line produced them, written before a follow-up batch is intended;
- ``batch_answers``: result lines of a collected batch for keys the collecting run did not ask for (fewer
  judges, ``--limit``): a later run that asks for them uses the stored line instead of a new request.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, UTC
from pathlib import Path
from typing import Any

from pydantic import BaseModel

_SCHEMA = """
CREATE TABLE IF NOT EXISTS batches (
    client_id TEXT PRIMARY KEY, provider TEXT NOT NULL, endpoint TEXT, model TEXT NOT NULL,
    remote_id TEXT, status TEXT NOT NULL, processed INTEGER NOT NULL DEFAULT 0,
    stage INTEGER NOT NULL, strategy TEXT NOT NULL, temperature REAL NOT NULL, keys TEXT NOT NULL,
    total INTEGER NOT NULL, completed INTEGER NOT NULL DEFAULT 0, failed INTEGER NOT NULL DEFAULT 0,
    price_basis TEXT, created_at TEXT NOT NULL, updated_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS batch_progress (
    key TEXT PRIMARY KEY, stage INTEGER NOT NULL, attempts TEXT NOT NULL, last_problem TEXT NOT NULL,
    resends INTEGER NOT NULL, after TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS batch_answers (key TEXT PRIMARY KEY, client_id TEXT NOT NULL, line TEXT NOT NULL);
"""
FINAL_STATUSES = frozenset({"completed", "expired", "failed", "cancelled"})
ABANDONED = "abandoned"
LOOKUP_FAILED = "lookup-failed"
"""Status of a batch whose creation was never confirmed and whose look-up by client id failed (a re-run tries again)."""


class Progress(BaseModel):
    """Where one judgment stands between batch rounds (``batch_progress``)."""

    stage: int
    attempts: list[dict[str, Any]]
    last_problem: str
    resends: int
    after: str  # the client id of the batch whose line was processed last for this key


class BatchRecord(BaseModel):
    """One row of the batches table."""

    client_id: str
    provider: str
    endpoint: str | None
    model: str
    remote_id: str | None
    status: str
    processed: bool
    stage: int
    strategy: str
    temperature: float
    keys: list[str]
    total: int
    completed: int
    failed: int
    price_basis: str | None
    created_at: str
    updated_at: str


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class BatchStore:
    """The ``batches`` table of a run store file (opened on its own connection)."""

    def __init__(self, path: str | Path, *, read_only: bool = False) -> None:
        self.path = Path(path)
        self._reader: Any = None
        self._lock = threading.Lock()
        try:
            if read_only:  # listing batches changes nothing in the file and creates none beside it
                from scijudge.run._open import connect_read

                self._reader = connect_read(self.path)
                self._db = self._reader.db
            else:
                self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.executescript(_SCHEMA)
        except sqlite3.Error as exc:
            raise self._error(exc) from None

    def _error(self, exc: sqlite3.Error) -> Exception:
        """A SQLite error of the batch records as one line naming the store (a full disk: exit 3)."""
        from scijudge.errors import InputError, StoreWriteError

        if isinstance(exc, sqlite3.OperationalError):
            return StoreWriteError(f"cannot write the batch records of the run store {self.path} ({exc}); every "
                                   "batch recorded before is kept and collected on resume: free space or move the "
                                   "store, then re-run")
        return InputError(f"corrupt run store ({exc})", file=self.path)

    @contextmanager
    def _guarded(self) -> Iterator[None]:
        """Hold the lock; a failed write is undone and raised as one line (``_error``)."""
        with self._lock:
            try:
                yield
            except sqlite3.Error as exc:
                try:
                    self._db.rollback()
                except sqlite3.Error:
                    pass
                raise self._error(exc) from None

    def close(self) -> None:
        with self._lock:
            self._db.close()
            if self._reader is not None:
                self._reader.close()

    def intend(self, *, provider: str, endpoint: str | None, model: str, stage: int, strategy: str,
               temperature: float, keys: list[str], price_basis: str | None) -> str:
        """Record a batch about to be created (status ``intent``); returns its client id."""
        client_id = f"scijudge-{uuid.uuid4().hex}"
        now = _now()
        with self._guarded():
            self._db.execute(
                "INSERT INTO batches (client_id, provider, endpoint, model, remote_id, status, stage, strategy, "
                "temperature, keys, total, price_basis, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, NULL, 'intent', ?, ?, ?, ?, ?, ?, ?, ?)",
                (client_id, provider, endpoint, model, stage, strategy, temperature, json.dumps(keys), len(keys),
                 price_basis, now, now))
            self._db.commit()
        return client_id

    def submitted(self, client_id: str, remote_id: str, status: str) -> None:
        """Record the provider's id of a created batch."""
        self._update(client_id, remote_id=remote_id, status=status)

    def update(self, client_id: str, *, status: str, completed: int | None = None, failed: int | None = None) -> None:
        """Record the latest status and counts seen when polling."""
        values: dict[str, Any] = {"status": status}
        if completed is not None:
            values["completed"] = completed
        if failed is not None:
            values["failed"] = failed
        self._update(client_id, **values)

    def processed(self, client_id: str, status: str | None = None) -> None:
        """Mark a finished batch whose lines were all turned into judgments or follow-ups."""
        self._update(client_id, processed=1, **({"status": status} if status else {}))

    def _update(self, client_id: str, **values: Any) -> None:
        values["updated_at"] = _now()
        assignments = ", ".join(f"{column} = ?" for column in values)
        with self._guarded():
            self._db.execute(f"UPDATE batches SET {assignments} WHERE client_id = ?", [*values.values(), client_id])
            self._db.commit()

    def abandon(self, batch_id: str) -> BatchRecord:
        """Give up a batch (by remote or client id): its lines go back to pending and a re-run sends them again."""
        found = self._select("SELECT * FROM batches WHERE remote_id = ? OR client_id = ?", (batch_id, batch_id))
        if not found:
            raise KeyError(batch_id)
        if found[0].processed:
            raise ValueError(f"batch {batch_id} was already collected ({found[0].status}); nothing to abandon")
        self.processed(found[0].client_id, ABANDONED)
        return self.record(found[0].client_id)

    def find(self, batch_id: str) -> BatchRecord | None:
        """One batch by its remote or client id, or None."""
        found = self._select("SELECT * FROM batches WHERE remote_id = ? OR client_id = ?", (batch_id, batch_id))
        return found[0] if found else None

    def record(self, client_id: str) -> BatchRecord:
        """One batch by its client id."""
        return self._select("SELECT * FROM batches WHERE client_id = ?", (client_id,))[0]

    def remote_ids(self) -> set[str]:
        """Every remote id this store has recorded (an orphan lookup skips these)."""
        with self._guarded():
            return {r for (r,) in self._db.execute("SELECT remote_id FROM batches WHERE remote_id IS NOT NULL")}

    # --- per-key progress between rounds ------------------------------------------------------------
    def save_progress(self, key: str, progress: Progress) -> None:
        with self._guarded():
            self._db.execute("INSERT OR REPLACE INTO batch_progress VALUES (?, ?, ?, ?, ?, ?)",
                             (key, progress.stage, json.dumps(progress.attempts), progress.last_problem,
                              progress.resends, progress.after))
            self._db.commit()

    def progress(self, keys: list[str]) -> dict[str, Progress]:
        """The saved progress of these keys (those that went through a batch round before)."""
        found: dict[str, Progress] = {}
        with self._guarded():
            for start in range(0, len(keys), 500):
                chunk = keys[start:start + 500]
                rows = self._db.execute(f"SELECT * FROM batch_progress WHERE key IN ({','.join('?' * len(chunk))})",
                                        chunk).fetchall()
                for key, stage, attempts, problem, resends, after in rows:
                    found[key] = Progress(stage=stage, attempts=json.loads(attempts), last_problem=problem,
                                          resends=resends, after=after)
        return found

    def forget_progress(self, key: str) -> None:
        """The key's judgment is stored: its progress is no longer needed."""
        with self._guarded():
            self._db.execute("DELETE FROM batch_progress WHERE key = ?", (key,))
            self._db.commit()

    # --- answers kept for keys the collecting run did not ask for -----------------------------------
    def keep_answers(self, client_id: str, lines: dict[str, dict[str, Any]]) -> None:
        with self._guarded():
            self._db.executemany("INSERT OR REPLACE INTO batch_answers VALUES (?, ?, ?)",
                                 [(key, client_id, json.dumps(line)) for key, line in lines.items()])
            self._db.commit()

    def kept_answers(self, keys: list[str]) -> dict[str, tuple[str, dict[str, Any]]]:
        """key -> (client id of its batch, result line) for the keys that have a kept answer."""
        found: dict[str, tuple[str, dict[str, Any]]] = {}
        with self._guarded():
            for start in range(0, len(keys), 500):
                chunk = keys[start:start + 500]
                for key, client_id, line in self._db.execute(
                        f"SELECT * FROM batch_answers WHERE key IN ({','.join('?' * len(chunk))})", chunk):
                    found[key] = (client_id, json.loads(line))
        return found

    def drop_answer(self, key: str) -> None:
        with self._guarded():
            self._db.execute("DELETE FROM batch_answers WHERE key = ?", (key,))
            self._db.commit()

    def kept_count(self) -> int:
        """How many answers are kept for keys no run has asked for yet (0 in a store from before the table)."""
        with self._guarded():
            try:
                return int(self._db.execute("SELECT COUNT(*) FROM batch_answers").fetchone()[0])
            except sqlite3.OperationalError:
                return 0

    def records(self, *, unprocessed: bool = False) -> list[BatchRecord]:
        """Every batch in creation order (only those still to be polled or processed, when asked)."""
        return self._select("SELECT * FROM batches" + (" WHERE processed = 0" if unprocessed else "") + " ORDER BY rowid")

    def _select(self, query: str, args: tuple[Any, ...] = ()) -> list[BatchRecord]:
        with self._guarded():
            cursor = self._db.execute(query, args)
            names = [d[0] for d in cursor.description]
            rows = cursor.fetchall()
        return [BatchRecord.model_validate({**dict(zip(names, row)), "keys": json.loads(row[names.index("keys")])})
                for row in rows]


def batches_table_exists(path: str | Path) -> bool:
    """Whether a run store file has any batch bookkeeping (read-only check)."""
    from scijudge.run._open import connect_read

    reader = connect_read(Path(path))
    try:
        return reader.db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='batches'").fetchone() is not None
    finally:
        reader.close()


def uncollected(path: str | Path, keys: set[str]) -> tuple[list[tuple[BatchRecord, int]], int]:
    """What the store's batch records hold for these judgment keys, read-only: the batches not yet collected
    that carry some of them (with how many), and how many have an answer kept from a collected batch. A run
    that is not a batch run must not buy these again (``scijudge.run.api``)."""
    if not Path(path).is_file() or not batches_table_exists(path):
        return [], 0
    store = BatchStore(path, read_only=True)
    try:
        found = [(record, n) for record in store.records(unprocessed=True)
                 if (n := sum(key in keys for key in record.keys))]
        kept = len(store.kept_answers(sorted(keys))) if store.kept_count() else 0
    finally:
        store.close()
    return found, kept

