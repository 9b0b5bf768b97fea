"""The fused multi-rubric judge and the item-first layout, with a scripted model (no network)."""

from __future__ import annotations

import json
import re

import pytest

from scijudge import Item, Run, get_spec, judge_items, load_judge
from scijudge.errors import SpecError
from scijudge.judges.fused import FusedJudge
from scijudge.judges.layout import apply_layout
from scijudge.chain.chain import strict_schema
from scijudge.testing.scripted import request_text, scripted_lm

RUBRICS = ["yescieval.qa.correctness", "yescieval.qa.completeness", "yescieval.qa.readability"]
PAPERS = [{"title": "A study", "abstract": "It found things."}]
ITEMS = [Item(id=f"q{i}", question="Q?", papers=PAPERS, answer=f"An answer. SCORE={1 + i % 5}") for i in range(4)]


def fused_answer(request) -> str:
    """Each rubric gets the item's marker score plus its position (so each rubric's rating is predictable)."""
    text = request_text(request)
    score = int(re.findall(r"SCORE=(\d)", text)[-1])
    names = re.findall(r"^\s*## (\w+)\s*$", text, flags=re.MULTILINE)
    return json.dumps({"judgment": {n: {"rationale": f"{n} reason", "rating": min(5, score + k)}
                                    for k, n in enumerate(names)}})


def test_one_call_stores_one_judgment_per_rubric_with_a_shared_call_id(tmp_path):
    lm = scripted_lm(fused_answer)
    fused = FusedJudge([get_spec(n) for n in RUBRICS], lm=lm)
    with Run(tmp_path / "fused.sqlite") as run:
        summary = judge_items(ITEMS, [fused], run=run, concurrency=4)
        frame = run.to_pandas()
    assert len(lm.engine.requests) == 4  # one call per item, not per rubric
    assert summary.ok == 12 and len(frame) == 12
    assert sorted(frame["judge"].unique()) == sorted(RUBRICS)
    for i, item in enumerate(ITEMS):
        rows = frame[frame["item_id"] == item.id].set_index("judge")
        assert rows["result"].map(lambda r: r["call_id"]).nunique() == 1
        for k, name in enumerate(RUBRICS):
            assert rows.loc[name, "score"] == min(5, 1 + i % 5 + k)
            assert rows.loc[name, "rationale"] == f"{name.rsplit('.', 1)[-1]} reason"
    # The call's 100 input and 20 output tokens (scripted engine) are split, not counted three times.
    per_call = frame.groupby(frame["result"].map(lambda r: r["call_id"]))[["tokens_in", "tokens_out"]].sum()
    assert (per_call["tokens_in"] == 100).all() and (per_call["tokens_out"] == 20).all()


def test_fused_judgments_have_their_own_identity_and_resume(tmp_path):
    lm = scripted_lm(fused_answer)
    separate = load_judge(RUBRICS[0], lm=lm)
    fused = FusedJudge([get_spec(n) for n in RUBRICS], lm=lm)
    assert fused.rubrics[0].spec_hash != separate.spec_hash
    with Run(tmp_path / "both.sqlite") as run:
        judge_items(ITEMS, [separate, fused], run=run)
        again = judge_items(ITEMS, [separate, fused], run=run)
        assert len(run) == 4 + 12
    assert again.judged == 0 and again.skipped_done == 8


def test_an_abstained_call_abstains_every_rubric():
    lm = scripted_lm(lambda request: "no json here")
    results = FusedJudge([get_spec(n) for n in RUBRICS], lm=lm).judge_item(ITEMS[0])
    assert [r.status for r in results] == ["abstained"] * 3
    assert len({r.result["call_id"] for r in results}) == 1 and all(r.reason for r in results)


def test_the_fused_schema_holds_each_rubrics_rating_bounds():
    fused = FusedJudge([get_spec(n) for n in RUBRICS[:2]])
    schema = strict_schema(fused.predict.signature.output_fields["judgment"].annotation)
    inner = schema["$defs"]["FusedJudgment"]
    assert inner["required"] == ["correctness", "completeness"]
    rating = schema["$defs"][inner["properties"]["correctness"]["$ref"].rsplit("/", 1)[-1]]["properties"]["rating"]
    assert (rating["minimum"], rating["maximum"]) == (1, 5)


def test_rubrics_that_read_other_inputs_cannot_be_fused():
    correctness = get_spec("yescieval.qa.correctness")
    fewer = get_spec("yescieval.qa.readability").model_copy(update={"inputs": correctness.inputs[:2]})
    with pytest.raises(SpecError, match="same inputs"):
        FusedJudge([correctness, fewer])
    with pytest.raises(SpecError, match="Likert rubrics only"):
        FusedJudge([correctness, get_spec("researchrubrics.checklist")])
    with pytest.raises(SpecError, match="at least two"):
        FusedJudge([get_spec("yescieval.qa.correctness")])


def test_item_first_puts_the_item_before_the_rubric_and_changes_identity():
    lm = scripted_lm(fused_answer)
    judge = load_judge(RUBRICS[0], lm=lm)
    first_hash = judge.spec_hash
    rubric_first = scripted_lm(lambda r: json.dumps({"judgment": {"rationale": "x", "rating": 3}}))
    load_judge(RUBRICS[0], lm=rubric_first).judge_one(ITEMS[0])
    apply_layout(judge, "item-first")
    lm.engine.respond = lambda r: json.dumps({"judgment": {"rationale": "x", "rating": 3}})
    assert judge.judge_one(ITEMS[0]).ok and judge.spec_hash != first_hash
    before, after = rubric_first.engine.requests[0], lm.engine.requests[0]
    assert before.system is not None and after.system is None
    text = request_text(after)
    assert text.startswith("[[ ## question ## ]]") and text.index("SCORE=1") < text.index(before.system[:60])
    assert sorted(request_text(before).split()) == sorted(text.split())  # the same words, in another order


def test_a_dspy_optimizer_compiles_a_fused_judge_against_human_labels():
    """Usable by optimizers: BootstrapFewShot keeps demos whose fused answers match the human scores."""
    import dspy

    from scijudge.judges.fused import fused_examples, fused_metric
    from scijudge.labels import HumanLabel

    fused = FusedJudge([get_spec(n) for n in RUBRICS], lm=scripted_lm(fused_answer))
    labels = [HumanLabel(item_id=item.id, judge=name, score=min(5, 1 + i % 5 + k), annotator="a")
              for i, item in enumerate(ITEMS) for k, name in enumerate(RUBRICS)]
    labels.append(HumanLabel(item_id=ITEMS[0].id, judge=RUBRICS[0], score=1, annotator="b"))  # consensus 1.0
    examples = fused_examples(fused, ITEMS, labels)
    assert [e.item_id for e in examples] == [i.id for i in ITEMS]
    assert examples[1].human == {"correctness": 2.0, "completeness": 3.0, "readability": 4.0}
    scores = [fused_metric(e, fused(**e.inputs())) for e in examples]
    assert scores[1:] == [1.0, 1.0, 1.0] and scores[0] == pytest.approx(1.0)
    off = dspy.Example(**examples[1].inputs(), human={"correctness": 5.0}).with_inputs("question")
    assert fused_metric(off, fused(**examples[1].inputs())) == pytest.approx(1 - 3 / 4)
    compiled = dspy.BootstrapFewShot(metric=fused_metric, max_bootstrapped_demos=2, max_labeled_demos=0).compile(
        fused, trainset=examples)
    assert len(compiled.predict.demos) == 2 and compiled is not fused
    assert compiled.judge_item(ITEMS[2])[0].ok
