"""Executors beyond the in-process runner: provider batch APIs and Ray actors (imported lazily)."""

from __future__ import annotations

from typing import Any

__all__ = ["judge_items_batch", "judge_items_ray"]


def __getattr__(name: str) -> Any:
    if name == "judge_items_batch":
        from scijudge.execution.batch import judge_items_batch

        return judge_items_batch
    if name == "judge_items_ray":
        from scijudge.execution.ray_runner import judge_items_ray

        return judge_items_ray
    raise AttributeError(name)
