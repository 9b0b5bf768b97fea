"""Synthesis ontology, plot data and linking output: parsing the public JSON and naming bad fields."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scijudge.errors import InputError
from scijudge.materials import (
    MIN_SOURCE_CHARS,
    check_source_text,
    infer_target_material,
    is_extraction_failure,
    parse_linking_output,
    parse_ontology,
    parse_plot_data,
    parse_syntheses,
    prepare_linking_inputs,
    prepare_synthesis_inputs,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "lematerial_annotations"
SOURCE = (
    "CuO and Nb2O5 were mixed in a stoichiometric ratio, ground in an agate mortar, pressed into pellets "
    "and sintered in air at 800 °C for 36 h and then at 950 °C for 40 h."
)


def _ontology() -> dict:
    return {
        "target_compound": "Cu3Nb2O8",
        "target_compound_type": "ceramics & glasses",
        "synthesis_method": "solid-state",
        "starting_materials": [{"vendor": None, "name": "CuO", "amount": None, "unit": None, "purity": None}],
        "steps": [{
            "step_number": 1, "action": "heat", "description": "sinter", "materials": [], "equipment": [
                {"name": "box furnace", "instrument_vendor": None, "settings": "5 C/min"}],
            "conditions": {"temperature": 800.0, "temp_unit": "C", "duration": 36, "time_unit": "h",
                           "pressure": None, "pressure_unit": None, "atmosphere": "air", "stirring": None,
                           "stirring_speed": None, "ph": None},
        }],
        "equipment": [],
        "notes": None,
    }


def test_public_lematerial_entries_parse_with_nulls_and_descriptive_units() -> None:
    entries = json.loads((DATA / "2101.00001" / "result.json").read_text())
    onto = parse_ontology(entries[0])  # the {"material", "synthesis", "evaluation"} wrapper is unwrapped
    assert onto.target_compound == "Cu3Nb2O8"
    assert onto.starting_materials[0].amount is None
    # LeMaterial's human files write units as {"descriptive": "stoichiometric"}
    assert onto.starting_materials[0].unit == "stoichiometric"
    assert onto.steps[0].conditions is not None and onto.steps[0].conditions.temperature == 800.0
    assert not onto.extraction_failed
    failed = parse_ontology(entries[2])
    assert failed.extraction_failed and is_extraction_failure(entries[2])


def test_parse_from_text_dict_and_model_agree() -> None:
    data = _ontology()
    from_text = parse_ontology(json.dumps(data))
    assert from_text == parse_ontology(data) == parse_ontology(from_text)
    assert from_text.steps[0].equipment[0].settings == "5 C/min"


def test_invalid_json_names_file_line_and_field() -> None:
    with pytest.raises(InputError) as err:
        parse_ontology('{"target_compound": "X",\n "steps": [}', source="items.jsonl", line=7)
    assert err.value.field == "extracted_synthesis"
    assert err.value.file == "items.jsonl" and err.value.line == 7
    assert "not valid JSON" in str(err.value) and "line 2" in str(err.value)


def test_missing_and_mistyped_fields_are_named() -> None:
    data = _ontology()
    del data["target_compound"]
    with pytest.raises(InputError) as err:
        parse_ontology(data)
    assert err.value.field == "extracted_synthesis.target_compound"

    data = _ontology()
    data["steps"][0]["conditions"]["temperature"] = "hot"
    with pytest.raises(InputError) as err:
        parse_ontology(data, source="x.json")
    assert err.value.field == "extracted_synthesis.steps[0].conditions.temperature"
    assert str(err.value).startswith("x.json, field 'extracted_synthesis.steps[0].conditions.temperature'")


def test_non_finite_quantities_are_rejected() -> None:
    data = _ontology()
    data["steps"][0]["conditions"]["ph"] = float("nan")
    with pytest.raises(InputError) as err:
        parse_ontology(json.dumps(data))  # Python's json writes NaN; it must not pass as a pH
    assert err.value.field == "extracted_synthesis.steps[0].conditions.ph"


def test_not_an_object() -> None:
    with pytest.raises(InputError, match="expected a JSON object"):
        parse_ontology("[1, 2]")
    with pytest.raises(InputError, match="is empty"):
        parse_ontology("   ")


def test_parse_syntheses_names_the_index() -> None:
    good = _ontology()
    assert len(parse_syntheses([good, {"material": "m", "synthesis": good}])) == 2
    assert len(parse_syntheses({"syntheses": [good]})) == 1
    with pytest.raises(InputError) as err:
        parse_syntheses([good, {"steps": []}])
    assert err.value.field == "syntheses[1].target_compound"


def test_infer_target_material() -> None:
    assert infer_target_material(_ontology()) == "Cu3Nb2O8"
    assert infer_target_material({"material": "5CeGd", "synthesis": _ontology()}) == "5CeGd"
    assert infer_target_material({**_ontology(), "target_compound": "  LiFePO4 /  C "}) == "LiFePO4 / C"
    assert infer_target_material({**_ontology(), "target_compound": "unknown"}) is None
    assert infer_target_material(json.dumps({**_ontology(), "target_compound": ""})) is None


def test_source_text_threshold() -> None:
    assert check_source_text(SOURCE) == SOURCE
    with pytest.raises(InputError) as err:
        check_source_text("CuO was heated.", source="items.jsonl", line=3)
    assert err.value.field == "source_text" and err.value.line == 3
    assert f"at least {MIN_SOURCE_CHARS}" in str(err.value)
    with pytest.raises(InputError, match="must be text"):
        check_source_text(None)


def test_prepare_synthesis_inputs_fills_target_from_ontology() -> None:
    out = prepare_synthesis_inputs({"source_text": SOURCE, "extracted_synthesis": _ontology()})
    assert out["target_material"] == "Cu3Nb2O8"
    assert json.loads(out["extracted_synthesis"])["target_compound"] == "Cu3Nb2O8"
    kept = prepare_synthesis_inputs({"source_text": SOURCE, "extracted_synthesis": json.dumps(_ontology()),
                                     "target_material": "CuNb2O6"})
    assert kept["target_material"] == "CuNb2O6"
    with pytest.raises(InputError) as err:
        prepare_synthesis_inputs({"source_text": SOURCE})
    assert err.value.field == "extracted_synthesis"


def _plot() -> dict:
    return {
        "figure": "Fig. 4a",
        "x_axis": {"label": "Cycle", "unit": "", "scale": "linear"},
        "y_axis": {"label": "Capacity", "unit": "mAh/g", "scale": "log"},
        "series": [{"name": "LFP-700", "points": [[1, 150.0], [2, 148.0]]},
                   {"name": "LFP-800", "points": {"x": [1, 2], "y": [160.0, 159.5]}}],
    }


def test_plot_data_shapes() -> None:
    (own,) = parse_plot_data(_plot())
    assert own.y_axis.scale == "log" and own.series[1].points == [(1.0, 160.0), (2.0, 159.5)]

    lematerial = {
        "metadata": {"x_axis_label": "T", "x_axis_unit": "K", "left_y_axis_label": "rho",
                     "right_y_axis_label": "S", "is_dual_axis": True, "subplot_label": "b"},
        "data_series": [{"name": "s1", "axis": "right", "points": [{"x": 1, "y": 2, "series_name": "s1"}]}],
        "technical_takeaways": [],
    }
    (lm,) = parse_plot_data(json.dumps(lematerial))
    assert lm.figure == "b" and lm.y2_axis is not None and lm.y2_axis.label == "S"
    assert lm.axis_of(lm.series[0]) is lm.y2_axis

    truth = {"subplots": [{"x_label": "t", "y_label": "y", "coordinates": {"A": [[0, 1], [1, 2]]}},
                          {"x_label": "t", "y_label": "z", "coordinates": {"B": [[0, 3]]}}]}
    figs = parse_plot_data(truth)
    assert [f.series[0].name for f in figs] == ["A", "B"]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_points_name_the_series_and_point(bad: float) -> None:
    data = _plot()
    data["series"][1]["points"] = [[1, 160.0], [2, bad]]
    with pytest.raises(InputError) as err:
        parse_plot_data(json.dumps(data), source="pred.json")
    assert err.value.field == "plot_data.series[1].points"
    assert "points[1].y" in str(err.value) and err.value.file == "pred.json"


def test_log_axis_needs_positive_values() -> None:
    data = _plot()
    data["series"][0]["points"][1] = [2, 0.0]
    with pytest.raises(InputError) as err:
        parse_plot_data(data)
    assert err.value.field == "plot_data.series"
    assert "series[0]" in str(err.value) and "points[1].y" in str(err.value) and "logarithmic" in str(err.value)


def test_unknown_scale_and_bad_points() -> None:
    data = _plot()
    data["x_axis"]["scale"] = "sqrt"
    with pytest.raises(InputError) as err:
        parse_plot_data(data)
    assert err.value.field == "plot_data.x_axis.scale"
    data = _plot()
    data["series"][0]["points"] = {"x": [1, 2, 3], "y": [1]}
    with pytest.raises(InputError, match="'x' has 3 values but 'y' has 1"):
        parse_plot_data(data)


def test_linking_output_shapes_and_errors() -> None:
    out = parse_linking_output([{"material": "LiFePO4", "plot_series": "LFP-700"},
                                {"synthesis_id": "s2", "series": [{"figure": "4a", "name": "LFP-800"}]}])
    assert [link.synthesis for link in out.links] == ["LiFePO4", "s2"]
    assert out.links[0].series[0].series == "LFP-700" and out.links[1].series[0].figure == "4a"
    with pytest.raises(InputError) as err:
        parse_linking_output({"links": [{"series": ["x"]}]})
    assert err.value.field == "linking_output.links[0].synthesis"


def test_prepare_linking_inputs_checks_every_json_field() -> None:
    item = {"paper_text": SOURCE, "syntheses": [_ontology()], "plot_data": [_plot()],
            "linking_output": {"links": [{"synthesis": "Cu3Nb2O8", "series": ["LFP-700"]}]}}
    out = prepare_linking_inputs(item)
    assert set(out) == {"paper_text", "syntheses", "plot_data", "linking_output"}
    assert all(isinstance(v, str) for v in out.values())
    with pytest.raises(InputError) as err:
        prepare_linking_inputs({**item, "plot_data": "{not json"})
    assert err.value.field == "plot_data"
    with pytest.raises(InputError) as err:
        prepare_linking_inputs({**item, "paper_text": "short"})
    assert err.value.field == "paper_text"
