"""The viewer's window on run stores: paged, sorted and filtered SQL over the current judgments of one or more
stores, opened read-only.

The stores are ATTACHed, read-only, to one in-memory SQLite connection (``mode=ro``, and ``immutable`` where no
``-wal`` file lies beside a store, as ``Run`` reads them), so nothing is ever written next to a store: no ``-wal``,
no ``-shm``, no journal. What the items table sorts and filters on (store, row, item, judge, part, model, status,
score, verdict, time, and the spread of scores between models) is copied once into an in-memory key table
(``keys``: about a tenth of a store's bytes; rebuilt when a store file changes), so paging, sorting and filtering
never scan the stores' long columns; a page then reads its 50 rows' text from the stores by rowid. Text search is
the one filter that reads the rationales and reasons from the stores. Labels live in a small in-memory table, so
the human score beside each judgment and the sort by disagreement are SQL too. Nothing here loads a whole store
into memory: every query returns one page, a count or a per-(judge, model) summary, each cached until a store
file changes.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scijudge.errors import InputError
from scijudge.records import JSON_COLUMNS, RUN_COLUMNS
from scijudge.run import ReadConnection, bad_row_sql, check_columns, check_tables, connect_read, unreadable

MAX_STORES = 10
"""SQLite attaches at most 10 databases to one connection (its compile-time default)."""
PAGE_SIZE = 50
SORTS: dict[str, str] = {
    "item": "item_id {dir}, judge, model",
    "judge": "judge {dir}, item_id, model",
    "model": "model {dir}, item_id, judge",
    "status": "status {dir}, item_id, judge",
    "score": "score IS NULL, score {dir}, item_id, judge",
    "human": "human IS NULL, human {dir}, item_id, judge",
    "disagreement": "disagreement IS NULL, disagreement {dir}, item_id, judge",
    "spread": "spread IS NULL, spread {dir}, item_id, judge",
    "created": "created_at {dir}, item_id, judge",
    "stored": "store {dir}, rid {dir}",
}
"""Sort keys of the items table -> ORDER BY (``{dir}`` is ASC or DESC); ties broken so paging is stable."""
_KEYS = ("store", "rid", "item_id", "judge", "part", "model", "status", "score", "verdict", "created_at", "cost",
         "tokens_in", "tokens_out")
"""The columns of the in-memory key table: what the items table sorts and filters on."""
_DETAILS = ("endpoint", "rationale", "reason")
"""What a page reads from the stores for its own rows only."""
_V1_CURRENT = ("CASE WHEN rowid IN (SELECT MAX(rowid) FROM {db}.judgments GROUP BY item_id, judge, part, model) "
               "THEN 1 ELSE 0 END")
_LEGACY = {"endpoint": "''", "input_hash": "''", "decoding": "''"}


@dataclass
class Filters:
    """What the items table shows: every field optional (None: no filter)."""

    judge: str | None = None
    model: str | None = None
    status: str | None = None
    score_min: float | None = None
    score_max: float | None = None
    text: str | None = None
    store: int | None = None
    labelled: bool | None = None

    def where(self) -> tuple[str, list[Any]]:
        clauses: list[str] = []
        args: list[Any] = []
        for column, value in (("judge", self.judge), ("model", self.model), ("status", self.status),
                              ("store", self.store)):
            if value is not None and value != "":
                clauses.append(f"{column} = ?")
                args.append(value)
        if self.score_min is not None:
            clauses.append("score >= ?")
            args.append(self.score_min)
        if self.score_max is not None:
            clauses.append("score <= ?")
            args.append(self.score_max)
        if self.text:
            like = "%" + self.text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            clauses.append("(item_id LIKE ? ESCAPE '\\' OR (store, rid) IN (SELECT store, rid FROM cur WHERE "
                           "rationale LIKE ? ESCAPE '\\' OR reason LIKE ? ESCAPE '\\'))")
            args += [like, like, like]
        if self.labelled is not None:
            clauses.append("human IS NOT NULL" if self.labelled else "human IS NULL")
        return (" WHERE " + " AND ".join(clauses)) if clauses else "", args


@dataclass
class Page:
    """One page of the items table."""

    rows: list[dict[str, Any]]
    total: int
    page: int
    size: int
    pages: int = field(init=False)

    def __post_init__(self) -> None:
        self.pages = max(1, -(-self.total // self.size))


def _damage_as_read(path: Path) -> InputError | None:
    """The error ``Run`` gives reading a damaged store (one line naming every damaged row and the ways on, as
    ``export`` says it), or None when it reads the store whole (only asked once a damaged row was found)."""
    from scijudge.run.store import Run

    try:
        with Run(path, create=False) as run:
            for _row in run.rows(decode=True):
                pass
    except InputError as exc:
        return exc
    return None


class StoreView:
    """Read-only SQL over the current judgments of the given run stores (and the human labels given)."""

    def __init__(self, paths: Sequence[str | Path]) -> None:
        self.paths = [Path(p) for p in paths]
        if not self.paths:
            raise InputError("give at least one run store", field="runs")
        if len(self.paths) > MAX_STORES:
            raise InputError(f"at most {MAX_STORES} run stores at once, got {len(self.paths)}", field="runs")
        self._lock = threading.RLock()
        self._readers: dict[int, ReadConnection] = {}
        self._db = sqlite3.connect("file:scijudge-view?mode=memory", uri=True, check_same_thread=False)
        self._db.execute("PRAGMA temp_store = MEMORY")
        self._db.execute("CREATE TABLE labels (item_id TEXT, judge TEXT, part TEXT, human REAL, n INTEGER, "
                         "PRIMARY KEY (item_id, judge, part))")
        self._attached: tuple[Any, ...] | None = self._version()
        self._open_stores()
        self._built: tuple[Any, ...] | None = None
        self._spread_built: tuple[Any, ...] | None = None
        self._spreading = False
        self._cache: dict[Any, Any] = {}

    def _open_stores(self) -> None:
        """Attach every store as the common reader opens it, and the views over them (``every``, ``cur``)."""
        selects = []
        for at, path in enumerate(self.paths):
            columns = self._attach(at, path)
            if columns is not None:
                selects.append(f"SELECT {at} AS store, rowid AS rid, {columns} FROM s{at}.judgments")
        body = " UNION ALL ".join(selects) if selects else \
            f"SELECT 0 AS store, 0 AS rid, {', '.join('NULL AS ' + c for c in RUN_COLUMNS)} WHERE 0"
        self._db.execute("DROP VIEW IF EXISTS cur")
        self._db.execute("DROP VIEW IF EXISTS every")
        self._db.execute(f"CREATE TEMP VIEW every AS {body}")
        self._db.execute("CREATE TEMP VIEW cur AS SELECT * FROM every WHERE current = 1")

    def _close_stores(self) -> None:
        for at in list(self._readers):
            with suppress(sqlite3.Error):
                self._db.execute(f"DETACH DATABASE s{at}")
            self._readers.pop(at).close()

    def _version(self) -> tuple[Any, ...]:
        """What changes when a store is written or replaced: each file's and its ``-wal``'s identity, size and
        modification time."""
        found: list[Any] = []
        for path in self.paths:
            for file in (path, path.with_name(path.name + "-wal")):
                try:
                    stat = file.stat()
                    found.append((stat.st_ino, stat.st_mtime_ns, stat.st_size))
                except OSError:
                    found.append(None)
        return tuple(found)

    def _fresh(self) -> None:
        """When a store changed since it was attached: attach it again as the reader opens it now (a writer that
        started since makes a store read through its WAL; one that ended, from its file), and build the key table
        (and drop every cached answer). No read transaction is held between calls: writers checkpoint freely."""
        with self._lock:
            version = self._version()
            if version == self._built:
                return
            if version != self._attached:
                self._close_stores()
                self._attached = None  # until every store is attached again
                self._open_stores()
                self._attached = version
            self._build(version)

    def _spreads_quietly(self) -> None:
        try:
            self._by_item()  # the item pages' index, then the spreads
            self._spreads()
        except Exception:  # closed meanwhile: a look-up by item or a sort by spread builds them itself
            pass
        finally:
            self._spreading = False

    def _build(self, version: tuple[Any, ...]) -> None:
        with self._reading() as db, db:
            db.execute("DROP VIEW IF EXISTS listed")
            db.execute("DROP VIEW IF EXISTS spread_listed")
            db.execute("DROP TABLE IF EXISTS main.keys")
            db.execute("DROP TABLE IF EXISTS main.spreads")
            db.execute(f"CREATE TABLE main.keys AS SELECT {', '.join(_KEYS)} FROM cur")
            db.execute("CREATE INDEX main.keys_stored ON keys(store, rid)")
            bad = db.execute(f"SELECT {', '.join(_KEYS)} FROM main.keys WHERE {bad_row_sql(_KEYS)} LIMIT 1").fetchall()
            if bad:  # a damaged row is refused as every reader refuses it, naming its store and every damaged row
                damaged = self.paths[bad[0][0]]
                found = _damage_as_read(damaged)
                if found is not None:
                    raise found
                check_columns(_KEYS, list(zip(*bad)), bad, damaged)
            db.execute("CREATE TEMP VIEW listed AS SELECT k.*, l.human, l.n AS n_labels, "
                       "ABS(k.score - l.human) AS disagreement FROM main.keys k LEFT JOIN main.labels l "
                       "ON l.item_id = k.item_id AND l.judge = k.judge AND l.part = k.part")
        self._built = version
        self._cache.clear()

    def _by_item(self) -> None:
        """The key table, fresh and indexed by item (built at the first look-up by item: a runs or items page
        never needs it)."""
        self._fresh()
        with self._reading() as db:
            db.execute("CREATE INDEX IF NOT EXISTS main.keys_item ON keys(item_id)")

    def cached(self, key: Any) -> bool:
        """Whether the answer named ``key`` is computed for the stores as they are now."""
        return self._built == self._version() and key in self._cache

    def _cached(self, key: Any, compute: Any) -> Any:
        self._fresh()
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]

    def _attach(self, at: int, path: Path) -> str | None:
        """Attach one store read-only as ``s{at}``, as ``Run`` opens it (``connect_read``: through its WAL, or from
        a private copy where the WAL cannot be read in place); the SQL of its ``RUN_COLUMNS`` (None: no judgment
        table). What ``Run`` refuses (not a store, another program's file, a newer schema) is refused here in the
        same words."""
        from scijudge.run.store import Run

        with Run(path, create=False):
            pass
        try:
            reader = connect_read(path)
        except sqlite3.Error as exc:
            raise InputError(f"cannot open the run store ({exc})", file=path) from None
        reader.db.close()  # its URI is attached below; its private copy, if any, lives until the store is detached
        self._readers[at] = reader
        try:
            self._db.execute(f"ATTACH DATABASE ? AS s{at}", (reader.uri,))
            existing = [r[1] for r in self._db.execute(f"PRAGMA s{at}.table_info(judgments)")]
            tables = {r[0] for r in self._db.execute(f"SELECT name FROM s{at}.sqlite_master WHERE type = 'table'")}
        except sqlite3.DatabaseError as exc:
            raise unreadable(exc, path) from None
        check_tables(tables, path, allow_none=False)  # another program's SQLite file is not an empty store
        if not existing:
            return None
        missing = [c for c in RUN_COLUMNS if c not in existing and c not in _LEGACY and c != "current"]
        if missing:
            raise InputError(f"not a scijudge run store (no column {missing[0]!r})", file=path)
        parts = []
        for column in RUN_COLUMNS:
            if column in existing:
                parts.append(column)
            elif column == "current":
                parts.append(_V1_CURRENT.format(db=f"s{at}") + " AS current")
            else:
                parts.append(f"{_LEGACY[column]} AS {column}")
        return ", ".join(parts)

    def close(self) -> None:
        with self._lock:
            self._close_stores()
            self._db.close()

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                yield self._db
            except sqlite3.DatabaseError as exc:
                damaged = self._damaged()
                if damaged is not None:  # name the store, as every other reader does
                    raise unreadable(exc, damaged) from None
                raise InputError(f"cannot read the run stores ({exc})") from None

    def _damaged(self) -> Path | None:
        """The first attached store SQLite's quick_check finds damaged (run only after a read failed)."""
        for at, path in enumerate(self.paths):
            try:
                found = self._db.execute(f"PRAGMA s{at}.quick_check(1)").fetchall()
            except sqlite3.DatabaseError:
                return path
            if found != [("ok",)]:
                return path
        return None

    def _all(self, sql: str, args: Sequence[Any] = ()) -> list[dict[str, Any]]:
        with self._reading() as db:
            cursor = db.execute(sql, list(args))
            names = [d[0] for d in cursor.description]
            return [dict(zip(names, row)) for row in cursor.fetchall()]

    # --- labels ----------------------------------------------------------------------------------
    def set_labels(self, scores: dict[tuple[str, str, str], list[float]]) -> None:
        """Replace the human scores shown beside the judgments: (item, judge, part) -> the labels' scores."""
        rows = [(i, j, p, sum(v) / len(v), len(v)) for (i, j, p), v in scores.items() if v]
        with self._reading() as db, db:
            db.execute("DELETE FROM labels")
            db.executemany("INSERT INTO labels VALUES (?, ?, ?, ?, ?)", rows)
        for key in [k for k in self._cache if isinstance(k, tuple) and k[0] == "count"]:  # counts may filter on labels
            del self._cache[key]

    # --- the pages -------------------------------------------------------------------------------
    def summary(self) -> list[dict[str, Any]]:
        """Per store, judge and model: judgments ok / abstained, items not judged yet (pending: items another
        judge of the stores has), cost, tokens and the first and last judgment times."""
        return [dict(r) for r in self._cached("summary", self._summary)]

    def _summary(self) -> list[dict[str, Any]]:
        rows = self._all(
            "SELECT store, judge, model, SUM(status = 'ok') AS ok, SUM(status = 'abstained') AS abstained, "
            "COUNT(DISTINCT item_id) AS items, SUM(cost) AS cost, SUM(tokens_in) AS tokens_in, "
            "SUM(tokens_out) AS tokens_out, MIN(created_at) AS first_at, MAX(created_at) AS last_at "
            "FROM main.keys GROUP BY store, judge, model ORDER BY store, judge, model")
        items = {r["store"]: r["n"] for r in self._all(
            "SELECT store, COUNT(DISTINCT item_id) AS n FROM main.keys GROUP BY store")}
        for row in rows:
            row["pending"] = items.get(row["store"], 0) - row.pop("items")
        return rows

    def choices(self) -> dict[str, list[Any]]:
        """The values the filters offer: judges, models, statuses."""
        return self._cached("choices", lambda: {
            name: [r["v"] for r in self._all(f"SELECT DISTINCT {name} AS v FROM main.keys ORDER BY v")]
            for name in ("judge", "model", "status")})

    def page(self, filters: Filters, *, sort: str = "stored", descending: bool = False, page: int = 1,
             size: int = PAGE_SIZE) -> Page:
        """One page of current judgments, filtered and sorted in SQL (``SORTS``)."""
        if sort not in SORTS:
            raise InputError(f"unknown sort {sort!r}: use {', '.join(SORTS)}", field="sort")
        where, args = filters.where()
        order = SORTS[sort].format(dir="DESC" if descending else "ASC")
        self._fresh()
        source = self._spreads() if sort == "spread" else "listed"
        total = self._cached(("count", where, tuple(args)), lambda: int(self._all(
            f"SELECT COUNT(*) AS n FROM listed{where}", args)[0]["n"]))
        page = max(1, page)
        # the page's rows first (the sorter holds two integers per row), then their columns
        found = self._all(f"SELECT store, rid FROM {source}{where} ORDER BY {order} LIMIT ? OFFSET ?",
                          [*args, size, (page - 1) * size])
        rows = []
        if found:
            wanted = ", ".join("(?, ?)" for _ in found)
            full = {(r["store"], r["rid"]): r for r in self._all(
                f"SELECT * FROM {source} WHERE (store, rid) IN (VALUES {wanted})",
                [v for r in found for v in (r["store"], r["rid"])])}
            rows = [full[(r["store"], r["rid"])] for r in found]
        self._details(rows)
        if self._spread_built != self._built and not self._spreading:
            # the spreads between models, for a sort by spread, built in the background after this first page: a
            # page waits for them only if it comes within the next few tenths of a second
            self._spreading = True
            threading.Thread(target=self._spreads_quietly, daemon=True).start()
        return Page(rows=rows, total=total, page=page, size=size)

    def _spreads(self) -> str:
        """The view of ``listed`` with each unit's spread of scores between models (max - min), built when a sort
        by spread asks for it or, in the background, after the key table is built."""
        with self._lock:
            if self._spread_built == self._built:
                return "spread_listed"
            with self._reading() as db, db:
                db.execute("DROP VIEW IF EXISTS spread_listed")
                db.execute("DROP TABLE IF EXISTS main.spreads")
                db.execute("CREATE TABLE main.spreads AS SELECT item_id, judge, part, MAX(score) - MIN(score) AS "
                           "spread FROM main.keys GROUP BY item_id, judge, part")
                db.execute("CREATE UNIQUE INDEX main.spreads_unit ON spreads(item_id, judge, part)")
                db.execute("CREATE TEMP VIEW spread_listed AS SELECT k.*, s.spread FROM listed k LEFT JOIN "
                           "main.spreads s ON s.item_id = k.item_id AND s.judge = k.judge AND s.part = k.part")
            self._spread_built = self._built
        return "spread_listed"

    def _details(self, rows: list[dict[str, Any]]) -> None:
        """Add each row's ``_DETAILS`` from its store, by rowid."""
        found = {(r["store"], r["rid"]): r for r in self._by_rowid(rows, ", ".join(_DETAILS))}
        for row in rows:
            row.update({k: v for k, v in found.get((row["store"], row["rid"]), {}).items() if k not in ("store", "rid")})

    def _by_rowid(self, keys: Sequence[dict[str, Any]], columns: str) -> list[dict[str, Any]]:
        """``columns`` of the stored rows named by (store, rid), in the order given (each store read by rowid)."""
        by_store: dict[int, list[int]] = {}
        for key in keys:
            by_store.setdefault(key["store"], []).append(key["rid"])
        found: dict[tuple[int, int], dict[str, Any]] = {}
        for store, rids in by_store.items():
            marks = ", ".join("?" for _ in rids)
            for row in self._all(f"SELECT store, rid, {columns} FROM every WHERE store = ? AND rid IN ({marks})",
                                 [store, *rids]):
                found[(row["store"], row["rid"])] = row
        return [found[(k["store"], k["rid"])] for k in keys if (k["store"], k["rid"]) in found]

    def neighbours(self, item_id: str, filters: Filters, *, sort: str = "stored",
                   descending: bool = False) -> tuple[str | None, str | None]:
        """The items before and after ``item_id`` in the items table's order under ``filters`` (each item once, at
        its first row); (None, None) when it is not in that selection."""
        if sort not in SORTS:
            sort = "stored"
        where, args = filters.where()
        self._fresh()
        source = self._spreads() if sort == "spread" else "listed"
        order = SORTS[sort].format(dir="DESC" if descending else "ASC")
        ids: dict[str, int] = self._cached(("order", source, where, tuple(args), order), lambda: {
            item: at for at, item in enumerate(dict.fromkeys(r["item_id"] for r in self._all(
                f"SELECT item_id FROM {source}{where} ORDER BY {order}", args)))})  # stepping on costs nothing
        if item_id not in ids:
            return None, None
        at = ids[item_id]
        order_ids = list(ids)
        return (order_ids[at - 1] if at > 0 else None), (order_ids[at + 1] if at + 1 < len(ids) else None)

    def item(self, item_id: str) -> list[dict[str, Any]]:
        """Every current judgment of one item in every store, JSON columns decoded: found in the key table, then
        read from the stores by rowid (as every reader reads a store: a damaged index of a store is never used)."""
        self._by_item()
        keys = self._all("SELECT store, rid FROM main.keys WHERE item_id = ? ORDER BY judge, part, model, store",
                         [item_id])
        rows = self._by_rowid(keys, "*")
        for row in rows:
            for column in JSON_COLUMNS:
                text = row.get(column)
                try:
                    row[column] = json.loads(text) if isinstance(text, str) else None
                except ValueError:
                    row[column] = None
                    row.setdefault("unreadable", []).append(column)
        return rows

    def units(self, *, judges: Sequence[str] | None = None, leave_out: set[tuple[str, str, str]] | None = None,
              limit: int | None = None) -> list[tuple[str, str, str]]:
        """The (item, judge, part) units with a current judgment, in the order first stored, without those in
        ``leave_out``; the first ``limit`` of them (the rows are read in order and the reading stops there)."""
        self._fresh()
        where, args = "", list(judges or [])
        if judges:
            where = f" WHERE judge IN ({', '.join('?' for _ in judges)})"
        leave_out = leave_out or set()
        found: list[tuple[str, str, str]] = []
        seen: set[tuple[str, str, str]] = set()
        with self._reading() as db:
            cursor = db.execute(f"SELECT item_id, judge, part FROM main.keys{where} ORDER BY store, rid", args)
            try:
                while limit is None or len(found) < limit:
                    rows = cursor.fetchmany(1000)
                    if not rows:
                        break
                    for row in rows:
                        unit = (str(row[0]), str(row[1]), str(row[2]))
                        if unit not in seen:
                            seen.add(unit)
                            if unit not in leave_out:
                                found.append(unit)
                                if limit is not None and len(found) >= limit:
                                    break
            finally:
                cursor.close()
        return found

    def judges_of(self, item_id: str) -> list[tuple[str, str]]:
        """The (judge, part) pairs judged on one item."""
        self._by_item()
        return [(r["judge"], r["part"]) for r in self._all(
            "SELECT DISTINCT judge, part FROM main.keys WHERE item_id = ? ORDER BY judge, part", [item_id])]

    def scale_rows(self) -> list[dict[str, Any]]:
        """(judge, family, spec_hash, decoding) of the current judgments: what scales are resolved from."""
        return self._all("SELECT DISTINCT judge, family, spec_hash, decoding FROM cur")

    def items_judged(self) -> dict[int, int]:
        """Per store, the distinct items with a current judgment."""
        return dict(self._cached("items_judged", lambda: {r["store"]: r["n"] for r in self._all(
            "SELECT store, COUNT(DISTINCT item_id) AS n FROM main.keys GROUP BY store")}))

    def scores(self) -> dict[tuple[int, str, str], list[float]]:
        """The scores of the ok current judgments per (store, judge, model), perturbed variants left out (as
        calibrate and estimate leave them out): what the runs page's means are computed from."""
        def compute() -> dict[tuple[int, str, str], list[float]]:
            from scijudge.vocab import VARIANT_ID

            found: dict[tuple[int, str, str], list[float]] = {}
            ok = "FROM main.keys WHERE status = 'ok' AND score IS NOT NULL"
            like = "(item_id GLOB '*::*::subtle' OR item_id GLOB '*::*::extreme')"  # every VARIANT_ID matches
            with self._reading() as db:
                rows = db.execute(f"SELECT store, judge, model, score {ok} AND NOT {like} ORDER BY store, rid").fetchall()
                rows += [r[:3] + r[4:] for r in db.execute(
                    f"SELECT store, judge, model, item_id, score {ok} AND {like} ORDER BY store, rid")
                    if not VARIANT_ID.match(r[3])]
            for store, judge, model, score in rows:
                found.setdefault((store, judge, model), []).append(float(score))
            return found

        return dict(self._cached("scores", compute))

    def matrix(self, judge: str) -> tuple[list[str], list[dict[str, Any]]]:
        """One judge's current judgments as units x models: (the models, one row per (item, part) with each
        model's score and status, the spread between the models' scores (the items table's ``spread``), the
        human score and the mean |model - human| over the models)."""
        self._fresh()
        self._spreads()
        rows = self._all(
            "SELECT k.item_id, k.part, k.model, k.score, k.status, s.spread, l.human FROM main.keys k "
            "LEFT JOIN main.spreads s ON s.item_id = k.item_id AND s.judge = k.judge AND s.part = k.part "
            "LEFT JOIN main.labels l ON l.item_id = k.item_id AND l.judge = k.judge AND l.part = k.part "
            "WHERE k.judge = ? ORDER BY k.store, k.rid", [judge])
        models = sorted({r["model"] for r in rows})
        units: dict[tuple[str, str], dict[str, Any]] = {}
        for r in rows:
            unit = units.setdefault((r["item_id"], r["part"]), {"item_id": r["item_id"], "part": r["part"],
                                                                "cells": {}, "spread": r["spread"],
                                                                "human": r["human"]})
            unit["cells"][r["model"]] = (r["score"], r["status"])
        for unit in units.values():
            gaps = [abs(score - unit["human"]) for score, _ in unit["cells"].values()
                    if score is not None and unit["human"] is not None]
            unit["human_gap"] = sum(gaps) / len(gaps) if gaps else None
        return models, list(units.values())

    def meta(self) -> list[dict[str, Any]]:
        """Each store's meta table (run-level facts) as decoded values."""
        found = []
        for at in range(len(self.paths)):
            try:
                rows = self._all(f"SELECT key, value FROM s{at}.meta")
            except InputError:
                rows = []
            values: dict[str, Any] = {}
            for row in rows:
                try:
                    values[row["key"]] = json.loads(row["value"]) if row["value"] is not None else None
                except ValueError:
                    values[row["key"]] = row["value"]
            found.append(values)
        return found

