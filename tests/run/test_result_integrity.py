"""Issue 10: a stored judgment is what it claims to be; provider trouble never becomes stored abstentions.

Every scenario runs through the real DSPy client against the loopback server, with requests counted there.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

import dspy
import pytest

from scijudge import ChainConfig, Item, Judge, Run, StructuredChain, judge_items, make_lm
from scijudge.errors import EndpointError
from scijudge.spec.judge_spec import JudgeSpec
from scijudge.testing.openai_server import (
    Fault,
    Hang,
    Html,
    closed_port_url,
    fail_json_schema,
    last_user_text,
    refuse_prompts_with,
)


def spec(name: str) -> JudgeSpec:
    return JudgeSpec(name=name, family="likert", description="d", instructions="Rate it.",
                     inputs=[{"name": "question"}, {"name": "answer"}])


def rating_from_prompt(body: dict[str, Any]) -> str:
    """Answer with the rating written in the item (R=<n>), so each judgment's source is checkable."""
    found = re.search(r"R=(\d)", last_user_text(body))
    return json.dumps({"judgment": {"rationale": "r", "rating": int(found.group(1)) if found else 3}})


def items(n: int, rating: int = 4) -> list[Item]:
    return [Item(id=f"i{k:02d}", question="Q?", answer=f"answer {k} R={rating}") for k in range(n)]


def judges(url: str, *, cache: bool = False, timeout: float = 5.0, names=("t.a", "t.b"), **config: Any) -> list[Judge]:
    chain = StructuredChain(ChainConfig(backoff_base=0.01, backoff_max=0.05, **config))
    lm = make_lm("openai/judge", api_base=url, cache=cache, timeout=timeout)
    return [Judge(spec(name), lm=lm, chain=chain) for name in names]


def fmt(body: dict[str, Any]) -> str | None:
    return (body.get("response_format") or {}).get("type")


def test_one_refused_prompt_abstains_alone_and_poisons_nothing(loopback, tmp_path):
    server = loopback(refuse_prompts_with("FLAGGED", rating_from_prompt))
    batch = [Item(id="bad", question="Q?", answer="FLAGGED text R=2"), *items(11)]
    with Run(tmp_path / "r.sqlite") as run:
        summary = judge_items(batch, judges(server.url), run=run, concurrency=1)
        frame = run.to_pandas()
    assert summary.ok == 22 and summary.abstained == 2
    refused = frame[frame.status == "abstained"]
    assert set(refused.item_id) == {"bad"}
    assert all("flagged" in reason for reason in refused.reason)
    # One probe (the format without the item text) showed json_schema works; nothing was marked unsupported.
    assert server.count == 2 + 1 + 22
    assert [fmt(b) for b in server.requests].count("json_object") == 0


def test_format_rejection_needs_evidence_the_probe_gives_it(loopback):
    def handler(body):
        return Fault(400, "Bad request", "invalid_request_error") if fmt(body) == "json_schema" else rating_from_prompt(body)

    server = loopback(handler)
    judge = judges(server.url, names=("t.a",))[0]
    first = judge.judge_one(items(1)[0])
    second = judge.judge_one(items(2)[1])
    assert first.ok and second.ok
    assert [a.outcome for a in first.attempts] == ["format_rejected", "request_rejected", "ok"]
    assert [fmt(b) for b in server.requests] == ["json_schema", "json_schema", "json_object", "json_object"]


@pytest.mark.parametrize("status", [404, 503])
def test_json_schema_404_or_5xx_falls_back_to_json_object(loopback, status):
    server = loopback(fail_json_schema(Fault(status, "no such thing"), rating_from_prompt))
    result = judges(server.url, names=("t.a",), transport_retries=1)[0].judge_one(items(1)[0])
    assert result.ok and result.score == 4.0
    assert [fmt(b) for b in server.requests][-1] == "json_object"
    assert len(server.requests) == (2 if status == 404 else 3)


