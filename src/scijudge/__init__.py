"""scijudge: optimizable LLM-as-a-judge modules for scientific text, built on DSPy.

The user verbs live here. Nothing heavy (DSPy, litellm, torch, pandas) is imported until a name that
needs it is first used, so ``import scijudge`` and ``scijudge --help`` stay fast.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from scijudge.errors import InputError, ModelError, ScijudgeError, SpecError, UnknownJudgeError

__version__ = "0.1.0"

# Public name -> module that defines it (imported on first attribute access).
_LAZY: dict[str, str] = {
    # items and labels
    "Item": "scijudge.data", "Paper": "scijudge.data", "load_items": "scijudge.data",
    "HumanLabel": "scijudge.labels", "load_labels": "scijudge.labels",
    # judges
    "Judge": "scijudge.judges", "load_judge": "scijudge.judges",
    "JudgeResult": "scijudge.records", "Attempt": "scijudge.records",
    "JudgeOutput": "scijudge.outputs", "LikertRating": "scijudge.outputs", "PairwiseJudgment": "scijudge.outputs",
    "RunFields": "scijudge.outputs",
    "JudgeSpec": "scijudge.specs", "get_spec": "scijudge.specs", "list_specs": "scijudge.specs",
    "load_spec_file": "scijudge.specs",
    "make_lm": "scijudge.lm",
    # running and storing
    "judge_items": "scijudge.runner", "RunSummary": "scijudge.runner",
    "Run": "scijudge.runs",
    # the chain (advanced use)
    "Abstained": "scijudge.structured", "ChainConfig": "scijudge.structured", "StructuredChain": "scijudge.structured",
    # calibration and optimization
    "calibrate": "scijudge.metrics.calibration", "optimize": "scijudge.optimization",
    "estimate": "scijudge.estimation",
}

__all__ = [
    "Abstained", "Attempt", "ChainConfig", "HumanLabel", "InputError", "Item", "Judge", "JudgeOutput",
    "JudgeResult", "JudgeSpec", "LikertRating", "ModelError", "PairwiseJudgment", "Paper", "Run", "RunFields",
    "RunSummary", "ScijudgeError", "SpecError", "StructuredChain", "UnknownJudgeError", "__version__",
    "calibrate", "estimate", "get_spec", "judge_items", "list_specs", "load_items", "load_judge",
    "load_labels", "load_spec_file", "make_lm", "optimize",
]


def __getattr__(name: str) -> Any:
    """Import the module behind a public name on first use (PEP 562)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'scijudge' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from scijudge.data import Item, Paper, load_items
    from scijudge.estimation import estimate
    from scijudge.judges import Judge, load_judge
    from scijudge.labels import HumanLabel, load_labels
    from scijudge.lm import make_lm
    from scijudge.metrics.calibration import calibrate
    from scijudge.optimization import optimize
    from scijudge.outputs import JudgeOutput, LikertRating, PairwiseJudgment, RunFields
    from scijudge.records import Attempt, JudgeResult
    from scijudge.runner import RunSummary, judge_items
    from scijudge.runs import Run
    from scijudge.specs import JudgeSpec, get_spec, list_specs, load_spec_file
    from scijudge.structured import Abstained, ChainConfig, StructuredChain
