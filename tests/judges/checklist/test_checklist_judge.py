"""The checklist judge through the real client: verdicts, chunked long reports, quotes, abstentions."""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from scijudge.data import Item
from scijudge.errors import InputError, SpecError
from scijudge.importers.researchrubrics import load_checklist_items
from scijudge.judges.checklist import (
    ChecklistJudge,
    load_checklist_judge,
    normalise_for_quotes,
    quote_found,
    split_report,
    token_counter_for,
    unmatched_quotes,
)
from scijudge.lm import make_lm
from scijudge.metrics.compliance import compliance_by_report
from scijudge.run.api import judge_items
from scijudge.run.store import Run
from scijudge.spec.judge_spec import get_spec
from scijudge.testing import OpenAICompatServer, Reply
from scijudge.testing.openai_server import last_user_text

EXAMPLE = Path(__file__).resolve().parents[3] / "datasets" / "researchrubrics_example"
NEEDLE = "The sealed minimodules kept 91 percent of their starting efficiency after 3,000 hours on a Freiburg rooftop."


def _verdict(verdict: str, quotes: list[str] | None = None, confidence: float = 0.8) -> str:
    return json.dumps({"judgment": {"reasoning": f"judged {verdict}", "evidence_quotes": quotes or [],
                                    "missing_elements": [], "verdict": verdict, "confidence": confidence}})


def _field(text: str, name: str) -> str:
    """The value of one ``[[ ## name ## ]]`` input field in a DSPy user message."""
    start = text.index(f"[[ ## {name} ## ]]\n") + len(f"[[ ## {name} ## ]]\n")
    end = text.find("\n\n[[ ## ", start)
    return text[start:end if end >= 0 else None]


def _judge(server: OpenAICompatServer, **options: Any) -> ChecklistJudge:
    return load_checklist_judge(options.pop("spec", "researchrubrics.checklist"),
                                lm=make_lm("judge", api_base=server.url, cache=False), **options)


def _item(report: str, criteria: list[tuple[str, float, str]]) -> Item:
    rubrics = [{"criterion": c, "weight": w, "axis": a} for c, w, a in criteria]
    return Item(id="r1", question="Review perovskite stability.", answer=report, meta={"rubrics": rubrics})


