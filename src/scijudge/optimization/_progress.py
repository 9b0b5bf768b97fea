"""What a running optimization has done so far, for a terminal status line: candidates tried, LM calls spent of
the budget, and the best mean validation score so far. The budget and the ledger announce themselves here when
they are created (weak references: nothing is kept alive), so no optimizer code needs a callback."""

from __future__ import annotations

import weakref
from typing import Any

_LIVE: dict[str, weakref.ref[Any]] = {}


def watch(kind: str, obj: Any) -> None:
    """Remember the latest budget (``kind="budget"``) or ledger (``"ledger"``) of this process."""
    _LIVE[kind] = weakref.ref(obj)


def progress_text() -> str:
    """``3 candidates tried · 41 of 400 LM calls · best so far 0.667`` from the latest budget and ledger."""
    parts: list[str] = []
    ledger = _LIVE.get("ledger", lambda: None)()
    if ledger is not None:
        with ledger._lock:
            means = [sum(s.values()) / len(s) for s in ledger.scores.values() if s]
            tried = len(ledger.order)
        parts.append(f"{tried} candidate(s) tried")
        if means:
            parts.append(f"best so far {max(means):.3f} (mean over its scored validation examples)")
    budget = _LIVE.get("budget", lambda: None)()
    if budget is not None:
        cap = f" of {budget.max_calls}" if budget.max_calls else ""
        parts.insert(min(1, len(parts)), f"{budget.calls}{cap} LM calls")
    return " · ".join(parts) or "starting"
