"""The optimizer registry: recipe name → settings model → builder, with what each needs from the data.

A new optimizer is one module that defines its settings (a pydantic model) and a ``compile`` function, and
calls ``register(OptimizerEntry(...))``; recipes (``optimizer = "name"``), validation, split checks and the
run loop find it here. The built-in ones live in ``scijudge.optimization._optimizers``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class OptimizerSettings(BaseModel):
    """Settings every optimizer has; each optimizer's model extends it (unknown keys are errors)."""

    model_config = ConfigDict(extra="forbid")

    num_threads: int = Field(default=1, ge=1, description="Parallel judge calls while evaluating candidates.")


@dataclass(frozen=True)
class CompileInputs:
    """What a builder gets: the program to optimize, the data it may see, the metric, the proposal LM, a seed."""

    student: Any
    trainset: list[Any]
    devset: list[Any]
    metric: Any
    prompt_lm: Any
    seed: int


@dataclass(frozen=True)
class OptimizerEntry:
    """One optimizer: its settings model, how to compile a judge with it, and what data it needs.

    Attributes:
        sees_dev: True when the optimizer takes a separate validation set (else it gets train + dev as one).
        check_sizes: problems with the split sizes (``{"train", "dev", "test"}`` → count), found before any call.
        feedback_metric: True when the optimizer wants textual feedback from the metric (GEPA).
        proposes: False when it makes no proposal calls of its own (no prompt LM needed).
        reads_answers: True when it learns from the text of the judge's answers (its traces: GEPA's reflection,
            SIMBA's rules and demos), which decision mode does not generate.
    """

    name: str
    settings: type[OptimizerSettings]
    # Each entry's functions take that entry's own settings class (a subclass of OptimizerSettings), which a
    # Callable type cannot say per entry: the first argument is typed by ``settings`` at run time.
    compile: Callable[[Any, CompileInputs], Any]
    sees_dev: bool = True
    check_sizes: Callable[[Any, dict[str, int]], list[str]] | None = None
    feedback_metric: bool = False
    proposes: bool = True
    reads_answers: bool = False


_REGISTRY: dict[str, OptimizerEntry] = {}
_LOCK = threading.Lock()
_BUILTINS_LOADED = False


def register(entry: OptimizerEntry, *, replace: bool = False) -> OptimizerEntry:
    """Make an optimizer available to recipes under ``entry.name``."""
    with _LOCK:
        if entry.name in _REGISTRY and not replace:
            raise ValueError(f"optimizer {entry.name!r} is already registered")
        _REGISTRY[entry.name] = entry
    return entry


def unregister(name: str) -> None:
    """Remove an optimizer (tests that register a toy one clean up with this)."""
    with _LOCK:
        _REGISTRY.pop(name, None)


def _load_builtins() -> None:
    global _BUILTINS_LOADED
    if not _BUILTINS_LOADED:
        _BUILTINS_LOADED = True
        import scijudge.optimization._optimizers  # noqa: F401 - registers the built-in optimizers


def names() -> list[str]:
    """Registered optimizer names, sorted."""
    _load_builtins()
    return sorted(_REGISTRY)


def get(name: str) -> OptimizerEntry | None:
    """The entry for ``name``, or None."""
    _load_builtins()
    return _REGISTRY.get(name)


def entry_for(name: str) -> OptimizerEntry:
    entry = get(name)
    if entry is None:
        raise KeyError(f"unknown optimizer {name!r}; choose one of {', '.join(names())}")
    return entry


def minimum_sizes(recipe: Any, sizes: dict[str, int]) -> list[str]:
    """Problems with split sizes that the recipe's optimizer cannot work with (checked before any LM call)."""
    entry = entry_for(recipe.optimizer)
    if entry.check_sizes is None:
        return []
    seen = {**sizes, "train": sizes["train"] + (0 if entry.sees_dev else sizes["dev"])}
    return entry.check_sizes(recipe.typed_settings(), seen)
