"""The run store's schema: its tables, the migration of stores written by earlier releases, the store's id, and the
frame a reader builds from fetched rows (kept here so that ``store`` stays one module of the file's lifecycle)."""

from __future__ import annotations

import json
import secrets
import sqlite3
from pathlib import Path
from typing import Any

from scijudge._bulk import text_array
from scijudge.errors import InputError
from scijudge.records import COLUMN_SQL, safe_endpoint
from scijudge.run._open import check_columns, decoded, store_id

SCHEMA_VERSION = 2
GROUP_INDEX = "CREATE INDEX IF NOT EXISTS judgments_group ON judgments(item_id, judge, part, model, endpoint, current)"
SCHEMA_SQL = f"""
CREATE TABLE IF NOT EXISTS judgments ({", ".join(f"{name} {sql}" for name, sql in COLUMN_SQL.items())});
DROP INDEX IF EXISTS judgments_item;
{GROUP_INDEX};
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
"""
# judgments_item (item_id, judge), written by earlier releases, is a prefix of judgments_group: every look-up it
# served, judgments_group serves, and keeping it cost a fifth of each insert.
ADDED_IN_V2 = {name: COLUMN_SQL[name] for name in ("endpoint", "input_hash", "decoding", "current")}
V1_CURRENT = ("CASE WHEN rowid IN (SELECT MAX(rowid) FROM judgments GROUP BY item_id, judge, part, model) "
               "THEN 1 ELSE 0 END")


def migrate(db: sqlite3.Connection, path: Path) -> int:
    """Bring a store written by an earlier release up to this schema (columns added, history marked); its id, given
    one (and checkpointed into the file) where it had none."""
    existing = [r[1] for r in db.execute("PRAGMA table_info(judgments)")]
    if existing:
        row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() \
            if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchone() else None
        version = json.loads(row[0]) if row and row[0] else None
        if isinstance(version, int) and version > SCHEMA_VERSION:
            raise InputError(f"run store has schema version {version}, newer than the version {SCHEMA_VERSION} "
                             "this scijudge writes; upgrade scijudge", file=path)
        missing = {c: d for c, d in ADDED_IN_V2.items() if c not in existing}
        if missing:
            with db:
                for column, decl in missing.items():
                    db.execute(f"ALTER TABLE judgments ADD COLUMN {column} {decl}")
                db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
                row = db.execute("SELECT value FROM meta WHERE key = 'api_base'").fetchone()
                endpoint = safe_endpoint(json.loads(row[0])) if row and row[0] else ""
                # Rows of v1 had no endpoint: the store's recorded api_base is the best evidence there is.
                db.execute("UPDATE judgments SET endpoint = ?", (endpoint,))
                db.execute(f"UPDATE judgments SET current = {V1_CURRENT}")
    ident = store_id(db)
    fresh = not ident
    if fresh:
        ident = secrets.randbelow(2**31 - 1) + 1
    with db:
        db.executescript(SCHEMA_SQL)
        db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
                         (json.dumps(SCHEMA_VERSION),))
        db.execute(f"PRAGMA user_version = {ident}")
    if fresh:  # the id into the file itself now, so that a WAL of another store can be told apart from its own
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    return ident


def frame_of(fetched: list[Any], names: list[str], json_columns: list[str], path: Path) -> Any:
    """The frame of the fetched rows, built a column at a time: text columns by pyarrow (``text_array``), JSON
    columns decoded (``_decoded``), every other column inferred by pandas as ``DataFrame.from_records`` infers
    it (which is what the whole frame was built by before: the same dtypes and values)."""
    import pandas as pd

    if not fetched:
        return pd.DataFrame.from_records(fetched, columns=names, coerce_float=True)
    values = list(zip(*fetched))
    check_columns(names, values, fetched, path)  # a damaged row: refused in one line naming it
    built: dict[str, Any] = {column: decoded(values[names.index(column)], column, path) for column in json_columns}
    for at, name in enumerate(names):
        if name not in built and (array := text_array(values[at])) is not None:
            built[name] = array
    rest = [name for name in names if name not in built]
    index = pd.RangeIndex(len(fetched))
    inferred = pd.DataFrame.from_records(list(zip(*(values[names.index(n)] for n in rest))), columns=rest,
                                         coerce_float=True) if rest else pd.DataFrame(index=index)
    frame = pd.DataFrame({name: built[name] if name in built else inferred[name] for name in names}, index=index)
    if "current" in names:
        frame["current"] = frame["current"].astype(bool)
    return frame
