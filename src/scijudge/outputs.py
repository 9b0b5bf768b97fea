"""Typed judge outputs: what a judge returns, validated and normalised after parsing.

Providers may drop ``ge``/``le`` bounds from the schema they enforce (dspy#10195), so every bound and
step size is enforced again here, by validators, after the model has answered.
"""

from __future__ import annotations

import math
import re
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

_WORD_NUMBERS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5,
    "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
}


class RunFields(BaseModel):
    """The columns a judgment contributes to the run store besides its full result."""

    score: float | None = None
    verdict: str | None = None
    confidence: float | None = None
    rationale: str | None = None


class JudgeOutput(BaseModel):
    """Base of every judge output; subclasses say how they fill the run store's columns."""

    model_config = ConfigDict(extra="ignore")

    def run_fields(self) -> RunFields:
        """Summarise this output for the run store (score, verdict, confidence, rationale)."""
        return RunFields()


def coerce_number(value: Any) -> float:
    """Read a score given as a number, a numeric string ("4.0", "4/5") or a word ("four").

    Never evaluates text: only plain numerals and a fixed table of English number words are read.
    """
    if isinstance(value, bool):
        raise ValueError("a boolean is not a score")
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str):
        text = value.strip().lower()
        if text in _WORD_NUMBERS:
            number = float(_WORD_NUMBERS[text])
        else:
            match = re.fullmatch(r"([-+]?\d+(?:\.\d+)?)\s*(?:/\s*\d+(?:\.\d+)?)?", text)
            if not match:
                raise ValueError(f"cannot read a number from {value!r}")
            number = float(match.group(1))
    else:
        raise ValueError(f"expected a number, got {type(value).__name__}")
    if not math.isfinite(number):
        raise ValueError("score must be finite")
    return number


def snap_to_scale(value: Any, lo: float, hi: float, step: float) -> float:
    """Validate a score against [lo, hi] and a step; rejects (not clips) out-of-range values."""
    number = coerce_number(value)
    if number < lo or number > hi:
        raise ValueError(f"score {number:g} is outside the scale {lo:g}..{hi:g}")
    steps = round((number - lo) / step)
    snapped = lo + steps * step
    if abs(snapped - number) > step / 4:
        raise ValueError(f"score {number:g} is not on the scale's {step:g} steps")
    return snapped


class LikertRating(JudgeOutput):
    """An integer rating on the judge's scale plus the reason for it."""

    SCALE: ClassVar[tuple[int, int]] = (1, 5)

    rationale: str = Field(description="Why this rating: cite what in the answer earned or lost points.")
    rating: int = Field(ge=1, le=5, description="Integer rating from 1 (worst) to 5 (best).")

    @field_validator("rating", mode="before")
    @classmethod
    def _read_rating(cls, value: Any) -> int:
        lo, hi = cls.SCALE
        return int(snap_to_scale(value, lo, hi, 1))

    def run_fields(self) -> RunFields:
        return RunFields(score=float(self.rating), rationale=self.rationale)


class PairwiseJudgment(JudgeOutput):
    """Both answers rated on the rubric, and which one is better (ties allowed)."""

    rationale: str = Field(description="Compare the two answers on this quality only.")
    rating_a: int = Field(ge=1, le=5, description="Rating of answer A, 1-5.")
    rating_b: int = Field(ge=1, le=5, description="Rating of answer B, 1-5.")
    preference: Literal["A", "B", "tie"] = Field(description="The better answer: 'A', 'B' or 'tie'.")

    @field_validator("rating_a", "rating_b", mode="before")
    @classmethod
    def _read_rating(cls, value: Any) -> int:
        return int(snap_to_scale(value, 1, 5, 1))

    @field_validator("preference", mode="before")
    @classmethod
    def _read_preference(cls, value: Any) -> str:
        text = str(value).strip().strip(".").lower()
        mapping = {"a": "A", "answer a": "A", "b": "B", "answer b": "B", "tie": "tie", "equal": "tie", "draw": "tie"}
        if text not in mapping:
            raise ValueError(f"preference must be A, B or tie, got {value!r}")
        return mapping[text]

    def run_fields(self) -> RunFields:
        return RunFields(score=float(self.rating_a - self.rating_b), verdict=self.preference, rationale=self.rationale)
