"""Running judges over items: the one run API (``judge_items``), its executors (threads, processes, batch, Ray)
and the SQLite run store they all write through.

The store's readers that other packages share (the viewer opens stores with them) are public here.
"""

from scijudge.run._open import (
    ReadConnection,
    bad_row_sql,
    check_columns,
    check_header,
    check_tables,
    connect_read,
    unreadable,
)
from scijudge.run._writer_lock import writer_active

__all__ = ["ReadConnection", "bad_row_sql", "check_columns", "check_header", "check_tables", "connect_read",
           "unreadable", "writer_active"]
