"""Both materials judges end to end: spec -> DSPy -> loopback OpenAI-compatible server -> run store."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from scijudge.data import Item
from scijudge.judges.build import load_judge
from scijudge.lm import make_lm
from scijudge.materials.outputs import FLAG_CODES, LinkingJudgment, SynthesisJudgment
from scijudge.run.store import Run
from scijudge.spec.judge_spec import get_spec
from scijudge.testing import OpenAICompatServer

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "true")

PAPER = ("LiFePO4/C was made by a solid-state route: Li2CO3, FeC2O4·2H2O and NH4H2PO4 were ball-milled in "
         "ethanol for 6 h, dried, and calcined at 700 °C for 10 h under Ar. Figure 4a shows the discharge "
         "capacity of LFP-700 over 100 cycles.")
ONTOLOGY = {"target_compound": "LiFePO4/C", "synthesis_method": "solid-state",
            "starting_materials": [{"name": "Li2CO3"}], "steps": [], "equipment": [], "notes": None}


def _synthesis_answer(scores: list[float], overall: float) -> str:
    judgment = {c: {"reasoning": f"checked {c}", "score": s} for c, s in zip(SynthesisJudgment.CRITERIA, scores)}
    judgment.update(reasoning="fine", overall=overall, confidence="medium", missing_information=[],
                    extraction_errors=[], improvement_suggestions=[])
    return json.dumps({"judgment": judgment})


def _linking_answer(flags: dict[str, bool]) -> str:
    judgment: dict[str, Any] = {c: {"reasoning": c, "score": 3.5} for c in LinkingJudgment.CRITERIA}
    judgment.update(reasoning="r", failure_flags=flags, confidence="low", missing_links=["LFP-800 -> Fig. 4a"],
                    spurious_links=[], suggestions=["resolve sample codes"])
    return json.dumps({"judgment": judgment})


def _refs_have_no_siblings(node: Any) -> bool:
    if isinstance(node, dict):
        if "$ref" in node and len(node) > 1:
            return False
        return all(_refs_have_no_siblings(v) for v in node.values())
    if isinstance(node, list):
        return all(_refs_have_no_siblings(v) for v in node)
    return True


def test_specs_load_with_their_inputs_and_outputs() -> None:
    synthesis, linking = get_spec("lematerial.synthesis"), get_spec("lematerial.linking")
    assert [(i.name, i.optional) for i in synthesis.inputs] == [
        ("source_text", False), ("extracted_synthesis", False), ("target_material", True)]
    assert [i.name for i in linking.inputs] == ["paper_text", "syntheses", "plot_data", "linking_output"]
    assert synthesis.output_type() is SynthesisJudgment and linking.output_type() is LinkingJudgment
    assert synthesis.scale is not None and synthesis.scale.step == 0.5
    assert "not an extraction error" in synthesis.instructions


def test_synthesis_judge_recomputes_overall_through_the_real_client() -> None:
    with OpenAICompatServer(lambda body: _synthesis_answer([4, 4.5, 4, 2, 4.5, 4.5, 5], overall=1.0)) as server:
        judge = load_judge("lematerial.synthesis", lm=make_lm("judge", api_base=server.url, cache=False))
        item = Item(id="lfp", inputs={"source_text": PAPER, "extracted_synthesis": json.dumps(ONTOLOGY)})
        result = judge.judge_one(item)
        request = server.requests[0]
    assert result.status == "ok"
    assert result.score == pytest.approx(28.5 / 7)  # hand mean of the seven scores, not the model's 1.0
    assert result.confidence == 0.67 and result.family == "synthesis"
    fmt = request["response_format"]
    assert fmt["type"] == "json_schema" and _refs_have_no_siblings(fmt["json_schema"]["schema"])
    prompt = json.dumps(request["messages"])
    assert "not an extraction error" in prompt
    # The spec's prepare hook fills the absent target material from the ontology before the call.
    user = request["messages"][-1]["content"]
    assert "[[ ## target_material ## ]]\n" + ONTOLOGY["target_compound"] in user


def test_off_scale_answer_is_retried_not_guessed() -> None:
    answers = iter([_synthesis_answer([4.2, 4, 4, 4, 4, 4, 4], 4.0), _synthesis_answer([3.5] * 7, 3.5)])
    with OpenAICompatServer(lambda body: next(answers)) as server:
        judge = load_judge("lematerial.synthesis", lm=make_lm("judge", api_base=server.url, cache=False))
        result = judge.judge_one(Item(id="a", inputs={"source_text": PAPER,
                                                       "extracted_synthesis": json.dumps(ONTOLOGY)}))
    assert result.status == "ok" and result.score == 3.5
    assert [a.outcome for a in result.attempts] == ["validation_error", "ok"]


def test_linking_flags_survive_the_run_store(tmp_path: Path) -> None:
    flags = {name: code in ("F1", "F4", "F8") for name, code in FLAG_CODES.items()}
    inputs = {"paper_text": PAPER, "syntheses": json.dumps([ONTOLOGY]),
              "plot_data": json.dumps([{"figure": "4a", "series": [{"name": "LFP-700", "points": [[1, 150]]}]}]),
              "linking_output": json.dumps({"links": [{"synthesis": "LiFePO4/C", "series": ["LFP-700"]}]})}
    with OpenAICompatServer(lambda body: _linking_answer(flags)) as server:
        judge = load_judge("lematerial.linking", lm=make_lm("judge", api_base=server.url, cache=False))
        result = judge.judge_one(Item(id="paper-1", inputs=inputs))
    assert result.status == "ok" and result.score == 3.5
    with Run(tmp_path / "run.sqlite") as run:
        run.record(result)
    with Run(tmp_path / "run.sqlite", create=False) as run:
        (row,) = list(run.rows())
    back = LinkingJudgment.model_validate(row["result"])
    assert back.failure_flags.active() == ["F1", "F4", "F8"]
    assert back.missing_links == ["LFP-800 -> Fig. 4a"] and row["family"] == "linking"


EXAMPLE = Path(__file__).resolve().parents[2] / "datasets" / "lematerial_example"


def test_example_dataset_items_are_valid_judge_inputs() -> None:
    from scijudge.data import load_items
    from scijudge.materials import prepare_linking_inputs, prepare_synthesis_inputs
    from scijudge.metrics.figures import figure_metric

    items, skipped = load_items(EXAMPLE / "synthesis_items.jsonl")
    assert skipped == [] and len(items) == 3
    targets = [prepare_synthesis_inputs(item.inputs)["target_material"] for item in items]
    assert targets == ["ZnO nanorods", "LiFePO4/C", "SnO2 nanoparticles"]
    (link,) = load_items(EXAMPLE / "linking_items.jsonl")[0]
    assert set(prepare_linking_inputs(link.inputs)) == {"paper_text", "syntheses", "plot_data", "linking_output"}
    (fig,) = figure_metric((EXAMPLE / "figure_extracted.json").read_text(), (EXAMPLE / "figure_truth.json").read_text())
    assert fig.unmatched_truth == ["LFP-600"] and fig.series[0].status == "matched"
    assert 0.0 < fig.series[0].symmetric_rmse < 0.2


def test_prepare_hook_rejects_bad_inputs_before_any_lm_call(tmp_path) -> None:
    from scijudge import InputError, judge_items, load_items

    items_path = tmp_path / "synth.jsonl"
    items_path.write_text(
        json.dumps({"id": "ok", "inputs": {"source_text": PAPER, "extracted_synthesis": json.dumps(ONTOLOGY)}}) + "\n"
        + json.dumps({"id": "short", "inputs": {"source_text": "Too short.", "extracted_synthesis": "{}"}}) + "\n")
    items, _ = load_items(items_path)
    with OpenAICompatServer(lambda body: _synthesis_answer([4] * 7, 4.0)) as server:
        judge = load_judge("lematerial.synthesis", lm=make_lm("judge", api_base=server.url, cache=False))
        with pytest.raises(InputError) as err:
            judge_items(items, [judge])
        assert server.count == 0
    assert err.value.field == "source_text" and err.value.line == 2 and "synth.jsonl" in str(err.value)
