"""Distillation: train a small local LoRA judge from human labels or a stronger judge's stored judgments, on the
judge's own prompts, then judge the held-out split with student, base and teacher and calibrate them paired.

``scijudge.distill(...)`` is the user verb (this package is callable, so the name works whether Python has
bound ``scijudge.distill`` to the package or to the function). Training needs the ``local`` extra.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from scijudge.distill._api import DistillResult, distill

__all__ = ["DistillResult", "distill"]


class _CallablePackage(types.ModuleType):
    """``scijudge.distill`` is both this package and the ``distill`` function: calling the package calls it."""

    def __call__(self, *args: Any, **kwargs: Any) -> DistillResult:
        return distill(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
