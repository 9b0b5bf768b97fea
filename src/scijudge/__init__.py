"""scijudge: optimizable LLM-as-a-judge modules for scientific text, built on DSPy."""

from __future__ import annotations

import os as _os

_os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "true")

from scijudge.data import Item, Paper, load_items  # noqa: E402
from scijudge.errors import InputError, ModelError, ScijudgeError, SpecError, UnknownJudgeError  # noqa: E402
from scijudge.judges import Judge, JudgeResult, load_judge  # noqa: E402
from scijudge.labels import HumanLabel  # noqa: E402
from scijudge.lm import make_lm  # noqa: E402
from scijudge.outputs import JudgeOutput, LikertRating, PairwiseJudgment, RunFields  # noqa: E402
from scijudge.runner import RunSummary, judge_items  # noqa: E402
from scijudge.runs import Run  # noqa: E402
from scijudge.specs import JudgeSpec, get_spec, list_specs, load_spec_file  # noqa: E402
from scijudge.structured import Abstained, Attempt, ChainConfig, StructuredChain  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "Abstained", "Attempt", "ChainConfig", "HumanLabel", "InputError", "Item", "Judge", "JudgeOutput",
    "JudgeResult", "JudgeSpec", "LikertRating", "ModelError", "PairwiseJudgment", "Paper", "Run", "RunFields",
    "RunSummary", "ScijudgeError", "SpecError", "StructuredChain", "UnknownJudgeError", "get_spec",
    "judge_items", "list_specs", "load_items", "load_judge", "load_spec_file", "make_lm", "__version__",
]
