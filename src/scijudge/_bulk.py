"""Bulk building of many small objects at once (labels, store rows): without the cyclic collector's passes, and
text columns made by pyarrow in one pass."""

from __future__ import annotations

import gc
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import cache
from typing import Any


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while building ~10^5 acyclic rows (tuples, dicts of text).

    Every few hundred new containers it runs, and its older-generation passes walk every live object, the
    imported libraries' too: on 150,000 label rows that was a fifth of the load. Rows hold no cycles, so
    reference counting alone frees them; the collector is running again when the block ends, however it ends.

    Also around parsing input that may be nested thousands deep (a TOML spec): a collection that starts deep in
    the parser's recursion runs other objects' finalizers at that depth, where they hit the recursion limit
    themselves and are reported as unraisable exceptions.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def text_array(values: Sequence[Any]) -> Any | None:
    """The pandas text array pandas itself would infer for ``values`` when every value is text or None and some is
    text, built by pyarrow in one pass (pandas' own inference checks each value in Python: about a third of
    reading a 150,000-row run store); None where pandas does not keep text in pyarrow (then its inference runs)."""
    dtype = _pyarrow_text_dtype()
    if dtype is None or not set(map(type, values)) <= _TEXT_OR_NONE:
        return None
    import pyarrow as pa

    try:
        array = pa.array(values, type=pa.large_string())
    except (pa.ArrowException, UnicodeError):  # a lone surrogate is not UTF-8: pandas' inference decides
        return None
    if array.null_count == len(values):  # nothing but None: pandas keeps an object column of None
        return None
    import pandas as pd

    return pd.array(array, dtype=dtype)


_TEXT_OR_NONE = frozenset({str, type(None)})


@cache
def _pyarrow_text_dtype() -> Any | None:
    """The dtype pandas infers for text when it keeps it in pyarrow (pandas ≥ 3 with pyarrow), else None."""
    import pandas as pd

    dtype = pd.Series(["text"]).dtype
    return dtype if getattr(dtype, "storage", None) == "pyarrow" else None
