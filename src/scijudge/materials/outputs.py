"""Typed outputs of the materials judges: the synthesis-extraction judgment and the linking judgment.

Scores are 1-5 in 0.5 steps. A value within 0.125 of a step is snapped to it (models write 3.9 or
"4.0/5" for 4); anything further off is rejected, because 4.2 or 3.3 is not a rating on this scale and
guessing which step the model meant would hide a model that ignores the rubric. Rejection sends the call
back through the fallback chain (a retry at a higher temperature) instead of silently storing a guess.

The overall score is always recomputed as the mean of the criteria; a model's own "overall" is ignored.

The JSON schema these models produce keeps to what OpenAI's strict ``json_schema`` mode accepts: every
property listed in ``required``, ``additionalProperties: false``, and no ``default``, ``minimum`` or
``maximum`` keywords (bounds and steps are enforced by validators after parsing instead), and nothing
beside a ``$ref`` (the criteria are described in the judge's instructions instead).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field, field_validator, model_validator

from scijudge.spec.outputs import JudgeOutput, RunFields, snap_to_scale

SCORE_MIN, SCORE_MAX, SCORE_STEP = 1.0, 5.0, 0.5
CONFIDENCE_VALUES: dict[str, float] = {"low": 0.33, "medium": 0.67, "high": 1.0}
_RATIONALE_CHARS = 600

Confidence = Literal["low", "medium", "high"]


def _strict_schema(schema: dict[str, Any]) -> None:
    """Make a model's JSON schema provider-friendly: all properties required, no extras, no defaults."""
    props = schema.get("properties")
    if isinstance(props, dict):
        schema["required"] = list(props)
        schema["additionalProperties"] = False
        for name, prop in props.items():
            prop.pop("default", None)
            if "$ref" in prop and len(prop) > 1:  # strict mode rejects keywords beside $ref
                props[name] = {"$ref": prop["$ref"]}


_SCHEMA_CONFIG = ConfigDict(extra="ignore", json_schema_extra=_strict_schema)


def _as_list_of_text(value: Any) -> list[str]:
    """Read a list of strings leniently: null is empty, one string is one entry, blanks are dropped."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value.strip()] if value.strip() else []
    if isinstance(value, (list, tuple)):
        return [str(v).strip() for v in value if v is not None and str(v).strip()]
    raise ValueError(f"expected a list of strings, got {type(value).__name__}")


def _read_confidence(value: Any) -> str | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    text = str(value).strip().strip(".").lower()
    aliases = {"moderate": "medium", "med": "medium", "mid": "medium"}
    text = aliases.get(text, text)
    if text not in CONFIDENCE_VALUES:
        raise ValueError(f"confidence must be low, medium or high, got {value!r}")
    return text


class CriterionScore(BaseModel):
    """One criterion: the reasoning first (so the score follows from it), then the score."""

    model_config = _SCHEMA_CONFIG

    reasoning: str = Field(default="", description="What in the extraction earned or lost points on this criterion.")
    score: float = Field(description="Score from 1 (failed) to 5 (excellent) in steps of 0.5.")

    @model_validator(mode="before")
    @classmethod
    def _bare_number(cls, data: Any) -> Any:
        if isinstance(data, (int, float, str)) and not isinstance(data, bool):
            return {"score": data, "reasoning": ""}
        return data

    @field_validator("reasoning", mode="before")
    @classmethod
    def _null_reasoning(cls, value: Any) -> Any:
        return "" if value is None else value

    @field_validator("score", mode="before")
    @classmethod
    def _on_scale(cls, value: Any) -> float:
        return snap_to_scale(value, SCORE_MIN, SCORE_MAX, SCORE_STEP)


def _lift_flat_scores(data: Mapping[str, Any], criteria: tuple[str, ...]) -> dict[str, Any]:
    """Accept LeMaterial's layout: ``scores: {"<c>_score": .., "<c>_reasoning": ..}``, ``confidence_level``."""
    out = dict(data)
    scores = out.pop("scores", None)
    flat = dict(scores) if isinstance(scores, Mapping) else {}
    for key in list(out):
        if key.endswith("_score") or key.endswith("_reasoning"):
            flat.setdefault(key, out[key])
    for name in criteria:
        if name in out:
            continue
        if f"{name}_score" in flat:
            out[name] = {"score": flat[f"{name}_score"], "reasoning": flat.get(f"{name}_reasoning") or ""}
    if "confidence" not in out and "confidence_level" in out:
        out["confidence"] = out["confidence_level"]
    if not out.get("reasoning") and flat.get("overall_reasoning"):
        out["reasoning"] = flat["overall_reasoning"]
    out.pop("overall", None)
    return out