def _long_report(paragraphs: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    words = ["perovskite", "lattice", "moisture", "encapsulation", "degradation", "iodide", "migration", "module",
             "efficiency", "thermal", "stability", "interface", "oxygen", "layer", "cation", "hysteresis"]
    paras = [" ".join(rng.choice(words) for _ in range(rng.randint(60, 140))) + "." for _ in range(paragraphs)]
    paras.insert(paragraphs // 2, NEEDLE)
    return "\n\n".join(paras)


def test_short_report_is_one_call_with_the_report_first(loopback: Callable[..., OpenAICompatServer]) -> None:
    server = loopback(lambda body: _verdict("satisfied", ["moisture  ingress\nharms the film", "made-up quote"]))
    report = "# Stability\n\nMoisture ingress harms the film.\n\nEncapsulation helps."
    item = _item(report, [("Mentions moisture.", 3, "Explicit Criteria"), ("Mentions heat.", -2, "Implicit Criteria")])
    judge = _judge(server)
    first, second = (judge.judge_one(item, part) for part in judge.parts(item))
    assert server.count == 2
    assert (first.status, first.score, first.verdict, first.confidence) == ("ok", 1.0, "satisfied", 0.8)
    assert first.result["mode"] == "single" and first.result["weight"] == 3.0
    assert first.result["report_tokens"] is None and first.result["token_counter"].startswith("not counted")
    assert first.result["axis"] == "Explicit Criteria" and first.result["unmatched_quotes"] == ["made-up quote"]
    assert second.result["weight"] == -2.0 and second.part != first.part
    prompts = [last_user_text(body) for body in server.requests]
    assert prompts[0].startswith("[[ ## report ## ]]\n" + report)
    assert prompts[0].index("[[ ## report ## ]]") < prompts[0].index("[[ ## criterion ## ]]")
    shared = 0
    while prompts[0][shared] == prompts[1][shared]:
        shared += 1
    assert shared > prompts[0].index("[[ ## criterion ## ]]")  # report and task: one cacheable prefix
    systems = [body["messages"][0]["content"] for body in server.requests]
    assert systems[0] == systems[1]


@pytest.mark.slow
def test_300k_token_report_is_chunked_and_judged(loopback: Callable[..., OpenAICompatServer]) -> None:
    report = _long_report(2400)
    budget, overlap = 100_000, 500
    seen_parts: list[str] = []

    def handler(body: dict[str, Any]) -> Any:
        text = last_user_text(body)
        if "[[ ## report_part ## ]]" in text:
            part = _field(text, "report_part")
            seen_parts.append(part)
            if NEEDLE in part:
                quote = NEEDLE.replace("3,000 hours", "3,000\n   hours")
                return json.dumps({"judgment": {"quotes": [quote], "notes": "outdoor result", "bearing": "supports"}})
            return json.dumps({"judgment": {"quotes": [], "notes": "nothing relevant", "bearing": "none"}})
        assert "[[ ## evidence ## ]]" in text
        evidence = _field(text, "evidence")
        assert evidence.count("Part ") == 4 and "Freiburg rooftop" in evidence
        return Reply(_verdict("satisfied", [NEEDLE, "Modules lasted 40 years."]), prompt_tokens=900)

    server = loopback(handler)
    judge = _judge(server, chunk_tokens=budget, overlap_tokens=overlap)
    item = _item(report, [("Reports an outdoor stability result.", 4, "Explicit Criteria"),
                          ("Names the test site.", 1, "Implicit Criteria")])
    results = [judge.judge_one(item, part) for part in judge.parts(item)]
    count, method = token_counter_for(judge.lm)
    assert method == "litellm" and count(report) > 300_000
    # 2 criteria x (4 evidence calls + 1 synthesis call), no more
    assert server.count == 10 and len(seen_parts) == 8
    for result in results:
        assert result.status == "ok" and result.score == 1.0
        assert result.result["mode"] == "chunked" and result.result["chunks"] == 4
        assert result.result["unmatched_quotes"] == ["Modules lasted 40 years."]
        assert result.tokens_in == 4 * 50 + 900 and len(result.attempts) == 5
        parts = result.result["chunk_evidence"]
        assert parts[0]["start"] == 0 and parts[-1]["end"] == len(report)
        for before, after in itertools.pairwise(parts):
            assert after["start"] < before["end"]  # consecutive parts overlap
            assert count(report[after["start"]:before["end"]]) <= overlap + 5
        assert [p["bearing"] for p in parts].count("supports") == 1
        assert all(p["unmatched_quotes"] == [] for p in parts)
    for part in seen_parts:
        assert count(part) <= budget
    # the same part of the report opens both criteria's evidence prompts (provider prompt caching)
    assert seen_parts[:4] == seen_parts[4:]


@pytest.mark.slow
def test_failed_step_abstains_the_criterion_without_synthesis(loopback: Callable[..., OpenAICompatServer]) -> None:
    report = "\n\n".join(f"Paragraph {i} talks about module efficiency and damp heat testing." for i in range(40))

    def handler(body: dict[str, Any]) -> str:
        text = last_user_text(body)
        if "[[ ## report_part ## ]]" in text and "Part 2 of" in _field(text, "part_position"):
            return "I would rather not answer in JSON."
        if "[[ ## report_part ## ]]" in text:
            return json.dumps({"judgment": {"quotes": [], "notes": "n", "bearing": "none"}})
        return _verdict("satisfied")

    server = loopback(handler)
    judge = _judge(server, chunk_tokens=200, overlap_tokens=20)
    item = _item(report, [("Describes damp heat testing.", 2, "Explicit Criteria")])
    result = judge.judge_one(item, judge.parts(item)[0])
    assert result.status == "abstained" and result.score is None and result.verdict is None
    assert result.reason.startswith("evidence, part 2 of ") and "parse_error" in result.reason
    assert result.result["weight"] == 2.0 and result.result["axis"] == "Explicit Criteria"
    assert result.result["chunks"] > 2 and len(result.result["chunk_evidence"]) == 1
    assert not any("[[ ## evidence ## ]]" in last_user_text(b) for b in server.requests)  # stopped early
    assert [a.outcome for a in result.attempts].count("parse_error") == 6


def test_failed_criteria_lower_coverage_not_compliance(loopback: Callable[..., OpenAICompatServer],
                                                       tmp_path: Path) -> None:
    items, _ = load_checklist_items(EXAMPLE / "tasks.jsonl", EXAMPLE / "reports")
    verdicts = {  # report rr-example-001; the encapsulation criterion always gets an unreadable answer
        "Identifies moisture ingress": "satisfied", "Discusses at least three": "satisfied",
        "Distinguishes accelerated": "not_satisfied", "Supports at least one": "not_satisfied",
        "Claims that perovskite": "not_satisfied",
    }

    def handler(body: dict[str, Any]) -> str:
        criterion = _field(last_user_text(body), "criterion")
        if criterion.startswith("Names encapsulation"):
            return "{broken"
        return _verdict(next((v for k, v in verdicts.items() if criterion.startswith(k)), "satisfied"))

    server = loopback(handler)
    judge = _judge(server)
    with Run(tmp_path / "run.sqlite") as run:
        summary = judge_items(items[:1], [judge], run=run, concurrency=6)
        frame = run.to_pandas()
    assert (summary.ok, summary.abstained) == (5, 1)
    abstained = frame[frame["status"] == "abstained"].iloc[0]
    assert abstained["score"] is None or abstained["score"] != abstained["score"]  # None/NaN, never 0
    assert abstained["result"]["weight"] == 3.0
    (row,) = compliance_by_report(frame).to_dict(orient="records")
    # judged: 5 (sat) + 4 (sat) + 3·0 + 2·0 − 4·0 = 9 over judged positive weights 5+4+3+2 = 14
    assert row["compliance"] == pytest.approx(9 / 14) and row["coverage"] == pytest.approx(5 / 6)
    # bounds over all positive weights 17: the missing +3 criterion unmet → 9/17, met → 12/17
    assert (row["compliance_lo"], row["compliance_hi"]) == (pytest.approx(9 / 17), pytest.approx(12 / 17))
    assert (row["n_abstained"], row["n_judged"], row["complete"]) == (1, 5, False)


def test_ternary_spec_scores_partial_half_and_binary_rejects_it(loopback: Callable[..., OpenAICompatServer]) -> None:
    server = loopback(lambda body: _verdict("Partially Satisfied"))
    item = _item("Heat matters. Moisture matters.", [("Discusses three mechanisms.", 4, "Explicit Criteria")])
    ternary = _judge(server, spec="researchrubrics.checklist.ternary")
    result = ternary.judge_one(item, ternary.parts(item)[0])
    assert (result.status, result.verdict, result.score) == ("ok", "partially", 0.5)
    assert result.judge == "researchrubrics.checklist.ternary"
    binary = _judge(server)
    refused = binary.judge_one(item, binary.parts(item)[0])
    assert refused.status == "abstained" and "verdict" in refused.reason
    assert {a.outcome for a in refused.attempts} == {"validation_error"}
    assert binary.spec_hash != ternary.spec_hash


def test_spec_hash_depends_on_chunking_settings() -> None:
    assert ChecklistJudge(chunk_tokens=5000).spec_hash != ChecklistJudge(chunk_tokens=6000).spec_hash
    assert ChecklistJudge().spec_hash == ChecklistJudge().spec_hash


def test_bad_setup_and_bad_items_are_clear_errors() -> None:
    with pytest.raises(SpecError, match="output must be CriterionVerdict.*a step inside the checklist judge"):
        ChecklistJudge(get_spec("researchrubrics.evidence"))
    with pytest.raises(SpecError, match="family 'checklist'"):
        ChecklistJudge(get_spec("yescieval.qa.correctness"))
    with pytest.raises(InputError, match="overlap"):
        ChecklistJudge(chunk_tokens=1000, overlap_tokens=800)
    judge = ChecklistJudge()
    with pytest.raises(InputError, match="no rubric") as caught:
        judge.parts(Item(id="x", answer="text"))
    assert caught.value.field == "meta.rubrics"
    item = _item("text", [("A.", 0, "Explicit Criteria")])
    with pytest.raises(InputError, match="must not be zero") as caught:
        judge.parts(item)
    assert caught.value.field == "meta.rubrics.0.weight"
    good = _item("text", [("A.", 1, "Explicit Criteria")])
    with pytest.raises(InputError, match="no criterion with id"):
        judge.judge_one(good, "c0000000000")


def test_split_report_covers_the_text_within_budget() -> None:
    rng = random.Random(3)
    text = "\n\n".join(" ".join("w" * rng.randint(1, 9) for _ in range(rng.randint(3, 80))) + "." for _ in range(300))
    text += "\n\n" + "x" * 5000  # one unbreakable run: cut by characters

    def words(part: str) -> int:
        return len(part.split()) + len(part) // 400

    chunks = split_report(text, 400, 40, words)
    assert chunks[0].start == 0 and chunks[-1].end == len(text)
    for chunk in chunks:
        assert chunk.tokens == words(text[chunk.start:chunk.end]) <= 400
    for before, after in itertools.pairwise(chunks):
        assert before.start < after.start <= before.end  # no gap, always progress
        assert words(text[after.start:before.end]) <= 40 + 2
    with pytest.raises(ValueError):
        split_report(text, 100, 100, words)


@pytest.mark.slow
def test_token_counter_preference(monkeypatch: pytest.MonkeyPatch) -> None:
    class FakeTokenizer:
        def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
            return [0] * len(text.split())

    class Engine:
        tokenizer = FakeTokenizer()

    class LocalLM:
        model = "local/tiny"
        engine = Engine()

    count, method = token_counter_for(LocalLM())
    assert method == "tokenizer" and count("three short words") == 3
    count, method = token_counter_for(None, tokenizer=lambda text: 7)
    assert method == "tokenizer" and count("anything") == 7
    import litellm

    from scijudge.judges import checklist

    checklist._litellm_counter.cache_clear()
    monkeypatch.setattr(litellm, "token_counter", lambda **kw: (_ for _ in ()).throw(ValueError("no tokenizer")))
    count, method = token_counter_for(type("LM", (), {"model": "openai/unknown"})())
    assert method == "chars/4" and count("abcdefghi") == 3  # ceil(9 / 4)
    checklist._litellm_counter.cache_clear()


def test_quote_matching_tolerates_layout_not_invention() -> None:
    source = "The film \u201cturns yellow\u201d within hours \u2013 then stops absorbing.\nSecond   line here."
    normalised = normalise_for_quotes(source)
    assert quote_found('the film "turns YELLOW" within hours - then', normalised)
    assert quote_found("The film ... then stops absorbing. Second line", normalised)
    assert quote_found("\u201cSecond line here.\u201d", normalised)
    assert not quote_found("then stops absorbing ... The film", normalised)  # fragments out of order
    assert not quote_found("turns green", normalised) and not quote_found("   ", normalised)
    assert unmatched_quotes(["Second line here.", "Third line."], source) == ["Third line."]
