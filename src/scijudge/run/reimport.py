"""What a re-import of one file needs from a run store: the rows an earlier import of it left, made history.

Kept beside ``store.py`` (which it reads through ``Run``'s connection and column map) so that the store module
keeps one job: an import of a file (same SHA-256) whose item naming changed (the answering model added to the item
id) must not leave the old rows current beside the new ones.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from scijudge.run.store import Run


def imported_from(run: Run, spec_hash: str, sha256: str) -> dict[str, str]:
    """Key -> recorded path of the current judgments imported (``spec_hash``) from a file with this SHA-256."""
    columns = run._columns
    if not columns or not sha256:
        return {}
    fetched = run._query(
        f"SELECT {run._select(['key', 'result'])} FROM judgments WHERE {run._current_is()} AND "
        f"{columns['spec_hash']} = ? AND {columns['result']} LIKE ?", (spec_hash, f"%{sha256}%"))
    out = {}
    for key, result in fetched:
        try:
            provenance = json.loads(result) if isinstance(result, str) else None
        except ValueError:
            continue
        if isinstance(provenance, dict) and provenance.get("sha256") == sha256:
            out[key] = str(provenance.get("imported_from", ""))
    return out


def make_history(run: Run, keys: Iterable[str]) -> int:
    """Make these judgments history (``current`` 0): kept and shown under ``--history``, no longer current."""
    keyed = [(k,) for k in keys]
    if not keyed or not run._columns:
        return 0
    with run._writing():
        before = run._db.total_changes
        run._db.executemany(f"UPDATE judgments SET {run._columns['current']} = 0 WHERE {run._columns['key']} = ? "
                            f"AND {run._current_is()}", keyed)
        return run._db.total_changes - before
