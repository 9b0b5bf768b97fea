"""The fallback chain through the real DSPy client against a loopback OpenAI-compatible server."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from scijudge import ChainConfig, Item, Judge, StructuredChain, make_lm
from scijudge.spec.judge_spec import JudgeSpec
from scijudge.testing import Fault, Reply

SPEC = JudgeSpec(
    name="test.correctness", family="likert", description="test rubric", instructions="Rate correctness.",
    inputs=[{"name": "question"}, {"name": "papers", "optional": True}, {"name": "answer"}],
)
ITEM = Item(id="i1", question="Why is the sky blue?", answer="Rayleigh scattering.")


def wrapped(rating: Any, rationale: str = "because") -> str:
    return json.dumps({"judgment": {"rationale": rationale, "rating": rating}})


def make_judge(server: Any, engine: str = "auto", timeout: float = 5.0, **chain: Any) -> Judge:
    config = ChainConfig(backoff_base=0.01, backoff_max=2.0, **chain)
    lm = make_lm("openai/judge", api_base=server.url, cache=False, timeout=timeout, engine=engine)
    return Judge(SPEC, lm=lm, chain=StructuredChain(config))


def fmt(body: dict[str, Any]) -> str | None:
    return (body.get("response_format") or {}).get("type")


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["auto", "litellm"])
def test_json_schema_rejected_falls_back_and_is_remembered(loopback, engine):
    def handler(body):
        if fmt(body) == "json_schema":
            return Fault(400, "response_format json_schema is not supported by this model", "invalid_request_error")
        return wrapped(4)

    server = loopback(handler)
    judge = make_judge(server, engine=engine)
    results = [judge.judge_one(Item(id=f"i{n}", question="q", answer=f"a{n}")) for n in range(3)]
    assert [r.score for r in results] == [4.0, 4.0, 4.0]
    formats = [fmt(b) for b in server.requests]
    assert formats == ["json_schema", "json_object", "json_object", "json_object"]
    assert [a.outcome for a in results[0].attempts] == ["format_rejected", "ok"]
    assert [a.strategy for a in results[1].attempts] == ["json_object"]


def test_invalid_json_then_valid_at_higher_temperature(loopback):
    server = loopback(lambda b: "{not json" if b["temperature"] == 0.0 else wrapped(2))
    result = make_judge(server).judge_one(ITEM)
    assert result.status == "ok" and result.score == 2.0
    assert [(a.temperature, a.outcome) for a in result.attempts] == [(0.0, "parse_error"), (0.3, "ok")]


def test_answer_without_wrapper_key_is_recovered(loopback):
    server = loopback(lambda b: json.dumps({"rationale": "fine", "rating": 5}))
    result = make_judge(server).judge_one(ITEM)
    assert result.score == 5.0 and result.attempts[0].outcome == "recovered_wrapper"
    assert server.count == 1


@pytest.mark.parametrize("given,expected", [("4.0", 4.0), ("four", 4.0), (3, 3.0)])
def test_readable_rating_spellings_are_accepted(loopback, given, expected):
    server = loopback(lambda b: wrapped(given))
    result = make_judge(server).judge_one(ITEM)
    assert result.status == "ok" and result.score == expected and server.count == 1


@pytest.mark.parametrize("bad", [7, None, 0, "excellent", 3.5])
def test_out_of_scale_or_missing_rating_escalates(loopback, bad):
    server = loopback(lambda b: wrapped(bad) if b["temperature"] < 0.5 else wrapped(1))
    result = make_judge(server).judge_one(ITEM)
    assert result.status == "ok" and result.score == 1.0
    assert [a.outcome for a in result.attempts] == ["validation_error", "validation_error", "ok"]


@pytest.mark.slow
def test_rate_limit_honours_retry_after(loopback):
    calls = {"n": 0}

    def handler(body):
        calls["n"] += 1
        if calls["n"] == 1:
            return Fault(429, "slow down", "rate_limit_error", headers={"Retry-After": "1"})
        return wrapped(3)

    server = loopback(handler)
    started = time.perf_counter()
    result = make_judge(server).judge_one(ITEM)
    assert result.score == 3.0
    assert time.perf_counter() - started >= 0.95, "Retry-After: 1 must be waited for"
    assert [a.outcome for a in result.attempts] == ["rate_limited", "ok"]
    assert result.attempts[0].status == 429


def test_server_errors_are_retried_with_backoff(loopback):
    calls = {"n": 0}

    def handler(body):
        calls["n"] += 1
        return Fault(500, "boom") if calls["n"] <= 2 else wrapped(4)

    result = make_judge(loopback(handler)).judge_one(ITEM)
    assert result.score == 4.0
    assert [a.outcome for a in result.attempts] == ["server_error", "server_error", "ok"]


def test_persistent_server_errors_are_no_answer_never_a_stored_abstention(loopback):
    from scijudge.errors import TransportFailure

    server = loopback(lambda b: Fault(503, "overloaded"))
    with pytest.raises(TransportFailure, match="server_error after 3 tries"):
        make_judge(server, transport_retries=2).judge_one(ITEM)
    # json_schema is tried 3 times, then json_object (a 5xx on json_schema falls back) 3 times
    assert [fmt(b) for b in server.requests] == ["json_schema"] * 3 + ["json_object"] * 3


def test_truncated_answer_gets_one_retry_with_more_tokens(loopback):
    def handler(body):
        if body.get("max_tokens", body.get("max_completion_tokens")) == 64:
            return Reply('{"judgment": {"rationale": "the answer is', finish_reason="length")
        return wrapped(5)

    server = loopback(handler)
    result = make_judge(server, max_tokens=64).judge_one(ITEM)
    assert result.score == 5.0
    sent = [b.get("max_tokens", b.get("max_completion_tokens")) for b in server.requests]
    assert sent == [64, 128]
    assert [a.outcome for a in result.attempts] == ["truncated", "ok"]


@pytest.mark.slow
def test_timeout_is_retried(loopback):
    calls = {"n": 0}

    def handler(body):
        calls["n"] += 1
        return Fault(200, delay=3.0) if calls["n"] == 1 else wrapped(2)

    result = make_judge(loopback(handler), timeout=0.5).judge_one(ITEM)
    assert result.score == 2.0
    assert result.attempts[0].outcome == "timeout"


def test_persistent_garbage_is_an_abstention_never_a_zero(loopback, tmp_path):
    from scijudge import Run

    server = loopback(lambda b: "I think it is quite good overall.")
    result = make_judge(server).judge_one(ITEM)
    assert result.status == "abstained"
    assert result.score is None and result.result is None
    assert "all strategies failed" in result.reason and "parse_error" in result.reason
    assert len(result.attempts) == 6  # 2 strategies x 3 temperatures
    with Run(tmp_path / "r.sqlite") as run:
        run.record(result)
        frame = run.to_pandas()
    assert frame.loc[0, "status"] == "abstained" and frame["score"].isna().all()


def test_every_attempt_records_tokens_and_latency(loopback):
    server = loopback(lambda b: "{" if b["temperature"] == 0.0 else Reply(wrapped(3), prompt_tokens=11, completion_tokens=7))
    result = make_judge(server).judge_one(ITEM)
    assert [a.tokens_in for a in result.attempts] == [50, 11]
    assert result.tokens_in == 61 and result.tokens_out == 27
    assert all(a.latency_s > 0 for a in result.attempts)


def test_empty_optional_input_is_left_out_of_the_prompt(loopback):
    server = loopback(lambda b: wrapped(3))
    make_judge(server).judge_one(ITEM)
    prompt = json.dumps(server.requests[0]["messages"])
    assert "papers" not in prompt
    make_judge(server).judge_one(Item(id="i2", question="q", answer="a", papers=[{"title": "T", "abstract": "A"}]))
    assert "[1] T" in json.dumps(server.requests[-1]["messages"])


def test_bad_key_stops_the_run_with_a_clear_error_and_keeps_what_completed(loopback, tmp_path):
    from scijudge import ModelError, Run, judge_items

    calls = {"n": 0}

    def handler(body):
        calls["n"] += 1
        return wrapped(3) if calls["n"] <= 2 else Fault(401, "invalid api key", "authentication_error")

    server = loopback(handler)
    judge = make_judge(server)
    items = [Item(id=f"k{n}", question="q", answer="a") for n in range(6)]
    with Run(tmp_path / "r.sqlite") as run, pytest.raises(ModelError, match="invalid api key"):
        judge_items(items, [judge], run=run, concurrency=1)
    assert len(Run(tmp_path / "r.sqlite")) == 2