def test_failed_answers_are_never_cached_and_retry_reaches_the_model(loopback, tmp_path):
    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=True)
    state = {"good": False}
    server = loopback(lambda b: rating_from_prompt(b) if state["good"] else "no json here")
    batch = items(2)
    with Run(tmp_path / "r.sqlite") as run:
        first = judge_items(batch, judges(server.url, cache=True, names=("t.a",)), run=run)
        assert first.abstained == 2
        sent = server.count
        state["good"] = True
        again = judge_items(batch, judges(server.url, cache=True, names=("t.a",)), run=run, retry_abstained=True)
        assert again.ok == 2 and server.count == sent + 2, "a retry must reach the model"
    # The validated answers are cached: a fresh store with the same endpoint sends nothing.
    with Run(tmp_path / "fresh.sqlite") as run:
        judge_items(batch, judges(server.url, cache=True, names=("t.a",)), run=run)
    assert server.count == sent + 2


def test_two_endpoints_behind_one_model_name_stay_apart(loopback, tmp_path):
    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=True)
    a = loopback(lambda b: json.dumps({"judgment": {"rationale": "A", "rating": 1}}))
    b = loopback(lambda b: json.dumps({"judgment": {"rationale": "B", "rating": 5}}))
    batch = items(3)
    with Run(tmp_path / "r.sqlite") as run:
        judge_items(batch, judges(a.url, cache=True, names=("t.a",)), run=run)
        second = judge_items(batch, judges(b.url, cache=True, names=("t.a",)), run=run)
        frame = run.to_pandas()
    assert second.skipped_done == 0 and b.count == 3, "B must be asked, not answered from A's cache or rows"
    by_endpoint = frame.groupby("endpoint").score.apply(list).to_dict()
    assert by_endpoint == {a.url: [1.0] * 3, b.url: [5.0] * 3}


def test_editing_an_item_judges_it_again_and_keeps_history(loopback, tmp_path):
    server = loopback(rating_from_prompt)
    batch = items(3)
    with Run(tmp_path / "r.sqlite") as run:
        judge_items(batch, judges(server.url, names=("t.a",)), run=run)
        edited = [batch[0], Item(id="i01", question="Q?", answer="a better answer R=5"), batch[2]]
        summary = judge_items(edited, judges(server.url, names=("t.a",)), run=run)
        current = run.to_pandas()
        history = run.to_pandas(history=True)
    assert summary.changed == 1 and summary.judged == 1 and summary.skipped_done == 2 and server.count == 4
    assert dict(zip(current.item_id, current.score)) == {"i00": 4.0, "i01": 5.0, "i02": 4.0}
    old = history[(history.item_id == "i01") & ~history.current]
    assert list(old.score) == [4.0] and len(history) == 4


@pytest.mark.slow
def test_unreachable_endpoint_stops_within_seconds_and_stores_nothing(loopback, tmp_path):
    batch = items(6)
    started = time.perf_counter()
    with Run(tmp_path / "r.sqlite") as run, pytest.raises(EndpointError, match="cannot reach"):
        judge_items(batch, judges(closed_port_url(), names=("t.a",)), run=run)
    assert time.perf_counter() - started < 10
    server = loopback(rating_from_prompt)
    with Run(tmp_path / "r.sqlite") as run:
        assert len(run) == 0
        fixed = judge_items(batch, judges(server.url, names=("t.a",)), run=run)
    assert fixed.ok == 6 and server.count == 6


@pytest.mark.parametrize("fault,match,most", [
    (Fault(401, "invalid api key", "authentication_error"), "invalid api key", 2),
    (Fault(403, "forbidden", "permission_error"), "forbidden", 2),
    (Fault(404, "The model `judge` does not exist", "invalid_request_error"), "not found", 2),
    # an HTML page behind HTTP 200 is retried like a transport error first (issue 11), then stops the run
    (Html(), "text/html", 1 + ChainConfig().transport_retries),
])
def test_run_level_faults_stop_the_run_and_are_never_stored(loopback, tmp_path, fault, match, most):
    server = loopback(lambda b: fault)
    with Run(tmp_path / "r.sqlite") as run, pytest.raises(EndpointError, match=match):
        judge_items(items(5), judges(server.url, names=("t.a",)), run=run, concurrency=1)
    assert len(Run(tmp_path / "r.sqlite")) == 0
    assert server.count <= most


def test_retry_after_over_the_cap_stops_with_the_cap_in_the_message(loopback, tmp_path):
    server = loopback(lambda b: Fault(429, "slow down", "rate_limit_error", headers={"Retry-After": "3600"}))
    started = time.perf_counter()
    with Run(tmp_path / "r.sqlite") as run, pytest.raises(EndpointError, match=r"3600 s .*2 s cap"):
        judge_items(items(4), judges(server.url, names=("t.a",), retry_after_cap=2.0), run=run, concurrency=1)
    assert time.perf_counter() - started < 5 and server.count == 1 and len(Run(tmp_path / "r.sqlite")) == 0


