"""Issue 16, LeMaterial side: the old input name, the source's minimum text length, its method and material-type
lists, and missing/spurious link counts derived from the failure flags."""

from __future__ import annotations

import json
from typing import Any

import pytest

from scijudge.data import Item
from scijudge.errors import InputError
from scijudge.judges.build import load_judge
from scijudge.materials import MIN_SOURCE_CHARS, check_source_text, parse_ontology
from scijudge.materials.ontology import MATERIAL_TYPES, SYNTHESIS_METHODS
from scijudge.materials.outputs import LinkingJudgment
from scijudge.testing.scripted import scripted_lm

ONTOLOGY = {"target_compound": "LiFePO4/C", "synthesis_method": "solid-state", "steps": []}
PAPER = "LiFePO4/C was made by a solid-state route and calcined at 700 C under argon."  # 78 characters


def test_old_input_name_is_accepted_as_an_alias() -> None:
    judge = load_judge("lematerial.synthesis", lm=scripted_lm(lambda r: ""))
    old = Item(id="p1", inputs={"source_text": PAPER, "extracted_ontology_json": json.dumps(ONTOLOGY)})
    new = Item(id="p1", inputs={"source_text": PAPER, "extracted_synthesis": json.dumps(ONTOLOGY)})
    assert judge.inputs_for(old) == judge.inputs_for(new)
    assert judge.inputs_for(old)["target_material"] == "LiFePO4/C"
    with pytest.raises(InputError) as err:
        judge.inputs_for(Item(id="p2", inputs={"source_text": PAPER}))
    assert err.value.field == "extracted_synthesis"


def test_minimum_source_text_is_the_source_methods_50_characters() -> None:
    assert MIN_SOURCE_CHARS == 50
    assert check_source_text("x" * 50) == "x" * 50
    with pytest.raises(InputError, match="at least 50"):
        check_source_text("  " + "x" * 49 + "  ")


@pytest.mark.parametrize(("written", "method"), [("solid-state", "solid-state"), ("Solid State", "solid-state"),
                                                 ("co-precipitation", "coprecipitation"), ("microwave heating", "other"), ("SOL_GEL", "sol-gel"),  # noqa: E501 - a data record, kept on one line
                                                 ("float zone and Bridgman", "float zone & Bridgman")])
def test_synthesis_method_takes_the_source_list_with_other(written: str, method: str) -> None:
    parsed = parse_ontology({**ONTOLOGY, "synthesis_method": written})
    assert parsed.synthesis_method == method and method in SYNTHESIS_METHODS
    assert parsed.stated_synthesis_method == (written if method == "other" else None)


def test_material_type_takes_the_source_list_with_other() -> None:
    assert len(MATERIAL_TYPES) == 16 and MATERIAL_TYPES[-1] == "other"
    assert parse_ontology({**ONTOLOGY, "target_compound_type": "Metals and Alloys"}).target_compound_type == \
        "metals & alloys"
    odd = parse_ontology({**ONTOLOGY, "target_compound_type": "battery cathode"})
    assert (odd.target_compound_type, odd.stated_compound_type) == ("other", "battery cathode")
    assert parse_ontology({**ONTOLOGY, "target_compound_type": None}).target_compound_type is None
    schema = parse_ontology(ONTOLOGY).model_json_schema()["properties"]["synthesis_method"]
    assert "other" in json.dumps(schema) and "hydrothermal" in json.dumps(schema)  # allowed values in the schema


def _linking(flags: dict[str, bool], missing: list[str], spurious: list[str]) -> LinkingJudgment:
    data: dict[str, Any] = {c: {"reasoning": c, "score": 3} for c in LinkingJudgment.CRITERIA}
    data.update(failure_flags=flags, missing_links=missing, spurious_links=spurious)
    return LinkingJudgment.model_validate(data)


def test_flags_map_to_missing_and_spurious_link_counts() -> None:
    none = _linking({}, [], [])
    assert (none.missing_link_count, none.spurious_link_count) == (0, 0)
    flagged = _linking({"F8": True, "F9": True}, [], [])
    assert (flagged.missing_link_count, flagged.spurious_link_count) == (1, 1)  # a flag means at least one
    listed = _linking({"F8": True}, ["S1 -> Fig 2", "S2 -> Fig 2"], ["S3 -> Fig 5"])
    assert (listed.missing_link_count, listed.spurious_link_count) == (2, 1)
    dumped = listed.model_dump(mode="json")
    assert dumped["missing_link_count"] == 2 and dumped["spurious_link_count"] == 1  # stored with the result
    assert "links missing: 2, spurious: 1" in listed.run_fields().rationale
    assert LinkingJudgment.model_validate(dumped).missing_link_count == 2  # a stored result reads back
