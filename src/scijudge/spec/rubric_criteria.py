"""A weighted checklist criterion (ResearchRubrics' rubric line): shared by the importer and the checklist judge.

Kept apart from both so that the judge does not import the importer (issue 12) and the importer does not
import DSPy. ``Criterion`` validates with the published axis set unless the validation context says
``{"any_axis": True}`` (``--allow-unknown-axes``), which keeps an unknown axis as written.
"""

from __future__ import annotations

import hashlib
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from scijudge.vocab import is_finite, number_text

AXES: tuple[str, ...] = (
    "Explicit Criteria",
    "Implicit Criteria",
    "Synthesis of Information",
    "Communication Quality",
    "Instruction Following",
    "References & Citation Quality",
    "Miscellaneous",
)
_AXIS_LOOKUP = {" ".join(a.casefold().replace("&", " and ").split()): a for a in AXES}


def normalise_text(text: str) -> str:
    """Whitespace collapsed and case folded: the form criteria are compared and hashed in."""
    return " ".join(text.split()).casefold()


def criterion_id(text: str) -> str:
    """Stable id of a criterion: ``c`` + 10 hex digits of the hash of its normalised text."""
    return "c" + hashlib.sha256(normalise_text(text).encode("utf-8")).hexdigest()[:10]


MAX_WEIGHT = 1e6


class Criterion(BaseModel):
    """One rubric line: what to check, its weight (negative = penalty) and its axis."""

    model_config = ConfigDict(extra="ignore")

    criterion: str = Field(min_length=1)
    weight: float
    axis: str

    @field_validator("criterion")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("criterion is blank")
        return value.strip()

    @field_validator("weight", mode="before")
    @classmethod
    def _weight(cls, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"weight must be a number, got {value!r}")
        if not is_finite(value):
            raise ValueError(f"weight must be finite, got {number_text(value)}")
        if abs(value) > MAX_WEIGHT:  # sums of weights must stay finite (1e308 + 1e308 overflows)
            raise ValueError(f"weight {value!r} is too large: use weights between -{MAX_WEIGHT:g} and {MAX_WEIGHT:g}")
        if value == 0:
            raise ValueError("weight must not be zero (positive = reward, negative = penalty)")
        return float(value)

    @field_validator("axis", mode="before")
    @classmethod
    def _axis(cls, value: Any, info: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            raise ValueError("axis must be a non-empty string")
        key = " ".join(value.casefold().replace("&", " and ").split())
        if key in _AXIS_LOOKUP:
            return _AXIS_LOOKUP[key]
        if (info.context or {}).get("any_axis"):
            return " ".join(value.split())
        raise ValueError(f"unknown axis {value!r}; expected one of: {', '.join(AXES)}")

    @property
    def id(self) -> str:
        """Stable criterion id (hash of the normalised text)."""
        return criterion_id(self.criterion)

    @property
    def penalty(self) -> bool:
        """True for a negative-weight criterion: satisfying it lowers compliance."""
        return self.weight < 0

    def as_meta(self) -> dict[str, Any]:
        """The form stored in ``Item.meta["rubrics"]``."""
        return {"id": self.id, "criterion": self.criterion, "weight": self.weight, "axis": self.axis}


__all__ = ["AXES", "Criterion", "criterion_id", "normalise_text"]
