"""The run store: a SQLite file where every judgment is written the moment it completes.

WAL journaling with a commit per judgment means a process killed with SIGKILL loses nothing that
completed, and a re-run reads the completed keys and skips them. The store never knows which judge
family produced a row: families contribute score/verdict/confidence through ``RunFields``.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from scijudge.errors import InputError
from scijudge.judges.base import JudgeResult, judgment_key
from scijudge.redaction import redact, redact_data

_COLUMNS = [
    "key", "item_id", "judge", "part", "family", "spec_hash", "model", "status", "score", "verdict",
    "confidence", "probs", "result", "rationale", "reason", "attempts", "tokens_in", "tokens_out", "cost",
    "latency_s", "created_at",
]
_JSON_COLUMNS = ("probs", "result", "attempts")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS judgments (
    key TEXT PRIMARY KEY, item_id TEXT NOT NULL, judge TEXT NOT NULL, part TEXT NOT NULL DEFAULT '',
    family TEXT NOT NULL, spec_hash TEXT NOT NULL, model TEXT NOT NULL, status TEXT NOT NULL,
    score REAL, verdict TEXT, confidence REAL, probs TEXT, result TEXT, rationale TEXT, reason TEXT,
    attempts TEXT, tokens_in INTEGER, tokens_out INTEGER, cost REAL, latency_s REAL, created_at TEXT
);
CREATE INDEX IF NOT EXISTS judgments_item ON judgments(item_id, judge);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
"""


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
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
        except (sqlite3.DatabaseError, sqlite3.OperationalError) as exc:
            raise InputError(f"not a scijudge run store ({exc})", file=self.path) from None
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> "Run":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- writing -----------------------------------------------------------------------------
    def record(self, result: JudgeResult) -> None:
        """Persist one judgment now (replacing an earlier row with the same key, e.g. a retried abstention)."""
        self.record_dump(result.model_dump(mode="json"))

    def record_dump(self, data: dict[str, Any]) -> None:
        """Persist a judgment given as ``JudgeResult.model_dump(mode="json")`` (from a worker process)."""
        row = _row(_redacted(data))
        placeholders = ", ".join("?" for _ in _COLUMNS)
        with self._lock:
            self._db.execute(f"INSERT OR REPLACE INTO judgments ({', '.join(_COLUMNS)}) VALUES ({placeholders})",
                             [row[c] for c in _COLUMNS])
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

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM judgments").fetchone()[0]

    def rows(self) -> Iterator[dict[str, Any]]:
        """Every judgment as a plain dict with JSON columns decoded, in insertion order."""
        try:
            with self._lock:
                fetched = self._db.execute(f"SELECT {', '.join(_COLUMNS)} FROM judgments ORDER BY rowid").fetchall()
        except sqlite3.DatabaseError as exc:
            raise InputError(f"corrupt run store ({exc})", file=self.path) from None
        for values in fetched:
            row = dict(zip(_COLUMNS, values))
            for column in _JSON_COLUMNS:
                try:
                    row[column] = json.loads(row[column]) if row[column] is not None else None
                except (ValueError, TypeError, RecursionError):
                    raise InputError(f"corrupt run store: unreadable {column} in the row of item {row['item_id']!r}",
                                     file=self.path, field=column) from None
            yield row

    def results(self) -> list[JudgeResult]:
        """Every judgment as a typed JudgeResult."""
        return [JudgeResult.model_validate({k: v for k, v in r.items() if k != "key"}) for r in self.rows()]

    def to_pandas(self) -> Any:
        """One row per judgment (columns as documented in the run-store contract)."""
        import pandas as pd

        return pd.DataFrame(list(self.rows()), columns=_COLUMNS)

    def export(self, out: str | Path, fmt: str = "jsonl") -> int:
        """Write every judgment to JSONL or CSV; returns the number of rows written."""
        out = Path(out)
        rows = [redact_data(row) for row in self.rows()]  # stores written before redaction existed
        if fmt == "jsonl":
            with out.open("w", encoding="utf-8") as handle:
                for row in rows:
                    handle.write(json.dumps(row, ensure_ascii=False) + "\n")
        elif fmt == "csv":
            import pandas as pd

            frame = pd.DataFrame(rows, columns=_COLUMNS)
            for column in _JSON_COLUMNS:
                frame[column] = frame[column].map(lambda v: json.dumps(v) if v is not None else "")
            frame.to_csv(out, index=False)
        else:
            raise InputError(f"unknown export format {fmt!r}: use jsonl or csv", field="format")
        return len(rows)


def _redacted(data: dict[str, Any]) -> dict[str, Any]:
    """Errors a provider returned may echo credentials: redact the reason and each attempt's error."""
    if data.get("reason") is None and not any(a.get("error") for a in data.get("attempts") or ()):
        return data
    data = dict(data, reason=redact(data.get("reason")))
    data["attempts"] = [dict(a, error=redact(a.get("error"))) for a in data.get("attempts") or ()]
    return data


def _row(dump: dict[str, Any]) -> dict[str, Any]:
    data = dict(dump)
    data["key"] = judgment_key(data["item_id"], data["judge"], data["part"], data["spec_hash"], data["model"])
    for column in _JSON_COLUMNS:
        data[column] = json.dumps(data[column]) if data[column] is not None else None
    return data
