"""Writing run-store rows to JSONL or CSV, streamed row by row (flat memory at any store size), to a temporary
file renamed to the output only when every row was written (``scijudge._files.atomic_output``).

Rows written before redaction existed may hold credentials in their free text, so the fields that can hold
one are redacted on the way out: the rationale, the reason, the verdict, the result and each attempt's
error. Ids, hashes, numbers and dates cannot, and the endpoint was stored without credentials. A JSON column
that SQLite found well-formed and that holds nothing redaction could change is copied as stored, never decoded.
"""

from __future__ import annotations

import csv
import io
import json
import uuid
from collections.abc import Callable, Iterable, Sequence
from itertools import islice
from operator import itemgetter
from pathlib import Path
from typing import Any

from scijudge._files import atomic_output
from scijudge.records import JSON_COLUMNS, RUN_COLUMNS
from scijudge.run._orjson import dumps_each
from scijudge.redaction import Redactor, redact_data, redactor

FREE_TEXT_COLUMNS = ("verdict", "rationale", "reason")
FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv"}


def output_format(given: str | None, out: str | Path | None) -> str:
    """The export format: ``given`` (``--format``) when there is one, else the output's suffix (``.csv``,
    ``.jsonl``), else JSONL."""
    from scijudge.errors import InputError

    if given is not None:
        if given not in ("jsonl", "csv"):
            raise InputError(f"unknown export format {given!r}: use jsonl or csv", field="format")
        return given
    return FORMATS.get(Path(out).suffix.lower(), "jsonl") if out is not None else "jsonl"


def redact_free_text(row: dict[str, Any], redact: Callable[[Any], Any] | None = None) -> dict[str, Any]:
    """``row`` (JSON columns decoded) with its free-text fields redacted, in place."""
    one = redact or redactor()
    for column in FREE_TEXT_COLUMNS:
        if row.get(column):
            row[column] = one(row[column])
    if row.get("result"):
        row["result"] = redact_data(row["result"], one)
    if row.get("attempts"):
        row["attempts"] = [dict(a, error=one(a["error"])) if isinstance(a, dict) and a.get("error") else a
                           for a in row["attempts"]]
    return row


def write_rows(rows: Iterable[dict[str, Any]], out: str | Path, fmt: str) -> int:
    """Write ``rows`` (``Run.rows()`` or ``Run.raw_rows()`` dicts) as JSONL (compact, UTF-8) or CSV; returns
    how many. JSONL is encoded by orjson where it is installed (a dependency of DSPy), else by ``json``: the
    same bytes either way."""
    with _Writer(out, fmt) as writer:
        for row in rows:
            writer.row(row)
        return writer.count


def write_tuples(tuples: Iterable[tuple[Any, ...]], out: str | Path, fmt: str,
                 to_row: Callable[[tuple[Any, ...]], dict[str, Any]]) -> int:
    """``write_rows`` of ``Run.raw_tuples()``, the same bytes in a fraction of the time: a row whose JSON
    SQLite found well-formed and whose text holds nothing redaction could change (nearly every row) is written
    from its tuple as stored; any other becomes a dict (``to_row``: ``Run.raw_row``) and is redacted."""
    with _Writer(out, fmt) as writer:
        may_change, texts_of = writer.redact.may_change_json, itemgetter(*_TEXT_AT)
        pending = iter(tuples)
        while batch := list(islice(pending, _BATCH)):
            # one look at the text of many rows: nothing redaction could change in any (nearly always)
            if all([values[_OK] for values in batch]) and not may_change(_texts(batch)):
                writer.stored(batch)
                continue
            stored: list[tuple[Any, ...]] = []  # the batch's rows up to the next one to redact, written together
            for values in batch:
                if values[_OK] and not may_change("\n".join([t for t in texts_of(values) if t.__class__ is str])):
                    stored.append(values)
                    continue
                if stored:
                    writer.stored(stored)
                    stored = []
                writer.row(to_row(values))
            if stored:
                writer.stored(stored)
        return writer.count


def _texts(batch: list[tuple[Any, ...]]) -> str:
    """The text redaction looks at in a batch of ``Run.raw_tuples()`` rows (their JSON and free-text columns),
    joined: what may change one of them is in the joined text too. Taken a column at a time, one join for a
    column without NULLs, it costs a fraction of a pass over the rows."""
    parts = []
    for at in _TEXT_AT:
        column = [values[at] for values in batch]
        try:
            parts.append("\n".join(column))
        except TypeError:  # NULLs (or other non-text values, which redaction leaves alone)
            parts.append("\n".join([t for t in column if t.__class__ is str]))
    return "\n".join(parts)


