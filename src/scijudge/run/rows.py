"""How a judgment becomes a run-store row: its values in ``RUN_COLUMNS`` order, the key computed, credentials
redacted and the JSON columns encoded, from one record dump (``row_of``) or from a ``Columns`` chunk (``rows_of``,
the same rows built column by column). The store inserts what these return and nothing else."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from itertools import repeat
from operator import itemgetter
from typing import Any

from scijudge.records import CURRENT_GROUP, JSON_COLUMNS, RUN_COLUMNS, Columns, Same, judgment_key, judgment_keys
from scijudge.redaction import redact
from scijudge.run._orjson import dumps_each


def _redacted(data: dict[str, Any]) -> dict[str, Any]:
    """Errors a provider returned may echo credentials: redact the reason and each attempt's error."""
    attempts = data.get("attempts")
    if data.get("reason") is None and (not attempts or not any(a.get("error") for a in attempts)):
        return data
    data = dict(data, reason=redact(data.get("reason")))
    data["attempts"] = [dict(a, error=redact(a.get("error"))) for a in data.get("attempts") or ()]
    return data


def row_of(dump: dict[str, Any]) -> list[Any]:
    """A record dump (``JudgeResult.model_dump(mode="json")``) as the row to insert: values in ``RUN_COLUMNS``
    order, credentials redacted, the key computed, JSON columns encoded, current = 1."""
    data = _redacted(dump)
    if "endpoint" not in data or "input_hash" not in data or "decoding" not in data:  # a dump of an older worker
        data = {"endpoint": "", "input_hash": "", "decoding": "", **data}
    values = [None, *_STORED_AT(data), 1]
    values[0] = judgment_key(*_KEY_AT(data))
    for at in _JSON_AT:
        values[at] = _json_column(values[at])
    return values


def chunks(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    """``items`` in lists of ``size`` (the last one shorter)."""
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def rows_of(chunk: Columns) -> list[Sequence[Any]]:
    """``[row_of(d) for d in chunk.dumps()]``, column by column: a field given once (``Same``) is encoded,
    redacted and hashed once; the key and JSON columns of a listed field row by row."""
    n, given = chunk.n, dict(chunk.values)
    for name, default in (("endpoint", ""), ("input_hash", ""), ("decoding", "")):
        given.setdefault(name, Same(default))
    reason, attempts = given["reason"], given["attempts"]
    if not (isinstance(attempts, Same) and not attempts.value):  # attempts that may hold errors: row by row
        pairs = [_redacted({"reason": r, "attempts": a}) for r, a in zip(chunk.column("reason"), chunk.column("attempts"))]
        given["reason"], given["attempts"] = [p["reason"] for p in pairs], [p["attempts"] for p in pairs]
    elif isinstance(reason, Same):
        given["reason"] = Same(redact(reason.value))
    else:
        given["reason"] = [redact(r) for r in reason]
    columns: list[Any] = []
    for name in RUN_COLUMNS[1:-1]:
        value = given[name]
        if name in JSON_COLUMNS:
            if isinstance(value, Same):
                value = Same(_json_column(value.value))
            else:
                value = _json_texts(value)
        columns.append(_column(value, n))
    keys = judgment_keys(*(_column(given[name], n) for name in _KEY_FIELDS))
    return list(zip(keys, *columns, repeat(1)))


def _column(value: list[Any] | Same, n: int) -> Iterable[Any]:
    return repeat(value.value, n) if isinstance(value, Same) else value


def _json_texts(values: list[Any]) -> list[str | None]:
    """The stored JSON text of each value of a JSON column: None stays NULL, ``[]`` is ``"[]"``, any other value
    is encoded by orjson, all in one call (``dumps_each``: several times faster than ``json``). orjson writes
    ``null`` for NaN and infinities, though, which ``json`` keeps (and reads back): a text with a ``null``, or a
    value orjson refuses, is written by ``json``."""
    given = [v for v in values if v is not None and v != []]
    encoded = dumps_each(given) or [None] * len(given)
    texts, next_text = [], iter(encoded).__next__
    for value in values:
        if value is None or value == []:
            texts.append(None if value is None else "[]")
            continue
        text = next_text()
        texts.append(json.dumps(value) if text is None or b"null" in text else text.decode())
    return texts


def _json_column(value: Any) -> str | None:
    return _json_texts([value])[0]


_STORED_AT = itemgetter(*RUN_COLUMNS[1:-1])
_KEY_FIELDS = ("item_id", "judge", "part", "spec_hash", "model", "endpoint", "input_hash", "decoding")
_KEY_AT = itemgetter(*_KEY_FIELDS)
_JSON_AT = tuple(RUN_COLUMNS.index(c) for c in JSON_COLUMNS)
group_of = itemgetter(*(RUN_COLUMNS.index(c) for c in CURRENT_GROUP))
CURRENT_AT = RUN_COLUMNS.index("current")
assert RUN_COLUMNS[0] == "key" and RUN_COLUMNS[-1] == "current"
