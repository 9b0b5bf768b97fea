"""Opening a run store file safely: for reading without creating or changing a file, and checks of what is in it.

- ``check_header``: an existing store is an SQLite file (a cheap look at its first bytes): an empty file, a JSONL
  file, a file of another format is not a store, in one line naming it.
- ``connect_read``: a read-only connection that creates no file beside the store and reads every committed
  judgment, the ones still in a killed writer's ``-wal`` file included. Where SQLite cannot read the WAL in place
  without creating its ``-shm`` file (a read-only file system, a store copied without its ``-shm``), the store and
  its WAL are copied to a private temporary folder and read there (``immutable=1`` would silently ignore the WAL).
- ``check_owner``: each store carries a random id in its file's header (``PRAGMA user_version``, stamped by every
  write transaction, so every page-1 frame of its WAL carries it too); a ``-wal`` whose pages carry another id
  (another store's killed writer, then this file restored or copied over it) is refused in one line before
  anything is read from it or written, instead of being replayed into this store.
- ``check_tables``: a SQLite file of another program is not a store; ``quick_check``: SQLite's own check of the
  file's structure, run when a store is opened to write (a damaged store is never resumed as if it were whole).
- ``check_columns`` / ``check_row``: what a stored row must be (text where the schema says text, a status of
  ``ok`` or ``abstained``, numbers where numbers): readers refuse a damaged row in one line naming it. Checked in
  Python, a column of fetched values at a time: a type-check column in the query itself cost a fifth of a read.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from scijudge.errors import DamagedRow, InputError
from scijudge.records import RUN_COLUMNS
from scijudge.run._orjson import loads_each

SQLITE_HEADER = b"SQLite format 3\x00"
STORE_TABLES = frozenset({"judgments", "meta", "batches"})  # a file with none of these is not a run store
STATUSES = ("ok", "abstained")
_TEXT = ("key", "item_id", "judge", "part", "family", "spec_hash", "model", "endpoint", "input_hash", "decoding",
         "status")
_NUMBER = ("score", "confidence", "cost", "latency_s")
_INTEGER = ("tokens_in", "tokens_out")
_TEXT_OR_NULL = ("verdict", "probs", "result", "rationale", "reason", "attempts", "created_at")
_SQL_TYPES = {**{c: ("text",) for c in _TEXT}, **{c: ("real", "integer", "null") for c in _NUMBER},
              **{c: ("integer", "null") for c in _INTEGER}, **{c: ("text", "null") for c in _TEXT_OR_NULL},
              "current": ("integer",)}
_PY_TYPES: dict[str, tuple[type, ...]] = {
    **{c: (str,) for c in _TEXT}, **{c: (float, int, type(None)) for c in _NUMBER},
    **{c: (int, type(None)) for c in _INTEGER}, **{c: (str, type(None)) for c in _TEXT_OR_NULL},
    "current": (int,)}
_PY_TYPE_SETS = {name: frozenset(types) for name, types in _PY_TYPES.items()}
_STATUS_SET = frozenset(STATUSES)
_EXPECTED = {("text",): "text", ("real", "integer", "null"): "a number or empty", ("integer", "null"):
             "an integer or empty", ("text", "null"): "text or empty", ("integer",): "0 or 1"}


def check_header(path: Path, *, allow_empty: bool = False) -> bool:
    """Whether ``path`` is an SQLite file; False for an empty file where ``allow_empty`` (a file to write a new
    store into). Anything else is refused in one line naming the file."""
    try:
        with path.open("rb") as handle:
            head = handle.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise InputError(f"cannot read the run store ({exc.strerror or exc})", file=path) from None
    if not head:
        if allow_empty:
            return False
        raise InputError("not a scijudge run store (an empty file)", file=path)
    if head != SQLITE_HEADER:
        raise InputError("not a scijudge run store (not an SQLite file: "
                         f"{_kind(head)})", file=path)
    return True


def _kind(head: bytes) -> str:
    stripped = head.lstrip()
    if stripped[:1] in (b"{", b"["):
        return "it looks like JSON or JSONL"
    if b"\x00" not in head and all(32 <= b < 127 or b in (9, 10, 13) for b in head):
        return "it looks like text"
    return "it starts with other bytes"


class ReadConnection:
    """A read-only connection to a store and the private copy it reads, if any (removed on ``close``); ``uri`` is
    what it opened (a reader that ATTACHes the store elsewhere opens the same)."""

    def __init__(self, db: sqlite3.Connection, copy: tempfile.TemporaryDirectory[str] | None, uri: str = "") -> None:
        self.db, self._copy, self.uri = db, copy, uri

    def close(self) -> None:
        self.db.close()
        if self._copy is not None:
            self._copy.cleanup()
            self._copy = None


def connect_read(path: Path) -> ReadConnection:
    """A read-only connection that creates no file beside ``path`` and sees every committed row (see the module
    docstring). Errors are one line naming the store."""
    uri = path.resolve().as_uri()
    wal = path.with_name(path.name + "-wal")
    shm = path.with_name(path.name + "-shm")
    wal_size = wal.stat().st_size if wal.exists() else 0
    if not wal.exists() or (wal_size == 0 and not shm.exists()):
        # the file is all there is (its last writer closed it, or nothing was ever written to the WAL)
        return ReadConnection(_open(f"{uri}?mode=ro&immutable=1", path), None, f"{uri}?mode=ro&immutable=1")
    if shm.exists():  # a writer may be active: read through its WAL and shared memory, in place
        try:
            db = _open(f"{uri}?mode=ro", path)
        except sqlite3.OperationalError:  # the shared memory cannot be used here (a read-only file system)
            if wal_size == 0:
                return ReadConnection(_open(f"{uri}?mode=ro&immutable=1", path), None, f"{uri}?mode=ro&immutable=1")
        else:
            return _owned(ReadConnection(db, None, f"{uri}?mode=ro"), path, path)
    return _private_copy(path, wal)


def store_id(db: sqlite3.Connection, schema: str = "main") -> int:
    """The store's id as this connection sees it (0: a store written before ids, or not yet given one)."""
    return int(db.execute(f"PRAGMA {schema}.user_version").fetchone()[0])


