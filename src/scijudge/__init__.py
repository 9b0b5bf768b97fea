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
    # the read side: run stores read once, and the one scale
    "Judgments": "scijudge.metrics.frames", "Scale": "scijudge.spec.scales",
    # judges
    "Judge": "scijudge.judges", "load_judge": "scijudge.judges", "load_judges": "scijudge.judges",
    "JudgeOptions": "scijudge.judges.options", "RunOptions": "scijudge.run.options", "JudgeRun": "scijudge.run.judging",
    "JudgeResult": "scijudge.records", "Attempt": "scijudge.records",
    "JudgeOutput": "scijudge.spec.outputs", "LikertRating": "scijudge.spec.outputs", "PairwiseJudgment": "scijudge.spec.outputs",
    "RunFields": "scijudge.spec.outputs",
    "JudgeSpec": "scijudge.spec.judge_spec", "get_spec": "scijudge.spec.judge_spec", "list_specs": "scijudge.spec.judge_spec",
    "load_spec_file": "scijudge.spec.judge_spec",
    "make_lm": "scijudge.lm",
    # running and storing
    "judge_items": "scijudge.run.api", "RunSummary": "scijudge.run.summary", "JudgeRecipe": "scijudge.judges.recipe",
    "JudgeProtocol": "scijudge.judges.contract",
    "Run": "scijudge.run.store",
    # the chain (advanced use)
    "Abstained": "scijudge.chain.chain", "ChainConfig": "scijudge.chain.chain", "StructuredChain": "scijudge.chain.chain",
    # calibration and optimization
    "calibrate": "scijudge.metrics.calibration", "optimize": "scijudge.optimization",
    "estimate": "scijudge.estimation", "sequential": "scijudge.estimation", "select_labels": "scijudge.estimation.select",
    "jury": "scijudge.metrics.jury", "cascade": "scijudge.metrics.selective", "distill": "scijudge.distillation",
    # shipped data (example datasets, specs, recipes)
    "bundled_path": "scijudge._resources",
}

__all__ = [
    "Abstained", "Attempt", "ChainConfig", "HumanLabel", "InputError", "Item", "Judge", "JudgeOptions",
    "JudgeOutput", "JudgeProtocol", "JudgeRecipe", "JudgeResult", "JudgeRun", "JudgeSpec", "Judgments",
    "LikertRating", "ModelError", "PairwiseJudgment", "Paper", "Run", "RunFields", "RunOptions", "RunSummary",
    "Scale", "ScijudgeError", "SpecError", "StructuredChain", "UnknownJudgeError", "__version__", "bundled_path",
    "calibrate", "cascade", "distill", "estimate", "get_spec", "judge_items", "jury", "list_specs", "load_items",
    "load_judge", "load_judges", "load_labels", "load_spec_file", "make_lm", "optimize", "select_labels",
    "sequential",
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
    from scijudge.distillation import distill
    from scijudge.estimation import estimate, sequential
    from scijudge.estimation.select import select_labels
    from scijudge.judges import Judge, load_judge, load_judges
    from scijudge.judges.options import JudgeOptions
    from scijudge.run.judging import JudgeRun
    from scijudge.run.options import RunOptions
    from scijudge.labels import HumanLabel, load_labels
    from scijudge.lm import make_lm
    from scijudge.metrics.calibration import calibrate
    from scijudge.metrics.frames import Judgments
    from scijudge.spec.scales import Scale
    from scijudge.metrics.jury import jury
    from scijudge.metrics.selective import cascade
    from scijudge.optimization import optimize
    from scijudge.spec.outputs import JudgeOutput, LikertRating, PairwiseJudgment, RunFields
    from scijudge.records import Attempt, JudgeResult
    from scijudge.judges.contract import JudgeProtocol
    from scijudge.judges.recipe import JudgeRecipe
    from scijudge.run.api import judge_items
    from scijudge.run.summary import RunSummary
    from scijudge.run.store import Run
    from scijudge.spec.judge_spec import JudgeSpec, get_spec, list_specs, load_spec_file
    from scijudge.chain.chain import Abstained, ChainConfig, StructuredChain
