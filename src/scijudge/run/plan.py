"""Which judgments a run still has to make: every (item, judge, part) whose identity the store does not hold.

A judgment's identity covers the content the judge reads, so an edited item is judged again (and counted as
changed); judgments stored before content was part of the key are adopted as they always were.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from scijudge.data import Item
from scijudge.judges.contract import JudgeProtocol
from scijudge.run.store import Run
from scijudge.run.summary import RunSummary

Task = tuple[Item, JudgeProtocol, str]
Select = Callable[[Item, Any, str], bool]
"""A planning policy: whether to judge this (item, judge, part) at all (a cascade's later members)."""


@dataclass
class Plan:
    """The tasks to run and what was found in the store."""

    tasks: list[Task]
    skipped: int
    changed_items: set[str]
    not_applicable: list[tuple[str, str]]
    damaged: int = 0
    """Tasks whose stored row is damaged (a JSON text cut short): judged again."""


def plan_run(items: Sequence[Item], judges: Sequence[JudgeProtocol], run: Run | None, *,
             retry_abstained: bool = False, select: Select | None = None) -> Plan:
    """Every (item, judge, part) not yet in the run store, in item-major order, what was done already, the ids
    of items whose content changed since their current judgment, and the (item, judge) pairs with nothing to
    judge (a pairwise judge and an item with one answer). Computing identities reads every input, so a
    missing one fails here, before any LM call."""
    done, damaged = run.keys_by_state(include_abstained=not retry_abstained) if run is not None else (set(), set())
    redone = 0
    current = run.current_index() if run is not None else {}
    tasks: list[Task] = []
    skipped = 0
    changed: set[str] = set()
    not_applicable: list[tuple[str, str]] = []
    for item in items:
        for judge in judges:
            parts = judge.parts(item)
            if not parts:
                not_applicable.append((item.id, judge.name))
                continue
            for part in parts:
                if select is not None and not select(item, judge, part):
                    continue
                identities = judge.identity(item, part)
                if all(one.key in done for one in identities):
                    skipped += 1
                    continue
                first = identities[0]
                row = current.get((item.id, first.judge, part, first.model, first.endpoint))
                if row is not None and not row.input_hash and (row.status == "ok" or not retry_abstained) and \
                        row.key == first.legacy_key and len(identities) == 1:
                    skipped += 1  # written before content was part of the key: adopted as it always was
                    continue
                if row is not None and row.input_hash and row.input_hash != first.input_hash:
                    changed.add(item.id)
                redone += any(one.key in damaged for one in identities)
                tasks.append((item, judge, part))
    return Plan(tasks, skipped, changed, not_applicable, redone)


def pending(items: Sequence[Item], judges: Sequence[JudgeProtocol], run: Run | None, *, retry_abstained: bool,
            limit: int | None, select: Select | None = None) -> tuple[list[Task], RunSummary]:
    """The tasks to run now (at most ``limit``) and a summary that already counts what is skipped."""
    found = plan_run(items, judges, run, retry_abstained=retry_abstained, select=select)
    tasks = found.tasks[:limit] if limit is not None else found.tasks
    return tasks, RunSummary(planned=len(tasks), skipped_done=found.skipped, not_applicable=len(found.not_applicable),
                             changed=len(found.changed_items), damaged=found.damaged)


def valid_items(items: Sequence[Item], judges: Sequence[JudgeProtocol]) -> tuple[list[Item], list[Exception]]:
    """The items every judge can read (``--skip-invalid``), and the error of each item left out."""
    from scijudge.errors import ScijudgeError

    valid: list[Item] = []
    problems: list[Exception] = []
    for item in items:
        try:
            for judge in judges:
                parts = judge.parts(item)
                if parts:
                    judge.inputs_for(item, parts[0])
            valid.append(item)
        except ScijudgeError as exc:
            problems.append(exc)
    return valid, problems