def _csv_lines(batch: list[tuple[Any, ...]]) -> str:
    """What ``csv.writer(out, lineterminator="\\n").writerows`` writes for these ``Run.raw_tuples()`` rows
    (``current`` as a bool), in a fraction of the time: the writer costs some 10 us a row of 25 cells, cells
    made a column at a time and rows joined by ``str.join`` a few. Each cell is the text the writer makes of its
    value (``_csv_cells``); rows of more than one field never get its quoted empty record."""
    columns = list(zip(*batch))
    cells = [_csv_cells(columns[at]) for at in range(_CURRENT)]
    cells.append(["True" if v else "False" for v in columns[_CURRENT]])
    lines = list(map(",".join, zip(*cells)))
    lines.append("")
    return "\n".join(lines)


def _csv_cells(values: Sequence[Any]) -> Sequence[str]:
    """One column's cells as the csv writer makes them (its default dialect, QUOTE_MINIMAL): text as it is,
    None as empty, anything else as ``str`` of it; quoted, with quotes doubled, where a cell holds a comma, a
    quote, LF or (from Python 3.13 on, ``_CR_QUOTED``) CR, and nothing else escaped (not spaces, not other
    control characters). One join answers for the whole column: ids, hashes, numbers and dates hold none of
    those and are not looked at cell by cell."""
    try:
        text = "".join(values)  # every value text: nearly always, for a text column
    except TypeError:
        kinds = set(map(type, values))
        if kinds <= _NUMBERS:  # digits, signs, points, exponents, inf, nan: never quoted
            return list(map(str, values)) if type(None) not in kinds else ["" if v is None else str(v) for v in values]
        values = ["" if v is None else v if isinstance(v, str) else str(v) for v in values]
        text = "".join(values)
    cr = _CR_QUOTED
    if '"' in text or "," in text or "\n" in text or (cr and "\r" in text):
        return ['"' + v.replace('"', '""') + '"' if '"' in v or "," in v or "\n" in v or (cr and "\r" in v) else v
                for v in values]
    return values


