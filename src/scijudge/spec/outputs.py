"""Typed judge outputs: what a judge returns, validated and normalised after parsing.

Providers may drop ``ge``/``le`` bounds from the schema they enforce (dspy#10195), so every bound and
step size is enforced again here, by validators, after the model has answered.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from typing import Any, ClassVar, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator

from scijudge.vocab import DEFAULT_SCALE, ScaleTuple

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


def _on_scale(value: Any, scale: ScaleTuple) -> int | float:
    """A rating read and checked against the scale: an int on integer scales, else a float."""
    snapped = snap_to_scale(value, *scale)
    return int(snapped) if scale.integral else snapped


class LikertRating(JudgeOutput):
    """A rating on the judge's scale plus the reason for it (1..5 here; ``scaled_output`` for others)."""

    SCALE: ClassVar[ScaleTuple] = DEFAULT_SCALE

    rationale: str = Field(description="Why this rating: cite what in the answer earned or lost points.")
    rating: int = Field(ge=1, le=5, description="Integer rating from 1 (worst) to 5 (best).")

    @field_validator("rating", mode="before")
    @classmethod
    def _read_rating(cls, value: Any) -> int | float:
        return _on_scale(value, cls.SCALE)

    def run_fields(self) -> RunFields:
        return RunFields(score=float(self.rating), rationale=self.rationale)


class PairwiseJudgment(JudgeOutput):
    """Both answers rated on the rubric, and which one is better (ties allowed)."""

    SCALE: ClassVar[ScaleTuple] = DEFAULT_SCALE

    rationale: str = Field(description="Compare the two answers on this quality only.")
    rating_a: int = Field(ge=1, le=5, description="Rating of answer A, 1-5.")
    rating_b: int = Field(ge=1, le=5, description="Rating of answer B, 1-5.")
    preference: Literal["A", "B", "tie"] = Field(description="The better answer: 'A', 'B' or 'tie'.")

    @field_validator("rating_a", "rating_b", mode="before")
    @classmethod
    def _read_rating(cls, value: Any) -> int | float:
        return _on_scale(value, cls.SCALE)

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


_ENUM_LIMIT = 21  # up to this many levels the schema lists them (``enum``); beyond, ``multipleOf`` says the step
_RATING_FIELDS = {LikertRating: ("rating",), PairwiseJudgment: ("rating_a", "rating_b")}


def rating_field(scale: ScaleTuple, what: str) -> tuple[type, Any]:
    """A pydantic field for one rating on ``scale``: bounds, step and description all from the scale."""
    lo, hi, step = scale
    integral = scale.integral
    extra: dict[str, Any] = {}
    if integral and step == 1:
        pass  # an integer between the bounds says it all
    elif len(scale.levels()) <= _ENUM_LIMIT:
        extra["enum"] = [int(v) if integral else v for v in scale.levels()]
    else:
        extra["multipleOf"] = int(step) if integral else step
    kind = "Integer rating" if integral else "Rating"
    steps = f" in steps of {step:g}" if step != 1 else ""
    description = f"{kind} of {what} from {lo:g} (worst) to {hi:g} (best){steps}."
    annotation: type = int if integral else float
    bound = (lambda v: int(v)) if integral else float
    return annotation, Field(ge=bound(lo), le=bound(hi), description=description, json_schema_extra=extra or None)


@lru_cache(maxsize=128)
def scaled_output(base: type[JudgeOutput], scale: ScaleTuple) -> type[JudgeOutput]:
    """The built-in output ``base`` (Likert or pairwise) with its ratings on ``scale``: the schema sent to the
    provider, the validation of the answer and the field descriptions in the prompt all follow the spec."""
    scale = ScaleTuple(*(float(v) for v in scale))
    if scale == DEFAULT_SCALE or base not in _RATING_FIELDS:
        return base
    whats = {"rating": "the answer", "rating_a": "answer A", "rating_b": "answer B"}
    fields = {name: rating_field(scale, whats[name]) for name in _RATING_FIELDS[base]}
    model = create_model(base.__name__, __base__=base, __module__=base.__module__, **fields)  # type: ignore[call-overload]
    model.SCALE = scale
    return cast(type[JudgeOutput], model)