class _CriteriaJudgment(JudgeOutput):
    """Shared behaviour: criteria scored on 1-5, overall = their mean, confidence mapped to a number."""

    CRITERIA: ClassVar[tuple[str, ...]] = ()

    @model_validator(mode="before")
    @classmethod
    def _accept_lematerial_layout(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            return _lift_flat_scores(data, cls.CRITERIA)
        return data

    @field_validator("confidence", mode="before", check_fields=False)
    @classmethod
    def _confidence(cls, value: Any) -> str | None:
        return _read_confidence(value)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def overall(self) -> float:
        """Mean of the criterion scores (recomputed; never taken from the model)."""
        scores = [getattr(self, name).score for name in self.CRITERIA]
        return sum(scores) / len(scores)

    def criterion_scores(self) -> dict[str, float]:
        """Criterion name -> score, in the rubric's order."""
        return {name: getattr(self, name).score for name in self.CRITERIA}

    def _confidence_value(self) -> float | None:
        conf = getattr(self, "confidence", None)
        return CONFIDENCE_VALUES[conf] if conf is not None else None

    def _short_rationale(self) -> str:
        head = " ".join(str(getattr(self, "reasoning", "") or "").split())
        tail = ", ".join(f"{name} {score:g}" for name, score in self.criterion_scores().items())
        if len(head) > _RATIONALE_CHARS:
            head = head[: _RATIONALE_CHARS - 1].rstrip() + "…"
        return f"{head} [{tail}]" if head else f"[{tail}]"


class SynthesisJudgment(_CriteriaJudgment):
    """Judgment of one extracted synthesis procedure against its source text, on seven criteria."""

    model_config = _SCHEMA_CONFIG

    CRITERIA: ClassVar[tuple[str, ...]] = (
        "structural_completeness",
        "material_extraction",
        "process_steps",
        "equipment_extraction",
        "conditions_extraction",
        "semantic_accuracy",
        "format_compliance",
    )

    reasoning: str = Field(default="", description="Overall assessment of the extraction against the source text.")
    structural_completeness: CriterionScore = Field(
        description="Are all parts the source describes present (materials, steps, equipment, conditions)?")
    material_extraction: CriterionScore = Field(
        description="Are starting materials named correctly, with the amounts, units, purities and vendors stated?")
    process_steps: CriterionScore = Field(
        description="Are the steps in the right order, with the right actions, none merged, split or invented?")
    equipment_extraction: CriterionScore = Field(
        description="Is the equipment of the procedure captured, with vendors and settings where stated?")
    conditions_extraction: CriterionScore = Field(
        description="Are temperatures, durations, pressures, atmospheres, stirring and pH right, with units?")
    semantic_accuracy: CriterionScore = Field(
        description="Does the structure keep the scientific meaning of the procedure (what happens to what)?")
    format_compliance: CriterionScore = Field(
        description="Does the extraction follow the ontology's fields and value types?")
    confidence: Confidence | None = Field(
        default=None, description="How sure you are of this judgment: 'low', 'medium' or 'high'.")
    missing_information: list[str] = Field(
        default_factory=list, description="Details stated in the source but absent from the extraction.")
    extraction_errors: list[str] = Field(
        default_factory=list, description="Extracted values that contradict the source text.")
    improvement_suggestions: list[str] = Field(
        default_factory=list, description="Concrete changes that would improve the extraction.")

    @field_validator("missing_information", "extraction_errors", "improvement_suggestions", mode="before")
    @classmethod
    def _lists(cls, value: Any) -> list[str]:
        return _as_list_of_text(value)

    def run_fields(self) -> RunFields:
        """Score = overall mean; confidence low/medium/high -> 0.33/0.67/1.0; a short rationale."""
        return RunFields(score=self.overall, confidence=self._confidence_value(), rationale=self._short_rationale())


FLAG_CODES: dict[str, str] = {
    "f1_name_mismatch": "F1",
    "f2_one_synthesis_many_series": "F2",
    "f3_many_syntheses_one_figure": "F3",
    "f4_sample_code_failure": "F4",
    "f5_precursor_vs_product": "F5",
    "f6_characterization_confusion": "F6",
    "f7_dual_axis_error": "F7",
    "f8_false_negative": "F8",
    "f9_false_positive": "F9",
}
"""Readable flag field -> short failure-mode code."""

_FLAG_ALIASES = {
    "f2_one_to_many_synthesis": "f2_one_synthesis_many_series",
    "f3_many_to_one_figure": "f3_many_syntheses_one_figure",
}


def _read_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if value is None:
        return False
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    text = str(value).strip().lower()
    if text in {"true", "yes", "y", "1"}:
        return True
    if text in {"false", "no", "n", "0", ""}:
        return False
    raise ValueError(f"expected true or false, got {value!r}")


class LinkingFailureFlags(BaseModel):
    """Nine independent failure modes of a linking output; several may be raised at once."""

    model_config = _SCHEMA_CONFIG

    f1_name_mismatch: bool = Field(
        default=False, description="F1: text and figure name the same material differently and the link missed it.")
    f2_one_synthesis_many_series: bool = Field(
        default=False, description="F2: one synthesis yields several series or materials but was linked to too few.")
    f3_many_syntheses_one_figure: bool = Field(
        default=False, description="F3: several syntheses share one figure and their series were conflated or missed.")
    f4_sample_code_failure: bool = Field(
        default=False, description="F4: a sample code or shorthand label (e.g. 'S2', 'NCM-3') was not resolved.")
    f5_precursor_vs_product: bool = Field(
        default=False, description="F5: a precursor or intermediate was linked to the final product's data, or back.")
    f6_characterization_confusion: bool = Field(
        default=False, description="F6: characterization data (XRD, BET, TGA, SEM...) was taken for performance data.")
    f7_dual_axis_error: bool = Field(
        default=False, description="F7: a series was read against the wrong y axis of a dual-axis plot.")
    f8_false_negative: bool = Field(
        default=False, description="F8: a synthesis with performance data in the paper has no link.")
    f9_false_positive: bool = Field(
        default=False, description="F9: a link exists for a material without performance data or without a synthesis.")

    @model_validator(mode="before")
    @classmethod
    def _accept_codes(cls, data: Any) -> Any:
        by_code = {code.lower(): name for name, code in FLAG_CODES.items()}
        if isinstance(data, (list, tuple)):
            out: dict[str, Any] = {}
            for entry in data:
                key = str(entry).strip().lower()
                name = by_code.get(key) or _FLAG_ALIASES.get(key) or (key if key in FLAG_CODES else None)
                if name is None:
                    raise ValueError(f"unknown failure flag {entry!r}; use F1..F9")
                out[name] = True
            return out
        if isinstance(data, Mapping):
            out = {}
            for key, value in data.items():
                k = str(key).strip().lower()
                out[by_code.get(k) or _FLAG_ALIASES.get(k) or k] = value
            return out
        return data

    @field_validator(*FLAG_CODES, mode="before")
    @classmethod
    def _bool(cls, value: Any) -> bool:
        return _read_bool(value)

    def active(self) -> list[str]:
        """Codes of the raised flags, e.g. ``["F1", "F7"]``."""
        return [code for name, code in FLAG_CODES.items() if getattr(self, name)]


class LinkingJudgment(_CriteriaJudgment):
    """Judgment of a synthesis-to-plot linking output on four criteria plus nine failure flags."""

    model_config = _SCHEMA_CONFIG

    CRITERIA: ClassVar[tuple[str, ...]] = (
        "material_identity",
        "performance_data_correctness",
        "completeness",
        "format_structure",
    )

    reasoning: str = Field(default="", description="Overall assessment of the links against the paper and plots.")
    material_identity: CriterionScore = Field(
        description="Did each linked synthesis make the material whose data the linked series shows?")
    performance_data_correctness: CriterionScore = Field(
        description="Is each linked series performance data, from the right figure, read on the right axis?")
    completeness: CriterionScore = Field(
        description="Are all synthesis-performance pairs of the paper linked, and no spurious ones added?")
    format_structure: CriterionScore = Field(
        description="Is the linking output well formed and usable as it stands?")
    failure_flags: LinkingFailureFlags = Field(
        default_factory=LinkingFailureFlags, description="Raise every failure mode you observe; they are independent.")
    confidence: Confidence | None = Field(
        default=None, description="How sure you are of this judgment: 'low', 'medium' or 'high'.")
    missing_links: list[str] = Field(
        default_factory=list, description="Synthesis-series pairs the paper supports that the output lacks.")
    spurious_links: list[str] = Field(
        default_factory=list, description="Links in the output that the paper does not support.")
    suggestions: list[str] = Field(
        default_factory=list, description="Concrete changes that would improve the linking.")

    @model_validator(mode="before")
    @classmethod
    def _suggestion_alias(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "suggestions" not in data and "improvement_suggestions" in data:
            data = {**data, "suggestions": data["improvement_suggestions"]}
        return data

    @field_validator("failure_flags", mode="before")
    @classmethod
    def _null_flags(cls, value: Any) -> Any:
        return {} if value is None else value

    @field_validator("missing_links", "spurious_links", "suggestions", mode="before")
    @classmethod
    def _lists(cls, value: Any) -> list[str]:
        return _as_list_of_text(value)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def missing_link_count(self) -> int:
        """Missed links: the listed ones, or at least 1 when flag F8 (false negative) is raised without a list."""
        return len(self.missing_links) or int(self.failure_flags.f8_false_negative)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def spurious_link_count(self) -> int:
        """Spurious links: the listed ones, or at least 1 when flag F9 (false positive) is raised without a list."""
        return len(self.spurious_links) or int(self.failure_flags.f9_false_positive)

    def run_fields(self) -> RunFields:
        """Score = overall mean; confidence mapped; rationale names the raised flags and link counts."""
        rationale = self._short_rationale()
        flags = self.failure_flags.active()
        if flags:
            rationale += " flags: " + ",".join(flags)
        if self.missing_link_count or self.spurious_link_count:
            rationale += f" links missing: {self.missing_link_count}, spurious: {self.spurious_link_count}"
        return RunFields(score=self.overall, confidence=self._confidence_value(), rationale=rationale)
