"""Numbers and tables for the terminal: rich tables on a terminal, full CSV-like values when piped."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd


def fmt_cost(cost: float | None, priced: int | None = None, total: int | None = None) -> str:
    """An estimated cost in USD that never shows an unknown price as 0: ``cost`` summed over ``priced`` of ``total``
    paid answers (counts optional). "unknown" when no answer had a known price; the share when only some had."""
    if cost is None or (isinstance(cost, float) and not math.isfinite(cost)) or (total and not priced):
        return "unknown (no known price for this model)"
    if priced is not None and total is not None and priced < total:
        return f"{cost:.4f} for {priced} of {total} answers (the rest: price unknown)"
    return f"{cost:.4f}"


def fmt_number(value: Any, digits: int = 3) -> str:
    """A number rounded for display, never '-0.000' (a rounded negative zero prints as 0); NaN as '—'."""
    if value is None or value is pd.NA:
        return "—"
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        if not math.isfinite(float(value)):
            return "—"
        text = f"{float(value):.{digits}f}"
        return text[1:] if text.startswith("-") and float(text) == 0 else text
    return str(value)


_COUNT_NAMES = frozenset({"n", "count", "rank", "reports", "pairs", "tasks", "judged", "criteria", "abstained",
                          "unjudged", "tokens_in", "tokens_out", "labels_ppi", "labels_human_only"})


def is_count(name: Any) -> bool:
    """Columns that hold counts (``n``, ``n_items``, ``n_judged``, ...): printed as integers even when a missing
    value made pandas store them as floats (never ``127.000``)."""
    text = str(name)
    return text in _COUNT_NAMES or text.startswith("n_")


def fmt_cell(value: Any, column: Any, digits: int = 3) -> str:
    """``fmt_number``, with whole numbers in count columns printed as integers."""
    if is_count(column) and isinstance(value, (float, np.floating)) and math.isfinite(float(value)) \
            and float(value).is_integer():
        return str(int(value))
    return fmt_number(value, digits)


def fmt_interval(lo: Any, hi: Any, digits: int = 3) -> str:
    """'[lo, hi]' with the same rounding rules, or '' when either end is missing."""
    if lo is None or hi is None or pd.isna(lo) or pd.isna(hi):
        return ""
    return f"[{fmt_number(lo, digits)}, {fmt_number(hi, digits)}]"


def _csv_value(value: Any) -> Any:
    if isinstance(value, (float, np.floating)) and math.isfinite(float(value)):
        if float(value) == 0:
            return 0.0  # no '-0.0' in machine-readable output either
        return float(f"{float(value):.12g}")  # 0.17333333333333328 (arithmetic's last bits) prints as 0.173333333333
    return value


def print_frame(frame: pd.DataFrame, title: str = "", console: Any = None, *, piped: bool | None = None) -> None:
    """Print a table: rich with 3-decimal numbers on a terminal; CSV with full precision when piped."""
    from rich.table import Table
    from rich.text import Text

    from scijudge.report.console import plain_console

    console = console or plain_console()
    piped = not console.is_terminal if piped is None else piped
    if piped:
        text = frame.map(_csv_value).to_csv(index=False, lineterminator="\n")
        console.print((f"# {title}\n" if title else "") + text.rstrip("\n"), markup=False, highlight=False,
                      soft_wrap=True, emoji=False)
        return
    names = list(frame.columns)
    cells = [[fmt_cell(v, names[i]) for i, v in enumerate(row)] for row in frame.itertuples(index=False)]
    for chunk, part in _column_chunks(frame, cells, console.width):
        suffix = f" ({part})" if part else ""
        table = Table(title=(title + suffix) if title else (part or None))
        for i in chunk:
            table.add_column(str(frame.columns[i]), no_wrap=True, overflow="ignore",
                             justify="left" if _is_text(frame.iloc[:, i]) else "right")
        for row in cells:
            table.add_row(*(Text(str(row[i])) for i in chunk))  # values as text, never as markup
        console.print(table, crop=False)


def _is_text(column: pd.Series) -> bool:
    if pd.api.types.is_bool_dtype(column) or pd.api.types.is_numeric_dtype(column):
        return False
    return not column.map(lambda v: v is None or isinstance(v, (int, float, np.number))).all()


def _column_chunks(frame: pd.DataFrame, cells: list[list[str]], width: int) -> list[tuple[list[int], str]]:
    """Columns split into tables that fit the terminal, each repeating the leading id columns, so that no id or
    number is ever cut or wrapped (``part 1/2`` in the title); one table when everything fits."""
    widths = [max([len(str(c)), *(len(r[i]) for r in cells)]) + 3 for i, c in enumerate(frame.columns)]
    n = len(widths)
    if sum(widths) + 1 <= width:
        return [(list(range(n)), "")]
    keys, key_width = 0, 1  # leading id columns repeated in every part, as many as fit in 60% of the width
    while keys < n - 1 and _is_text(frame.iloc[:, keys]) and key_width + widths[keys] <= width * 0.6:
        key_width += widths[keys]
        keys += 1
    chunks: list[list[int]] = []
    current: list[int] = []
    used = key_width
    for i in range(keys, n):
        if current and used + widths[i] > width:
            chunks.append(current)
            current, used = [], key_width
        current.append(i)
        used += widths[i]
    chunks.append(current)
    return [(list(range(keys)) + c, f"part {k + 1}/{len(chunks)}") for k, c in enumerate(chunks)]