@pytest.mark.slow
def test_a_429_pauses_the_whole_pool(loopback):
    arrivals: list[tuple[float, bool]] = []

    def handler(body):
        limited = not arrivals
        arrivals.append((time.monotonic(), limited))
        if limited:
            return Fault(429, "slow down", "rate_limit_error", headers={"Retry-After": "1"})
        return rating_from_prompt(body)

    server = loopback(handler, latency=0.1)
    summary = judge_items(items(8), judges(server.url, names=("t.a",)), concurrency=4)
    assert summary.ok == 8 and server.count == 9
    limited_at = next(t for t, limited in arrivals if limited)
    # Requests already in flight arrive within a moment of the 429; every later one waits for Retry-After.
    early = [t - limited_at for t, limited in arrivals if not limited and 0.15 < t - limited_at < 0.95]
    assert early == [], f"requests sent during the pause: {early}"


@pytest.mark.slow
def test_hung_server_trips_the_breaker_quickly(loopback, tmp_path):
    server = loopback(lambda b: Hang())
    started = time.perf_counter()
    with Run(tmp_path / "r.sqlite") as run, pytest.raises(EndpointError, match="in a row got no answer"):
        judge_items(items(10), judges(server.url, names=("t.a",), timeout=0.5), run=run, concurrency=2, breaker=2)
    assert time.perf_counter() - started < 8
    assert len(Run(tmp_path / "r.sqlite")) == 0 and server.count <= 6


def test_timeout_is_a_deadline_for_the_whole_request(loopback):
    """A server that keeps the connection busy but never finishes is cut at the deadline, not at an idle timeout."""
    from scijudge.chain.chain import _call_with_deadline

    server = loopback(lambda b: Hang(3))
    lm = make_lm("openai/judge", api_base=server.url, cache=False, timeout=0.5)
    lm._scijudge_warm = True
    from dspy import lm15

    request = lm15.Request(model=lm.model, messages=(lm15.Message.user("hi"),), config=lm15.Config(max_tokens=5))
    started = time.perf_counter()
    with pytest.raises(Exception, match="timed out"):
        _call_with_deadline(lm, request, 0.5)
    assert time.perf_counter() - started < 1.5


@pytest.mark.slow
def test_a_second_writer_is_refused_naming_the_store(tmp_path):
    from scijudge.errors import RunBusyError

    path = tmp_path / "r.sqlite"
    (tmp_path / "r.sqlite.lock").write_text("999999")  # a stale lock of a dead process does not block
    holder = Run(path).claim_writer()
    with pytest.raises(RunBusyError, match=str(path)):
        _other_process_claims(path)
    holder.close()
    assert _other_process_claims(path) == "claimed"


def _other_process_claims(path) -> str:
    import subprocess
    import sys

    code = ("import sys; from scijudge.run.store import Run; from scijudge.errors import RunBusyError\n"
            "try:\n    Run(sys.argv[1]).claim_writer(); print('claimed')\n"
            "except RunBusyError as exc:\n    print('busy:', exc)")
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=60)
    out = done.stdout.strip()
    if out.startswith("busy:"):
        from scijudge.errors import RunBusyError

        raise RunBusyError(out[6:])
    return out


@pytest.mark.slow
def test_a_stop_sends_nothing_more_not_even_retries_after_a_pause(loopback, tmp_path):
    import threading

    server = loopback(lambda b: Fault(429, "slow down", "rate_limit_error", headers={"Retry-After": "1"}))
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    with Run(tmp_path / "r.sqlite") as run:
        summary = judge_items(items(6), judges(server.url, names=("t.a",)), run=run, concurrency=2, stop=stop, grace=3)
    time.sleep(1.2)
    assert summary.interrupted and summary.judged == 0 and len(Run(tmp_path / "r.sqlite")) == 0
    # The first request of each judgment started before the stop (the second may already wait on the pause);
    # without the stop, both would retry once the 1 s pause ends.
    assert 1 <= server.count <= 2, "no retry after the stop"
