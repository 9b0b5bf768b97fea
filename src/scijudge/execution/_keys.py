"""The one place executors take a task's judgment key from: the same formula the runner's planning uses."""

from __future__ import annotations

from scijudge.data import Item
from scijudge.judges.base import Judge, judgment_key, model_name


def task_key(item: Item, judge: Judge, part: str) -> str:
    """The run-store key of one (item, judge, part) task, exactly as ``scijudge.runner.plan`` computes it."""
    return judgment_key(item.id, judge.name, part, judge.spec_hash, model_name(judge._lm()))
