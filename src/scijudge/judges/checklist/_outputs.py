"""Typed outputs of the checklist judge: the verdict of one criterion and one chunk's evidence."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from scijudge.spec.outputs import JudgeOutput, RunFields, coerce_number
from scijudge.vocab import criterion_verdict

SCORES: dict[str, float] = {"satisfied": 1.0, "partially": 0.5, "not_satisfied": 0.0}


def _read_verdict(value: Any, allowed: tuple[str, ...]) -> str:
    if not isinstance(value, str):
        raise ValueError(f"verdict must be one of {', '.join(allowed)}")  # pydantic wants ValueError
    verdict = criterion_verdict(value)
    if verdict not in allowed:
        raise ValueError(f"verdict must be one of {', '.join(allowed)}, got {value!r}")
    return verdict


def _string_list(value: Any) -> Any:
    """A list of passages as models write it: null is none, one string is one passage (kept word for word)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value.strip() else []
    return value


class CriterionVerdict(JudgeOutput):
    """Whether a report meets one criterion (binary), how sure the judge is, and the evidence for it."""

    ALLOWED: ClassVar[tuple[str, ...]] = ("satisfied", "not_satisfied")

    reasoning: str = Field(description="How the report does or does not meet the criterion, citing what it says.")
    evidence_quotes: list[str] = Field(
        default_factory=list,
        description="Short passages copied word for word from the report that the verdict rests on; empty if none.")
    missing_elements: list[str] = Field(
        default_factory=list, description="What the report would need to add or fix to meet the criterion fully.")
    verdict: Literal["satisfied", "not_satisfied"] = Field(
        description="'satisfied' if the report does what the criterion describes, else 'not_satisfied'.")
    confidence: float = Field(ge=0.0, le=1.0, description="Probability from 0 to 1 that the verdict is right.")

    @field_validator("verdict", mode="before")
    @classmethod
    def _verdict(cls, value: Any) -> str:
        return _read_verdict(value, cls.ALLOWED)

    @field_validator("confidence", mode="before")
    @classmethod
    def _confidence(cls, value: Any) -> float:
        number = coerce_number(value)
        if not 0.0 <= number <= 1.0:
            raise ValueError(f"confidence must be between 0 and 1, got {number:g}")
        return number

    @field_validator("evidence_quotes", "missing_elements", mode="before")
    @classmethod
    def _strings(cls, value: Any) -> Any:
        return _string_list(value)

    @property
    def score(self) -> float:
        """1 satisfied, 0.5 partially, 0 not satisfied."""
        return SCORES[self.verdict]

    def run_fields(self) -> RunFields:
        return RunFields(score=self.score, verdict=self.verdict, confidence=self.confidence, rationale=self.reasoning)


class TernaryCriterionVerdict(CriterionVerdict):
    """As ``CriterionVerdict``, with ``partially`` (score 0.5) for criteria met only in part."""

    ALLOWED: ClassVar[tuple[str, ...]] = ("satisfied", "partially", "not_satisfied")

    verdict: Literal["satisfied", "partially", "not_satisfied"] = Field(  # type: ignore[assignment]
        description="'satisfied' if the report fully does what the criterion describes, 'partially' if only in "
                    "part, else 'not_satisfied'.")


class ChunkEvidence(JudgeOutput):
    """What one part of a long report shows about one criterion (no verdict: that comes after all parts)."""

    quotes: list[str] = Field(
        default_factory=list,
        description="Passages copied word for word from this part that bear on the criterion; empty if none.")
    notes: str = Field(description="What this part shows about the criterion, including what it lacks.")
    bearing: Literal["supports", "contradicts", "mixed", "none"] = Field(
        description="Whether this part shows the report doing what the criterion describes ('supports'), "
                    "shows the opposite ('contradicts'), both ('mixed'), or says nothing about it ('none').")

    @field_validator("quotes", mode="before")
    @classmethod
    def _quotes(cls, value: Any) -> Any:
        return _string_list(value)

    @field_validator("bearing", mode="before")
    @classmethod
    def _bearing(cls, value: Any) -> str:
        return str(value).strip().casefold() if isinstance(value, str) else value


# --- token counting and chunking ---------------------------------------------------------------------
