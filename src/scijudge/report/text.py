"""Numbers and tables for the terminal: rich tables on a terminal, full CSV-like values when piped."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd


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


def fmt_interval(lo: Any, hi: Any, digits: int = 3) -> str:
    """'[lo, hi]' with the same rounding rules, or '' when either end is missing."""
    if lo is None or hi is None or pd.isna(lo) or pd.isna(hi):
        return ""
    return f"[{fmt_number(lo, digits)}, {fmt_number(hi, digits)}]"


def _csv_value(value: Any) -> Any:
    if isinstance(value, (float, np.floating)) and math.isfinite(float(value)) and float(value) == 0:
        return 0.0  # no '-0.0' in machine-readable output either
    return value


def print_frame(frame: pd.DataFrame, title: str = "", console: Any = None, *, piped: bool | None = None) -> None:
    """Print a table: rich with 3-decimal numbers on a terminal; CSV with full precision when piped."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    piped = not console.is_terminal if piped is None else piped
    if piped:
        text = frame.map(_csv_value).to_csv(index=False, lineterminator="\n")
        console.print((f"# {title}\n" if title else "") + text.rstrip("\n"), markup=False, highlight=False,
                      soft_wrap=True, emoji=False)
        return
    table = Table(title=title or None)
    for column in frame.columns:
        table.add_column(str(column), overflow="fold")
    for row in frame.itertuples(index=False):
        table.add_row(*(fmt_number(v) for v in row))
    console.print(table)
