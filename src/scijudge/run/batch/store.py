"""Batch bookkeeping in the run store's SQLite file: every batch and its keys, written before it is created.

The order that makes a kill harmless: ``intend`` (a client id and the keys) is committed before the batch
is created remotely, ``submitted`` records the remote id right after, and a re-run polls every batch not
yet ``processed`` before submitting anything. A batch whose remote id was never recorded is looked up by
the client id sent as batch metadata. Its own table and connection (WAL), so the judgment table is untouched.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import uuid
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
"""
FINAL_STATUSES = frozenset({"completed", "expired", "failed", "cancelled"})


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

    def __init__(self, path: str | Path) -> None:
        self._db = sqlite3.connect(Path(path), check_same_thread=False, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(_SCHEMA)
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def intend(self, *, provider: str, endpoint: str | None, model: str, stage: int, strategy: str,
               temperature: float, keys: list[str], price_basis: str | None) -> str:
        """Record a batch about to be created (status ``intent``); returns its client id."""
        client_id = f"scijudge-{uuid.uuid4().hex}"
        now = _now()
        with self._lock:
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
        with self._lock:
            self._db.execute(f"UPDATE batches SET {assignments} WHERE client_id = ?", [*values.values(), client_id])
            self._db.commit()

    def record(self, client_id: str) -> BatchRecord:
        """One batch by its client id."""
        return self._select("SELECT * FROM batches WHERE client_id = ?", (client_id,))[0]

    def records(self, *, unprocessed: bool = False) -> list[BatchRecord]:
        """Every batch in creation order (only those still to be polled or processed, when asked)."""
        return self._select("SELECT * FROM batches" + (" WHERE processed = 0" if unprocessed else "") + " ORDER BY rowid")

    def _select(self, query: str, args: tuple[Any, ...] = ()) -> list[BatchRecord]:
        with self._lock:
            cursor = self._db.execute(query, args)
            names = [d[0] for d in cursor.description]
            rows = cursor.fetchall()
        return [BatchRecord.model_validate({**dict(zip(names, row)), "keys": json.loads(row[names.index("keys")])})
                for row in rows]


def batches_table_exists(path: str | Path) -> bool:
    """Whether a run store file has any batch bookkeeping (read-only check)."""
    db = sqlite3.connect(f"file:{Path(path)}?mode=ro", uri=True)
    try:
        return db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='batches'").fetchone() is not None
    finally:
        db.close()
