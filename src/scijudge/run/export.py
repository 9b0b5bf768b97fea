"""Writing run-store rows to JSONL or CSV, streamed row by row (flat memory at any store size).

Rows written before redaction existed may hold credentials in their free text, so the fields that can hold
one are redacted on the way out: the rationale, the reason, the verdict, the result and each attempt's
error. Ids, hashes, numbers and dates cannot, and the endpoint was stored without credentials. A JSON column
that SQLite found well-formed and that holds nothing redaction could change is copied as stored, never decoded.
"""

from __future__ import annotations

import csv
import json
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from scijudge.records import JSON_COLUMNS, RUN_COLUMNS
from scijudge.redaction import Redactor, redact_data, redactor

FREE_TEXT_COLUMNS = ("verdict", "rationale", "reason")


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
    count = 0
    one = redactor()  # the secrets known now, computed once for the whole export
    if fmt == "jsonl":
        encode = _json_line()
        try:
            import orjson

            encode = _orjson_line(orjson)
        except ImportError:  # pragma: no cover - orjson comes with DSPy
            pass
        with Path(out).open("wb") as binary:
            for row in rows:
                binary.write(encode(row, _redact_row(row, one)))
                count += 1
        return count
    with Path(out).open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(RUN_COLUMNS)
        for row in rows:
            raw = _redact_row(row, one)
            writer.writerow([raw[c] if c in raw else _cell(row.get(c), c) for c in RUN_COLUMNS])
            count += 1
    return count


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
