"""Judges: a spec + the structured chain, as a dspy.Module that returns typed results (``JudgeProtocol``)."""

from scijudge.judges.base import Judge
from scijudge.judges.build import build_judge, build_run_judges, load_judge, load_judges
from scijudge.judges.contract import JudgeProtocol
from scijudge.judges.options import JudgeOptions
from scijudge.records import JudgeResult

__all__ = ["Judge", "JudgeOptions", "JudgeProtocol", "JudgeResult", "build_judge", "build_run_judges", "load_judge",
           "load_judges"]