def _csv_quoting() -> bool | None:
    """Whether this Python's csv writer (default dialect, LF line ends) quotes a cell holding CR: every version
    quotes one holding a comma, a quote or LF; 3.13 on quotes CR too, 3.11 and 3.12 write it bare. None where
    some ASCII character is written otherwise than these rules say: ``_Writer`` then leaves CSV to the writer."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    quoted = ""
    for c in map(chr, range(128)):
        buffer.seek(0)
        buffer.truncate()
        writer.writerow([c, "x"])
        if buffer.getvalue() == '"' + c.replace('"', '""') + '",x\n':
            quoted += c
        elif buffer.getvalue() != c + ",x\n":
            return None
    return {'\n",': False, '\n\r",': True}.get(quoted)


_TEXT_AT = tuple(RUN_COLUMNS.index(c) for c in (*JSON_COLUMNS, *FREE_TEXT_COLUMNS))
_BATCH = 256  # rows looked at (and written) at once
_OK = len(RUN_COLUMNS)  # Run.raw_tuples: after the columns, the row's "all JSON well-formed" flag
_CURRENT = RUN_COLUMNS.index("current")
assert _CURRENT == len(RUN_COLUMNS) - 1 > 0
_NUMBERS = {int, float, type(None)}  # exact types, compared with type(): bool and subclasses are not numbers here
_CR_QUOTED = _csv_quoting()


class _Writer:
    """One export file: rows written as dicts (redacted on the way) or as stored tuples (nothing to redact)."""

    def __init__(self, out: str | Path, fmt: str) -> None:
        self.count = 0
        self.redact = redactor()  # the secrets known now, computed once for the whole export
        self._jsonl = fmt == "jsonl"
        self._output = atomic_output(out, "wb" if self._jsonl else "w", newline="")
        self._encode = _json_line()
        self._fragment: Any = None
        if self._jsonl:
            try:
                import orjson

                self._encode = _orjson_line(orjson)
                self._fragment, self._dumps = orjson.Fragment, orjson.dumps
            except ImportError:  # pragma: no cover - orjson comes with DSPy
                pass

    def __enter__(self) -> _Writer:
        handle = self._output.__enter__()  # a temporary file beside ``out``, renamed to it on a clean exit
        if self._jsonl:
            self._binary = handle
            return self
        self._text = handle
        self._csv = csv.writer(self._text, lineterminator="\n")
        try:
            self._csv.writerow(RUN_COLUMNS)
        except BaseException as exc:
            self._output.__exit__(type(exc), exc, exc.__traceback__)
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self._output.__exit__(*exc)  # renamed to the output when nothing failed, else removed

    def row(self, row: dict[str, Any]) -> None:
        raw = _redact_row(row, self.redact)
        if self._jsonl:
            self._binary.write(self._encode(row, raw))
        else:
            self._csv.writerow([raw[c] if c in raw else _cell(row.get(c), c) for c in RUN_COLUMNS])
        self.count += 1

    def stored(self, batch: list[tuple[Any, ...]]) -> None:
        """``Run.raw_tuples()`` rows with nothing to redact and well-formed JSON, written as stored."""
        if not self._jsonl:  # the bytes csv.writer would write; None as an empty cell, as _cell gives it
            if _CR_QUOTED is None:  # pragma: no cover - a csv module with other quoting rules
                self._csv.writerows([[*values[:_CURRENT], bool(values[_CURRENT])] for values in batch])
            else:
                self._text.write(_csv_lines(batch))
        elif self._fragment is None:  # pragma: no cover - without orjson
            for values in batch:
                self.row({**dict(zip(RUN_COLUMNS, values)), "current": bool(values[_CURRENT])})
            return
        else:
            fragment, rows = self._fragment, []
            for values in batch:
                row = dict(zip(RUN_COLUMNS, values))  # the flag after the columns is left out
                for column in JSON_COLUMNS:
                    if row[column] is not None:
                        row[column] = fragment(row[column])
                row["current"] = bool(values[_CURRENT])
                rows.append(row)
            encoded = dumps_each(rows) or [None] * len(rows)
            lines = [line if line is not None else self._dumps(row) for line, row in zip(encoded, rows)]
            lines.append(b"")
            self._binary.write(b"\n".join(lines))
        self.count += len(batch)


def _orjson_line(orjson: Any) -> Callable[[dict[str, Any], dict[str, str]], bytes]:
    fragment, dumps = orjson.Fragment, orjson.dumps

    def encode(row: dict[str, Any], raw: dict[str, str]) -> bytes:
        for column, text in raw.items():
            row[column] = fragment(text)
        line: bytes = dumps(row)
        return line + b"\n"

    return encode


def _json_line() -> Callable[[dict[str, Any], dict[str, str]], bytes]:
    marks = {c: f"\x00{uuid.uuid4().hex}:{c}\x00" for c in JSON_COLUMNS}  # where stored JSON is put back
    quoted = {c: json.dumps(m) for c, m in marks.items()}

    def encode(row: dict[str, Any], raw: dict[str, str]) -> bytes:
        for column in raw:
            row[column] = marks[column]
        line = json.dumps(row, ensure_ascii=False, separators=(",", ":"))
        for column, text in raw.items():
            line = line.replace(quoted[column], text, 1)
        return (line + "\n").encode("utf-8")

    return encode


def _redact_row(row: dict[str, Any], one: Redactor) -> dict[str, str]:
    """Redact ``row`` in place; returns the JSON columns to copy as stored (their text, well-formed)."""
    stored = [row.get(c) for c in JSON_COLUMNS]
    if all(v is None or isinstance(v, str) for v in stored):  # one look at the whole row first
        texts = [v for v in stored if v] + [row[c] for c in FREE_TEXT_COLUMNS if isinstance(row.get(c), str)]
        if not one.may_change_json("\n".join(texts)):
            return {c: str(v) for c, v in zip(JSON_COLUMNS, stored) if v is not None}
    raw: dict[str, str] = {}
    for column in JSON_COLUMNS:
        value = row.get(column)
        if isinstance(value, str):  # stored text, well-formed
            if one.may_change_json(value):
                row[column] = json.loads(value)
            else:
                raw[column] = str(value)
    for column in FREE_TEXT_COLUMNS:
        if row.get(column):
            row[column] = one(row[column])
    if "result" not in raw and row.get("result"):
        row["result"] = redact_data(row["result"], one)
    if "attempts" not in raw and row.get("attempts"):
        row["attempts"] = [dict(a, error=one(a["error"])) if isinstance(a, dict) and a.get("error") else a
                           for a in row["attempts"]]
    return raw


def _cell(value: Any, column: str) -> Any:
    if column in JSON_COLUMNS:
        return json.dumps(value) if value is not None else ""
    return "" if value is None else value
