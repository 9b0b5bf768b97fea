"""Rows of a run store that cannot be read (a JSON text cut short, a value of the wrong type): which they are, and
one line that names them and says how to judge them again or export the rest.

Readers stop at the first damaged row they meet (``_open.DamagedRow``); ``Run`` then scans the rows it was reading
once more with the same checks (``check_row``, ``loads_column``), so that every command names the same rows, and
the planner treats the same rows as not done (``intact_sql``), so that ``judge`` judges them again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from scijudge.errors import InputError
from scijudge.records import JSON_COLUMNS, RUN_COLUMNS
from scijudge.errors import DamagedRow
from scijudge.run._open import check_row, loads_column

_NAMED = 3  # rows named in the message; the rest are counted


class Damaged(NamedTuple):
    """One damaged row: its rowid, what it judged, the first column that cannot be read and what is wrong."""

    rowid: int
    item_id: Any
    judge: Any
    column: str
    detail: str


def find_damaged(rows: Iterable[Sequence[Any]], path: Path) -> list[Damaged]:
    """The damaged rows among ``rows`` (each: rowid, then the values of ``RUN_COLUMNS``)."""
    found: list[Damaged] = []
    for values in rows:
        row = dict(zip(RUN_COLUMNS, values[1:]))
        try:
            check_row(row, path)
            for column in JSON_COLUMNS:
                loads_column(row[column], column, path, row.get("item_id"))
        except DamagedRow as exc:
            found.append(Damaged(values[0], row.get("item_id"), row.get("judge"), exc.field or "?", exc.detail))
    return found


def damage_error(found: Sequence[Damaged], path: Path) -> InputError:
    """One line naming the damaged rows and the two ways on: judge them again, or export the rest."""
    n = len(found)
    named = "; ".join(f"item {d.item_id!r}, judge {d.judge!r}: {d.detail}" for d in found[:_NAMED])
    more = f"; and {n - _NAMED} more" if n > _NAMED else ""
    rows = "1 row cannot be read" if n == 1 else f"{n} rows cannot be read"
    return InputError(f"damaged run store: {rows} ({named}{more}); judge the same items into this --run again "
                      f"(`scijudge judge ... --run {path}` judges a damaged row anew), or export the rest with "
                      f"`scijudge export {path} --skip-damaged`", file=path,
                      field=found[0].column)


def intact_sql(columns: dict[str, str], has_json: bool) -> str:
    """SQL true where a row's JSON columns are well-formed (always true where SQLite has no JSON functions: the
    readers still refuse such a row)."""
    if not has_json:
        return "1"
    return " AND ".join(f"({columns[c]} IS NULL OR json_valid({columns[c]}))" for c in JSON_COLUMNS)
