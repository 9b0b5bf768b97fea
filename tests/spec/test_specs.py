"""Shipped judge specs: they load, compile to DSPy signatures, and never leave placeholders in a prompt."""

from __future__ import annotations

import json

import jsonschema
import pytest

from scijudge.data import item_json_schema, load_items
from scijudge.errors import SpecError, UnknownJudgeError
from scijudge.spec.signatures import OUTPUT_FIELD, build_signature, render_instructions
from scijudge.spec.judge_spec import get_spec, list_specs, load_spec_file, resolve_judges

QA = ["correctness", "completeness", "informativeness", "coherence", "integration", "relevancy", "cohesion",
      "conciseness", "readability"]
DEEP = ["depth.mechanistic_understanding", "depth.causal_reasoning", "depth.temporal_precision",
        "breadth.context_coverage", "breadth.method_coverage", "breadth.dimension_coverage", "breadth.scale_coverage",
        "breadth.scope_coverage", "rigor.epistemic_calibration", "rigor.quantitative_evidence",
        "rigor.explicit_uncertainty", "gap_identification", "novelty"]


def test_all_yescieval_rubrics_ship_with_pairwise_variants():
    names = {s.name for s in list_specs()}
    for rubric in QA:
        assert f"yescieval.qa.{rubric}" in names and f"yescieval.qa.{rubric}.pairwise" in names
    for rubric in DEEP:
        assert f"yescieval.deep.{rubric}" in names


@pytest.mark.parametrize("spec", list_specs(), ids=lambda s: s.name)
def test_every_spec_compiles_with_typed_output_and_no_placeholder(spec):
    signature = build_signature(spec)
    assert list(signature.output_fields) == [OUTPUT_FIELD]
    assert set(signature.input_fields) == {i.name for i in spec.inputs}
    text = render_instructions(spec)
    assert "{" not in text and "}" not in text
    if spec.family == "likert":
        assert spec.scale is not None  # every point of its scale is anchored (1-5 for most, 1-3 for some)
        levels = [str(int(spec.scale.min + i)) for i in range(int(spec.scale.max - spec.scale.min) + 1)]
        assert sorted(spec.scale.anchors) == levels and len(levels) in (3, 5)
        for level in levels:
            assert f"- {level}: " in text


def test_deep_rubric_blocks_appear_only_when_filled():
    spec = get_spec("yescieval.deep.depth.causal_reasoning")
    assert set(spec.blocks) >= {"domain_vocabulary", "examples"}
    empty = render_instructions(spec)
    assert spec.blocks["domain_vocabulary"].title not in empty
    filled = render_instructions(spec.with_blocks(domain_vocabulary="perovskite: a crystal structure ABX3"))
    assert "perovskite: a crystal structure ABX3" in filled
    assert spec.blocks["examples"].title not in filled
    with pytest.raises(SpecError, match="unknown blocks"):
        spec.with_blocks(glossary="x")


def test_spec_hash_changes_with_instructions_only_when_content_changes():
    spec = get_spec("yescieval.qa.correctness")
    assert spec.spec_hash() == get_spec("yescieval.qa.correctness").spec_hash()
    assert spec.model_copy(update={"instructions": "other"}).spec_hash() != spec.spec_hash()


def test_resolve_judges_globs_and_paths(tmp_path):
    qa = resolve_judges(["yescieval.qa.*"])
    assert {s.name for s in qa} == {f"yescieval.qa.{r}" for r in QA} | {f"yescieval.qa.{r}.pairwise" for r in QA}
    path = tmp_path / "mine.toml"
    path.write_text('name = "my.judge"\nfamily = "likert"\ndescription = "d"\ninstructions = "Rate it."\n'
                    '[[inputs]]\nname = "answer"\n')
    assert resolve_judges([str(path)])[0].name == "my.judge"
    with pytest.raises(UnknownJudgeError, match="no judge matches"):
        resolve_judges(["nothing.*"])


def test_spec_error_names_field_and_line(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('name = "x"\nfamily = "likert"\ndescription = "d"\ninstructions = "i"\n'
                    '[[inputs]]\nname = "not an identifier"\n')
    with pytest.raises(SpecError) as err:
        load_spec_file(path)
    assert err.value.field == "inputs.0.name" and "bad.toml" in str(err.value)


def test_item_schema_file_matches_the_model_and_accepts_the_example_dataset(repo):
    shipped = json.loads((repo / "datasets" / "items.schema.json").read_text())
    assert shipped == item_json_schema(), "regenerate with: scijudge schema > datasets/items.schema.json"
    path = repo / "datasets" / "yescieval_example" / "items.jsonl"
    items, skipped = load_items(path)
    assert len(items) >= 12 and not skipped
    for line in path.read_text().splitlines():
        jsonschema.validate(json.loads(line), shipped)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"id": "x", "answer": "a", "extra": 1}, shipped)
