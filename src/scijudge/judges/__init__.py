"""Judges: a spec + the structured chain, as a dspy.Module that returns typed results."""

from scijudge.judges.base import Judge, JudgeResult, load_judge

__all__ = ["Judge", "JudgeResult", "load_judge"]
