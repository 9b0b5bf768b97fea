"""The Python API: one item, many items, async, pairwise in both orders, inside a user's DSPy program."""

from __future__ import annotations

import asyncio
import json
import re

import dspy

from scijudge import Item, Judge, Run, get_spec, judge_items, load_judge
from scijudge.testing.scripted import request_text, scripted_lm


def rating_from_prompt(request) -> str:
    """Rate by a marker in the answer text so tests can predict each score."""
    found = re.findall(r"SCORE=(\d)", request_text(request))
    return json.dumps({"judgment": {"rationale": "marker", "rating": int(found[-1]) if found else 3}})


PAPERS = [{"title": "A study", "abstract": "It found things."}]
ITEMS = [Item(id=f"q{i}", question="Q?", papers=PAPERS, answer=f"An answer. SCORE={1 + i % 5}") for i in range(10)]


def test_one_item_returns_a_typed_result():
    judge = load_judge("yescieval.qa.correctness", lm=scripted_lm(rating_from_prompt))
    result = judge.judge_one(ITEMS[3])
    assert result.status == "ok" and result.score == 4.0 and result.result["rating"] == 4
    assert result.model == "scripted/judge" and result.judge == "yescieval.qa.correctness"
    assert len(result.spec_hash) == 16


def test_many_items_concurrently_into_one_run_store(tmp_path):
    lm = scripted_lm(rating_from_prompt)
    judges = [load_judge(name, lm=lm) for name in ("yescieval.qa.correctness", "yescieval.qa.readability")]
    with Run(tmp_path / "run.sqlite") as run:
        summary = judge_items(ITEMS, judges, run=run, concurrency=4)
        frame = run.to_pandas()
    assert summary.ok == 20 and len(frame) == 20
    expected = {item.id: 1 + i % 5 for i, item in enumerate(ITEMS)}
    assert all(frame.score == frame.item_id.map(expected))
    again = judge_items(ITEMS, judges, run=Run(tmp_path / "run.sqlite"), concurrency=4)
    assert again.judged == 0 and again.skipped_done == 20


def test_async_calls():
    judge = load_judge("yescieval.qa.coherence", lm=scripted_lm(rating_from_prompt))

    async def main():
        return await asyncio.gather(*(judge.ajudge_one(item) for item in ITEMS[:5]))

    results = asyncio.run(main())
    assert [r.score for r in results] == [1.0, 2.0, 3.0, 4.0, 5.0]


def test_pairwise_runs_both_orders_and_reports_in_item_terms():
    def respond(request):
        text = request_text(request)
        # A position-biased judge: always prefers whatever is shown first.
        return json.dumps({"judgment": {"rationale": "first looks better", "rating_a": 4, "rating_b": 2,
                                        "preference": "A"}}) if "answer_a" in text else "{}"

    judge = load_judge("yescieval.qa.correctness.pairwise", lm=scripted_lm(respond))
    item = Item(id="p1", question="Q?", papers=PAPERS, answer="first answer", answer_b="second answer")
    assert judge.parts(item) == ["AB", "BA"]
    ab, ba = (judge.judge_one(item, part) for part in ("AB", "BA"))
    assert ab.verdict == "A" and ba.verdict == "B", "position bias must show up as inconsistent verdicts"
    assert ab.score == 2.0 and ba.score == -2.0
    sent = [request_text(r) for r in judge.lm.engine.requests]
    assert sent[0].index("first answer") < sent[0].index("second answer")
    assert sent[1].index("second answer") < sent[1].index("first answer")


def test_a_judge_is_a_dspy_module_inside_a_user_program():
    class Pipeline(dspy.Module):
        def __init__(self):
            super().__init__()
            self.judge = Judge(get_spec("yescieval.qa.correctness"))

        def forward(self, question, answer):
            return self.judge(question=question, papers="[1] A study", answer=answer)

    lm = scripted_lm(rating_from_prompt)
    with dspy.context(lm=lm):
        prediction = Pipeline()(question="Q?", answer="A. SCORE=2")
    assert prediction.judgment.rating == 2 and prediction.abstained is False
    assert any(name.endswith("predict") for name, _ in Pipeline().named_predictors())


def test_abstention_is_a_prediction_not_an_exception():
    judge = load_judge("yescieval.qa.correctness", lm=scripted_lm(lambda r: "no idea"))
    prediction = judge(question="Q?", papers="[1] A study", answer="A")
    assert prediction.abstained and prediction.judgment is None and "parse_error" in prediction.reason


def test_pairwise_judges_do_not_apply_to_single_answer_items():
    lm = scripted_lm(rating_from_prompt)
    judges = [load_judge("yescieval.qa.correctness", lm=lm), load_judge("yescieval.qa.correctness.pairwise", lm=lm)]
    summary = judge_items(ITEMS[:3], judges, concurrency=2)
    assert summary.ok == 3 and summary.not_applicable == 3
