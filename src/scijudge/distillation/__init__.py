"""Distillation: train a small local LoRA judge from human labels or a stronger judge's stored judgments, on the
judge's own prompts, then judge the held-out split with student, base and teacher and calibrate them paired.

``scijudge.distill(...)`` is the user verb (the package is named apart from it, so the verb is always the
function). Training needs the ``local`` extra.
"""

from __future__ import annotations

from scijudge.distillation._api import DistillResult, distill

__all__ = ["DistillResult", "distill"]
