"""Judges: a spec + the structured chain, as a dspy.Module that returns typed results (``JudgeProtocol``)."""

from scijudge.judges.base import Judge
from scijudge.judges.build import build_judge, build_run_judges, load_judge
from scijudge.judges.contract import JudgeProtocol
from scijudge.records import JudgeResult

__all__ = ["Judge", "JudgeProtocol", "JudgeResult", "build_judge", "build_run_judges", "load_judge"]
