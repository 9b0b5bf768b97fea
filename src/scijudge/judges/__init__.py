"""Judges: a spec + the structured chain, as a dspy.Module that returns typed results."""

from scijudge.judges.base import Judge, JudgeResult, build_judge, load_judge

__all__ = ["Judge", "JudgeResult", "build_judge", "load_judge"]
