"""Writing run-store rows to JSONL or CSV, streamed row by row (flat memory at any store size).

Rows written before redaction existed may hold credentials in their free text, so the fields that can hold
one are redacted on the way out: the rationale, the reason, the verdict, the result and each attempt's
error. Ids, hashes, numbers and dates cannot, and the endpoint was stored without credentials.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from scijudge.records import JSON_COLUMNS, RUN_COLUMNS
from scijudge.redaction import redact_data, redactor

FREE_TEXT_COLUMNS = ("verdict", "rationale", "reason")


def redact_free_text(row: dict[str, Any], redact: Callable[[Any], Any] | None = None) -> dict[str, Any]:
    """``row`` with its free-text fields redacted (in place)."""
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
    """Write ``rows`` (``Run.rows()`` dicts, JSON columns decoded) as JSONL or CSV; returns how many."""
    count = 0
    one = redactor()  # the secrets known now, computed once for the whole export
    with Path(out).open("w", encoding="utf-8", newline="") as handle:
        if fmt == "jsonl":
            for row in rows:
                handle.write(json.dumps(redact_free_text(row, one), ensure_ascii=False) + "\n")
                count += 1
            return count
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(RUN_COLUMNS)
        for row in rows:
            row = redact_free_text(row, one)
            writer.writerow([_cell(row.get(c), c) for c in RUN_COLUMNS])
            count += 1
    return count


def _cell(value: Any, column: str) -> Any:
    if column in JSON_COLUMNS:
        return json.dumps(value) if value is not None else ""
    return "" if value is None else value