def check_owner(db: sqlite3.Connection, main: Path, path: Path, schema: str = "main") -> None:
    """Refuse a WAL that belongs to another store: the id in ``main``'s own header (read with ``immutable=1``,
    which ignores the WAL) against the id ``db`` sees through the WAL (of its attached ``schema``). A file without
    an id (an older store, or a new one whose id is still only in its WAL) cannot be told apart: read as before."""
    head = sqlite3.connect(f"{main.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
    try:
        own = store_id(head)
    except sqlite3.DatabaseError:
        return  # an unreadable header: quick_check and the readers say what is wrong with it
    finally:
        head.close()
    seen = store_id(db, schema)
    if own and seen != own:
        wal = path.name + "-wal"
        raise InputError(f"the file {wal} beside this run store belongs to another store (its pages carry store id "
                         f"{seen or 'none'}, the store's file has {own}): it was left by another store's writer, or "
                         f"the file was replaced while its WAL stayed; nothing was read, judged or written: move {wal} "
                         f"and {path.name}-shm aside to use the store as its file holds it", file=path)


def _owned(reader: ReadConnection, main: Path, path: Path) -> ReadConnection:
    """``reader`` once ``check_owner`` passed (closed when it does not)."""
    try:
        check_owner(reader.db, main, path)
    except BaseException:
        reader.close()
        raise
    return reader


def _private_copy(path: Path, wal: Path) -> ReadConnection:
    """Read ``path`` with its WAL from a private copy: SQLite reads a WAL only beside its ``-shm`` file, which it
    cannot create here (or must not: reading never adds files beside a store)."""
    folder = tempfile.TemporaryDirectory(prefix="scijudge-store-")
    try:
        copy = Path(folder.name) / "run.sqlite"
        shutil.copyfile(path, copy)
        shutil.copyfile(wal, copy.with_name(copy.name + "-wal"))
        copied = f"{copy.resolve().as_uri()}?mode=ro"
        reader = ReadConnection(_open(copied, path), folder, copied)
    except OSError as exc:
        folder.cleanup()
        raise InputError(f"cannot read the judgments in {wal.name} (a copy of the store and its WAL to "
                         f"{tempfile.gettempdir()} failed: {exc.strerror or exc}); open the store where it can be "
                         "written once, or copy it with its -wal file to a writable folder", file=path) from None
    except BaseException:
        folder.cleanup()
        raise
    return _owned(reader, copy, path)


def _open(uri: str, path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=30)
    try:
        db.execute("SELECT name FROM sqlite_master LIMIT 1").fetchall()
    except sqlite3.OperationalError:
        db.close()
        raise
    except sqlite3.DatabaseError as exc:
        db.close()
        raise unreadable(exc, path) from None
    return db


RECOVER_HINT = "judge into a new --run, or recover what is readable with `sqlite3 {path} .recover`"


def unreadable(exc: Exception, path: Path) -> InputError:
    """An SQLite error reading a file that starts like an SQLite file: "damaged" (with the way to recover) where
    SQLite finds it malformed, else not a run store (another format behind an SQLite header)."""
    text = str(exc)
    if "malformed" in text or "corrupt" in text:
        return InputError(f"damaged run store (SQLite: {text}); {RECOVER_HINT.format(path=path)}", file=path)
    return InputError(f"not a scijudge run store ({text})", file=path)


def check_tables(tables: set[str], path: Path, *, allow_none: bool) -> None:
    """Refuse an SQLite file with none of a run store's tables (another program's database; with no table at
    all, unless ``allow_none``: a file a new store may be written into)."""
    if tables & STORE_TABLES or (allow_none and not tables):
        return
    found = ", ".join(sorted(tables)[:3]) or "none"
    raise InputError(f"not a scijudge run store (an SQLite file without a judgments table; its tables: {found})",
                     file=path)


def cut_short(path: Path) -> str | None:
    """Why the file is shorter than SQLite wrote it, or None. SQLite writes whole pages and reads past the end of a
    file as zeros, so a store whose tail was cut off (a torn copy) can pass ``quick_check`` with its last rows' text
    zeroed: the file's size against its page size and its header's page count tells."""
    try:
        with path.open("rb") as handle:
            head = handle.read(100)
        size = path.stat().st_size
    except OSError:
        return None
    if len(head) < 100:
        return None
    page = int.from_bytes(head[16:18], "big")
    page = 65536 if page == 1 else page
    if page < 512 or size % page:
        return f"the file is {size} bytes, not a whole number of its {page}-byte pages: cut short"
    pages = int.from_bytes(head[28:32], "big")
    if head[24:28] == head[92:96] and pages * page > size:  # the header's page count is valid (SQLite's rule)
        return f"the header counts {pages} pages, the file holds {size // page}: cut short"
    return None


def quick_check(db: sqlite3.Connection, path: Path) -> None:
    """SQLite's ``PRAGMA quick_check`` of the whole file (its b-trees, pages and records, in time linear in the
    file's size; not the index-to-table agreement ``integrity_check`` adds): a damaged store is refused in one
    line before anything is planned, sent or written."""
    cut = cut_short(path)
    try:
        found = [cut] if cut else [row[0] for row in db.execute("PRAGMA quick_check(1)")]
    except sqlite3.DatabaseError as exc:
        found = [str(exc)]
    if found != ["ok"]:
        first = " ".join(str(found[0]).replace("*** in database main ***", "").split())
        raise InputError(f"damaged run store (SQLite's quick_check: {first}); nothing was written to it: "
                         f"{RECOVER_HINT.format(path=path)}", file=path)


def check_columns(names: Sequence[str], columns: Sequence[Sequence[Any]], rows: Sequence[Sequence[Any]],
                  path: Path) -> None:
    """``check_row`` of every fetched row, a column at a time (``columns[i]`` holds ``names[i]`` of each of ``rows``):
    the set of a column's value types is all that is looked at unless one is wrong (a C-speed pass per column)."""
    for name, column in zip(names, columns):
        allowed = _PY_TYPE_SETS.get(name)
        if allowed is None:
            continue
        if not set(map(type, column)) <= allowed or (name == "status" and not set(column) <= _STATUS_SET):
            for row in rows:
                check_row(dict(zip(names, row)), path)


def bad_row_sql(names: Sequence[str]) -> str:
    """``check_row``'s rules for ``names`` as one SQL condition, true for a row that breaks them (a reader that
    holds rows in SQLite finds a damaged one in one pass, then lets ``check_columns`` name it)."""
    rules = [f"typeof({name}) NOT IN ({', '.join(repr(t) for t in _SQL_TYPES[name])})"
             for name in names if name in _SQL_TYPES]
    if "status" in names:
        rules.append(f"status NOT IN ({', '.join(repr(s) for s in STATUSES)})")
    return "(" + " OR ".join(rules or ["0"]) + ")"


def check_row(row: Mapping[str, Any], path: Path) -> None:
    """Refuse a stored row whose values are not what the schema says (read back from a damaged page), in one line
    naming the store, the row's item and the column."""
    item = row.get("item_id")
    where = f"the row of item {item!r}" if isinstance(item, str) else "a row"
    for name, value in row.items():
        types = _PY_TYPES.get(name)
        if types is None:
            continue
        if not isinstance(value, types):
            expected = _EXPECTED[_SQL_TYPES[name]]
            raise DamagedRow(f"damaged run store: {where} has {name} {value!r}, not {expected}", file=path,
                             field=name, detail=f"{name} {value!r}, not {expected}")
        if name == "status" and value not in STATUSES:
            raise DamagedRow(f"damaged run store: {where} has status {value!r}, not ok or abstained", file=path,
                             field=name, detail=f"status {value!r}, not ok or abstained")


def column_names(columns: Sequence[str] | None) -> list[str]:
    """The run-store columns a reader asked for (all by default), each once; an unknown one is refused."""
    if columns is None:
        return list(RUN_COLUMNS)
    unknown = [c for c in columns if c not in RUN_COLUMNS]
    if unknown:
        raise InputError(f"unknown run-store column {unknown[0]!r}: use {', '.join(RUN_COLUMNS)}", field="columns")
    return list(dict.fromkeys(columns))


def decoded(values: Sequence[Any], column: str, path: Path) -> list[Any]:
    """``loads_column`` of each stored JSON text of a column (anything but text is None): by orjson where it reads
    them as ``json`` would (``loads_each``), else one by one by ``json``, where a corrupt one raises."""
    texts = [v if isinstance(v, str) else None for v in values]
    fast = loads_each([t for t in texts if t is not None])
    if fast is not None:
        each = iter(fast)
        return [None if t is None else next(each) for t in texts]
    return [loads_column(t, column, path, None) for t in texts]


def loads_column(value: Any, column: str, path: Path, item_id: Any) -> Any:
    """One stored JSON text decoded; a corrupt one is refused in one line naming the store, row and column."""
    if value is None:
        return None
    try:
        return json.loads(value)
    except (ValueError, TypeError, RecursionError):
        where = f" in the row of item {item_id!r}" if item_id is not None else ""
        raise DamagedRow(f"corrupt run store: unreadable {column}{where}", file=path, field=column,
                         detail=f"{column} is not readable JSON") from None
