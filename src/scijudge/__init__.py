"""scijudge: optimizable LLM-as-a-judge modules for scientific text, built on DSPy.

Names are imported on first use, so ``import scijudge`` (and opening a run store) loads no DSPy.
"""

from __future__ import annotations

import importlib as _importlib
import os as _os
from typing import Any as _Any

_os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "true")

__version__ = "0.1.0"

_EXPORTS = {
    "Item": "scijudge.data", "Paper": "scijudge.data", "load_items": "scijudge.data",
    "InputError": "scijudge.errors", "ModelError": "scijudge.errors", "ScijudgeError": "scijudge.errors",
    "SpecError": "scijudge.errors", "UnknownJudgeError": "scijudge.errors",
    "Judge": "scijudge.judges", "JudgeResult": "scijudge.records", "load_judge": "scijudge.judges",
    "HumanLabel": "scijudge.labels", "make_lm": "scijudge.lm",
    "JudgeOutput": "scijudge.outputs", "LikertRating": "scijudge.outputs", "PairwiseJudgment": "scijudge.outputs",
    "RunFields": "scijudge.outputs",
    "RunSummary": "scijudge.runner", "judge_items": "scijudge.runner", "Run": "scijudge.runs",
    "JudgeSpec": "scijudge.specs", "get_spec": "scijudge.specs", "list_specs": "scijudge.specs",
    "load_spec_file": "scijudge.specs",
    "Abstained": "scijudge.structured", "Attempt": "scijudge.records", "ChainConfig": "scijudge.structured",
    "StructuredChain": "scijudge.structured",
}

__all__ = sorted([*_EXPORTS, "__version__"])


def __getattr__(name: str) -> _Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'scijudge' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
