"""Many values JSON-encoded by one orjson call: each ``orjson.dumps`` pays a fixed cost (about 3 µs on the
project's machines, more than encoding a whole run-store row), so bulk writers encode a batch at once.

The batch is one JSON array with a raw newline between its values: compact JSON never holds a raw newline
(strings escape it), so splitting the array's text at ``,\\n,`` gives each value's own bytes, exactly what
``orjson.dumps(value)`` writes. A value that could break this (a fragment holding the separator) shows up as a
wrong count of parts, and the batch is then encoded value by value, as it is when orjson refuses a value.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

try:
    import orjson
except ImportError:  # pragma: no cover - orjson comes with DSPy
    orjson = None  # type: ignore[assignment]

_SPLIT = b",\n,"


def dumps_each(values: Sequence[Any]) -> list[bytes | None] | None:
    """``[orjson.dumps(v) for v in values]`` in one call, None in place of a value orjson does not take (a huge
    integer, a non-text key); None as a whole without orjson."""
    if orjson is None:
        return None
    if len(values) > 1:
        separated: list[Any] = [None] * (2 * len(values) - 1)
        separated[0::2] = values
        separated[1::2] = [_NEWLINE] * (len(values) - 1)
        try:
            parts: list[bytes | None] = list(orjson.dumps(separated)[1:-1].split(_SPLIT))
        except TypeError:  # orjson.JSONEncodeError: some value orjson does not take
            pass
        else:
            if len(parts) == len(values):  # else a value's own text held the separator
                return parts
    return [_dumps_one(v) for v in values]


def _dumps_one(value: Any) -> bytes | None:
    try:
        text: bytes = orjson.dumps(value)
    except TypeError:
        return None
    return text


_NEWLINE = orjson.Fragment(b"\n") if orjson is not None else None


_LONG_NUMBER = re.compile(r"(?<![.\d])\d{19}")  # 19 digits not after a decimal point
_AS_RUNS = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))  # an ASCII digit → "0", all else → " "
_RUN = b"0" * 19


def _may_hold_long_number(text: str) -> bool:
    """Whether ``text`` may hold a number of 19 digits or more. The regex costs about 50 ns a character; 19 ASCII
    digits in a row (JSON numbers have no others) are found in the translated bytes at memory speed, and only a
    text holding them is searched by the regex."""
    return _RUN in text.encode("utf-8", "surrogatepass").translate(_AS_RUNS) and _LONG_NUMBER.search(text) is not None


def loads_each(texts: Sequence[str]) -> list[Any] | None:
    """``[json.loads(t) for t in texts]`` by orjson (several times faster), or None where the two could differ:
    without orjson, where orjson refuses a text (malformed, NaN, a lone surrogate, 1e400: json decides those), and
    where 19 digits in a row, not after a decimal point, could be an integer beyond 64 bits (orjson reads one as a
    float, json exactly). Each text is decoded on its own, so none can run into its neighbour. Doubles decode to
    the same values (tests/run/test_store_io.py)."""
    if orjson is None or _may_hold_long_number("\n".join(texts)):  # a line each: no run across two texts
        return None
    try:
        return list(map(orjson.loads, texts))
    except ValueError:  # orjson.JSONDecodeError
        return None
