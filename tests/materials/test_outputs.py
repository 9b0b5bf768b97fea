"""Typed outputs of the materials judges: scale snapping, recomputed overall, flags, provider schema."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from scijudge.materials.outputs import FLAG_CODES, LinkingFailureFlags, LinkingJudgment, SynthesisJudgment

SYNTH = SynthesisJudgment.CRITERIA
LINK = LinkingJudgment.CRITERIA


def _synthesis(scores: list[Any], **extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = {name: {"reasoning": f"about {name}", "score": s} for name, s in zip(SYNTH, scores)}
    data.update(reasoning="overall view", confidence="high", missing_information=["stirring speed"],
                extraction_errors=[], improvement_suggestions=["add the furnace"])
    data.update(extra)
    return data


def _linking(scores: list[Any], flags: Any = None, **extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = {name: {"reasoning": name, "score": s} for name, s in zip(LINK, scores)}
    data["failure_flags"] = flags if flags is not None else {}
    data.update(extra)
    return data


def test_scores_snap_to_half_steps_from_numbers_and_text() -> None:
    j = SynthesisJudgment.model_validate(_synthesis(["3.5", 4.1, "4/5", "five", 2.9, 1, 4.625]))
    assert [getattr(j, c).score for c in SYNTH] == [3.5, 4.0, 4.0, 5.0, 3.0, 1.0, 4.5]


@pytest.mark.parametrize("bad", [4.2, 3.3, 0.5, 5.5, "excellent", None, True])
def test_off_scale_scores_are_rejected(bad: Any) -> None:
    # 4.2 is 0.2 from the nearest step (more than a quarter step): not a rating on this scale
    with pytest.raises(ValidationError):
        SynthesisJudgment.model_validate(_synthesis([bad, 4, 4, 4, 4, 4, 4]))


def test_overall_is_the_mean_and_the_models_own_is_ignored() -> None:
    scores = [4.0, 4.5, 4.0, 2.0, 4.5, 4.5, 5.0]
    j = SynthesisJudgment.model_validate(_synthesis(scores, overall=1.0))
    assert j.overall == pytest.approx(28.5 / 7)  # hand sum: 4+4.5+4+2+4.5+4.5+5 = 28.5
    fields = j.run_fields()
    assert fields.score == pytest.approx(28.5 / 7) and fields.confidence == 1.0 and fields.verdict is None
    assert "equipment_extraction 2" in (fields.rationale or "") and "overall view" in (fields.rationale or "")


@pytest.mark.parametrize(("given", "expected"), [("low", 0.33), ("Medium", 0.67), ("HIGH", 1.0), (None, None)])
def test_confidence_mapping(given: str | None, expected: float | None) -> None:
    j = SynthesisJudgment.model_validate(_synthesis([3] * 7, confidence=given))
    assert j.run_fields().confidence == expected


def test_unknown_confidence_is_rejected() -> None:
    with pytest.raises(ValidationError):
        SynthesisJudgment.model_validate(_synthesis([3] * 7, confidence="very sure"))


def test_lematerial_flat_layout_is_read() -> None:
    flat = {
        "reasoning": "r",
        "scores": {**{f"{c}_score": 3.5 for c in SYNTH}, **{f"{c}_reasoning": c for c in SYNTH},
                   "overall_score": 4.9, "overall_reasoning": "o"},
        "confidence_level": "low", "missing_information": None, "extraction_errors": "one error",
    }
    j = SynthesisJudgment.model_validate(flat)
    assert j.overall == 3.5 and j.confidence == "low"
    assert j.material_extraction.reasoning == "material_extraction"
    assert j.missing_information == [] and j.extraction_errors == ["one error"]


def test_missing_criterion_is_an_error() -> None:
    data = _synthesis([3] * 7)
    del data["process_steps"]
    with pytest.raises(ValidationError) as err:
        SynthesisJudgment.model_validate(data)
    assert err.value.errors()[0]["loc"] == ("process_steps",)


def test_synthesis_round_trip() -> None:
    j = SynthesisJudgment.model_validate(_synthesis([4, 4.5, 3, 2.5, 5, 1.5, 4]))
    dumped = json.loads(json.dumps(j.model_dump(mode="json")))
    assert dumped["overall"] == pytest.approx(24.5 / 7)
    assert SynthesisJudgment.model_validate(dumped) == j


def test_linking_overall_and_flags() -> None:
    j = LinkingJudgment.model_validate(_linking([4, 3.5, 2, 5], {"f1_name_mismatch": True, "F7": "true",
                                                                  "f8_false_negative": "no"}, overall=5))
    assert j.overall == pytest.approx(14.5 / 4)
    assert j.failure_flags.active() == ["F1", "F7"]
    assert "flags: F1,F7" in (j.run_fields().rationale or "")


def test_linking_flags_from_codes_and_lematerial_names() -> None:
    j = LinkingJudgment.model_validate(_linking([3] * 4, ["F2", "f9", "F5"]))
    assert j.failure_flags.active() == ["F2", "F5", "F9"]
    old = LinkingJudgment.model_validate(_linking([3] * 4, {"f2_one_to_many_synthesis": True,
                                                            "f3_many_to_one_figure": True}))
    assert old.failure_flags.active() == ["F2", "F3"]
    with pytest.raises(ValidationError):
        LinkingJudgment.model_validate(_linking([3] * 4, ["F10"]))
    with pytest.raises(ValidationError):
        LinkingJudgment.model_validate(_linking([3] * 4, {"f1_name_mismatch": "maybe"}))


@pytest.mark.parametrize("raised", [set(), {"F1"}, {"F3", "F6"}, set(FLAG_CODES.values())])
def test_linking_flags_survive_a_json_round_trip(raised: set[str]) -> None:
    flags = {name: code in raised for name, code in FLAG_CODES.items()}
    j = LinkingJudgment.model_validate(_linking([4, 4, 4.5, 3], flags, missing_links=["A->fig2"],
                                                spurious_links=["B->fig3"], suggestions=["use legends"]))
    back = LinkingJudgment.model_validate(json.loads(json.dumps(j.model_dump(mode="json"))))
    assert back == j
    assert set(back.failure_flags.active()) == raised
    assert back.missing_links == ["A->fig2"] and back.spurious_links == ["B->fig3"]


def test_flags_are_independent_fields_with_readable_names() -> None:
    names = list(LinkingFailureFlags.model_fields)
    assert names == list(FLAG_CODES) and len(names) == 9
    for i, name in enumerate(names, start=1):
        assert name.startswith(f"f{i}_")
        only = LinkingFailureFlags.model_validate({name: True})
        assert only.active() == [f"F{i}"]


_ALLOWED_KEYWORDS = {
    "type", "properties", "required", "additionalProperties", "items", "enum", "anyOf", "$ref", "$defs",
    "description", "title", "const",
}


def _walk(node: Any, path: str = "#") -> list[str]:
    problems = []
    if isinstance(node, dict):
        is_schema = "type" in node or "$ref" in node or "anyOf" in node or "enum" in node
        if is_schema:
            for key in node:
                if key not in _ALLOWED_KEYWORDS:
                    problems.append(f"{path}: keyword {key!r}")
            if "$ref" in node and len(node) > 1:
                problems.append(f"{path}: keywords beside $ref")
            if node.get("type") == "object":
                if node.get("additionalProperties") is not False:
                    problems.append(f"{path}: additionalProperties is not false")
                if sorted(node.get("required", [])) != sorted(node.get("properties", {})):
                    problems.append(f"{path}: not every property is required")
        for key, value in node.items():
            if key in ("properties", "$defs"):
                for name, sub in value.items():
                    problems += _walk(sub, f"{path}/{key}/{name}")
            elif key in ("items",):
                problems += _walk(value, f"{path}/{key}")
            elif key == "anyOf":
                for k, sub in enumerate(value):
                    problems += _walk(sub, f"{path}/anyOf/{k}")
    return problems


@pytest.mark.parametrize("model", [SynthesisJudgment, LinkingJudgment])
def test_schema_is_provider_friendly(model: type) -> None:
    schema = model.model_json_schema()
    assert _walk(schema) == []
    assert "overall" not in schema["properties"]  # computed, never asked of the model
    text = json.dumps(schema)
    for keyword in ('"minimum"', '"maximum"', '"default"', '"multipleOf"', '"allOf"'):
        assert keyword not in text


def test_schema_checker_catches_problems() -> None:
    """The schema walker above must be able to fail, or the provider-friendly test proves nothing."""
    bad = {"type": "object", "properties": {"a": {"type": "number", "minimum": 1},
                                            "b": {"$ref": "#/$defs/X", "description": "d"}},
           "required": ["a"]}
    problems = _walk(bad)
    assert any("minimum" in p for p in problems)
    assert any("beside $ref" in p for p in problems)
    assert any("additionalProperties" in p for p in problems)
    assert any("not every property" in p for p in problems)


def test_linking_reads_lematerial_flat_layout() -> None:
    flat = {
        "reasoning": "r",
        "scores": {"material_identity_score": 4.0, "material_identity_reasoning": "m",
                   "performance_data_correctness_score": 3.0, "completeness_score": 2.5,
                   "format_structure_score": 5.0, "overall_score": 4.9},
        "failure_flags": {"f6_characterization_confusion": True},
        "confidence_level": "high",
        "improvement_suggestions": ["filter XRD panels"],
    }
    j = LinkingJudgment.model_validate(flat)
    assert j.overall == pytest.approx(14.5 / 4)
    assert j.failure_flags.active() == ["F6"] and j.suggestions == ["filter XRD panels"]
    assert j.material_identity.reasoning == "m" and j.run_fields().confidence == 1.0
