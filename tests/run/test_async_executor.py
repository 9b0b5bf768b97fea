"""The asyncio executor (issue 41): the same chain and the same lifecycle as the thread executor, at concurrency
512. The chain's logic is written once (``StructuredChain._run_steps``): each fault scenario below goes through
the blocking driver and the asyncio driver and must leave the same attempts, requests and result."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
from typing import Any

import pytest

from scijudge import Run, judge_items
from scijudge.errors import EndpointError
from scijudge.testing.openai_server import CONTENT_FILTER, Fault, Reply, closed_port_url

from test_result_integrity import fmt, items, judges, rating_from_prompt  # the same helpers, beside this file

BAD = json.dumps({"judgment": {"rationale": "r", "rating": 9}})  # out of the 1-5 scale: validation fails


def _scripted(*answers: Any):
    """A handler answering each request with the next of ``answers`` (the last one repeats)."""
    queue = list(answers)
    lock = threading.Lock()

    def handler(body: dict[str, Any]) -> Any:
        with lock:
            answer = queue.pop(0) if len(queue) > 1 else queue[0]
        return rating_from_prompt(body) if answer == "good" else answer
    return handler


SCENARIOS = {
    "answer": ("good",),
    "schema refused, json_object": (Fault(400, "response_format json_schema is not supported",
                                          "invalid_request_error"), "good"),
    "invalid, hotter": (BAD, "good"),
    "two 503s, then": (Fault(503, "busy"), Fault(503, "busy"), "good"),
    "cut off, more tokens": (Reply(BAD[:20], finish_reason="length"), "good"),
    "refused item": (CONTENT_FILTER,),
    "never valid": (BAD,),
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_the_async_driver_takes_the_same_path_through_the_chain(loopback, scenario):
    outcomes = []
    for driver in ("blocking", "async"):
        server = loopback(_scripted(*SCENARIOS[scenario]))
        judge = judges(server.url, names=("t.a",))[0]
        item = items(1)[0]
        result = judge.judge_one(item) if driver == "blocking" else asyncio.run(judge.ajudge_one(item))
        outcomes.append(([(a.strategy, a.temperature, a.max_tokens, a.outcome, a.status) for a in result.attempts],
                         [(fmt(b), b.get("temperature")) for b in server.requests],
                         result.status, result.score, result.reason))
    assert outcomes[0] == outcomes[1]
    attempts, requests, status, score, _ = outcomes[1]
    expected_status = "abstained" if scenario in ("refused item", "never valid") else "ok"
    assert status == expected_status and (score == 4.0 or expected_status == "abstained")
    if scenario == "schema refused, json_object":
        assert [r[0] for r in requests][-1] == "json_object", requests
    if scenario == "invalid, hotter":
        assert [r[1] for r in requests] == [0.0, 0.3], requests
    if scenario == "never valid":
        assert len(requests) == 6, "two strategies at three temperatures"


@pytest.mark.slow  # seconds: the fast subset stays under a minute
def test_the_async_executor_stores_what_the_thread_executor_stores(loopback, tmp_path):
    server = loopback(rating_from_prompt)
    batch = items(40, rating=2)
    stored = []
    for executor in ("threads", "async"):
        with Run(tmp_path / f"{executor}.sqlite") as run:
            summary = judge_items(batch, judges(server.url), run=run, executor=executor, concurrency=512)
        assert summary.ok == 80 and summary.complete
        with sqlite3.connect(tmp_path / f"{executor}.sqlite") as db:
            stored.append(set(db.execute("SELECT key, item_id, judge, status, score FROM judgments")))
    assert len(stored[0]) == 80 and stored[0] == stored[1]
    assert server.count == 160


def test_an_unreachable_endpoint_stops_the_async_run_and_stores_nothing(tmp_path):
    started = time.perf_counter()
    with Run(tmp_path / "r.sqlite") as run, pytest.raises(EndpointError, match="cannot reach") as raised:
        judge_items(items(100), judges(closed_port_url(), names=("t.a",)), run=run, executor="async",
                    concurrency=512)
    assert time.perf_counter() - started < 20
    assert len(Run(tmp_path / "r.sqlite")) == 0 and raised.value.summary.judged == 0


@pytest.mark.slow
def test_a_stop_at_concurrency_512_stores_every_answer_in_flight(loopback, tmp_path):
    server = loopback(rating_from_prompt, latency=0.5)
    stop = threading.Event()
    arrived = threading.Event()

    def on_result(result, summary) -> None:
        if summary.judged >= 100:
            arrived.set()
            stop.set()

    with Run(tmp_path / "r.sqlite") as run:
        summary = judge_items(items(3000), judges(server.url, names=("t.a",)), run=run, executor="async",
                              concurrency=512, stop=stop, grace=10, on_result=on_result)
    assert arrived.is_set() and summary.interrupted
    stored = len(Run(tmp_path / "r.sqlite"))
    assert stored == server.count == summary.judged, "every request sent before the stop has its answer stored"
    assert summary.abandoned == 0 and summary.not_sent == 3000 - stored
    assert 512 <= server.count <= 2 * 512, "the stop halted sending within about one round"


def test_the_cli_picks_the_async_executor_from_concurrency_64_for_api_models(loopback, tmp_path):
    from typer.testing import CliRunner

    from scijudge.cli import app
    from scijudge.run import aio

    server = loopback(rating_from_prompt)
    (tmp_path / "items.jsonl").write_text("".join(json.dumps({"id": f"i{k}", "question": "Q?", "answer": "a R=5"})
                                                  + "\n" for k in range(5)))
    (tmp_path / "spec.toml").write_text('name = "t.cli"\nfamily = "likert"\ndescription = "d"\n'
                                        'instructions = "Rate it."\n[[inputs]]\nname = "question"\n'
                                        '[[inputs]]\nname = "answer"\n')
    used: list[int] = []
    original = aio.AsyncExecutor.execute

    def spy(self, tasks, life):
        used.append(len(tasks))
        return original(self, tasks, life)

    aio.AsyncExecutor.execute = spy  # type: ignore[method-assign]
    try:
        for concurrency, run in (("8", "a"), ("64", "b")):
            result = CliRunner().invoke(app, ["judge", str(tmp_path / "items.jsonl"), "-j", str(tmp_path / "spec.toml"),
                                              "-m", "openai/judge", "--api-base", server.url, "--run",
                                              str(tmp_path / f"{run}.sqlite"), "--no-cache", "--no-progress",
                                              "--concurrency", concurrency])
            assert result.exit_code == 0, result.output
        refused = CliRunner().invoke(app, ["judge", str(tmp_path / "items.jsonl"), "-j", str(tmp_path / "spec.toml"),
                                           "-m", "openai/judge", "--api-base", server.url, "--executor", "fibers"])
        assert refused.exit_code == 2 and "--executor: must be auto, threads or async" in refused.output
    finally:
        aio.AsyncExecutor.execute = original  # type: ignore[method-assign]
    assert used == [5], "threads at --concurrency 8, the event loop at 64"


@pytest.mark.slow
def test_sigkill_at_concurrency_512_re_requests_at_most_512(loopback, tmp_path):
    """``scijudge judge --executor async --concurrency 512`` killed mid-run: the resume asks again for at most
    the 512 judgments that were in flight (requests counted at the server), and loses none."""
    import collections
    import os
    import re
    import signal
    import subprocess
    import sys

    from scijudge.testing.cli import stored_ok_items
    from scijudge.testing.openai_server import last_user_text

    concurrency, total = 512, 4 * 512
    requests: collections.Counter[str] = collections.Counter()

    def handler(body: dict) -> str:
        requests[re.search(r"ITEM-(it\d+)", last_user_text(body)).group(1)] += 1
        return json.dumps({"judgment": {"rationale": "ok", "rating": 3}})

    server = loopback(handler, latency=0.5)
    items_path, spec, run = tmp_path / "items.jsonl", tmp_path / "spec.toml", tmp_path / "run.sqlite"
    items_path.write_text("".join(json.dumps({"id": f"it{i:04d}", "question": "Q?", "answer": f"ITEM-it{i:04d} x"})
                                  + "\n" for i in range(total)))
    spec.write_text('name = "t.kill"\nfamily = "likert"\ndescription = "d"\ninstructions = "Rate it."\n'
                    '[[inputs]]\nname = "question"\n[[inputs]]\nname = "answer"\n')
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="true", DSPY_CACHEDIR=str(tmp_path / "cache"))
    args = [sys.executable, "-m", "scijudge", "judge", str(items_path), "-j", str(spec), "-m", "openai/judge",
            "--api-base", server.url, "--run", str(run), "--concurrency", str(concurrency), "--executor", "async",
            "--no-progress", "--no-cache"]
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 180
    while len(stored_ok_items(run)) < 2 * concurrency and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    stored_before = stored_ok_items(run)
    sent_before = sum(requests.values())
    assert 2 * concurrency <= len(stored_before) < total, "the kill must land mid-run"
    assert sent_before - len(stored_before) <= concurrency
    finished = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stderr
    assert len(stored_ok_items(run)) == total, "no judgment may be lost"
    assert sum(requests.values()) - total <= concurrency
    assert not {item for item, n in requests.items() if n > 1} & stored_before, "a stored judgment was re-requested"


def test_the_cli_at_concurrency_512_exits_3_on_an_unreachable_endpoint(tmp_path):
    from typer.testing import CliRunner

    from scijudge.cli import app

    (tmp_path / "items.jsonl").write_text("".join(json.dumps({"id": f"i{k}", "question": "Q?", "answer": "a"}) + "\n"
                                                  for k in range(100)))
    (tmp_path / "spec.toml").write_text('name = "t.cli"\nfamily = "likert"\ndescription = "d"\n'
                                        'instructions = "Rate it."\n[[inputs]]\nname = "question"\n'
                                        '[[inputs]]\nname = "answer"\n')
    result = CliRunner().invoke(app, ["judge", str(tmp_path / "items.jsonl"), "-j", str(tmp_path / "spec.toml"), "-m",
                                      "openai/judge", "--api-base", closed_port_url(), "--run",
                                      str(tmp_path / "r.sqlite"), "--no-cache", "--no-progress", "--concurrency", "512"])
    assert result.exit_code == 3, result.output
    assert "cannot reach" in result.output and "Traceback" not in result.output
    assert len(Run(tmp_path / "r.sqlite")) == 0


def test_judges_that_judge_their_own_way_keep_their_blocking_path(loopback):
    from scijudge import get_spec
    from scijudge.judges.checklist._judge import ChecklistJudge

    server = loopback(rating_from_prompt)
    plain = judges(server.url, names=("t.a",))[0]
    checklist = ChecklistJudge(get_spec("researchrubrics.checklist"), lm=plain.lm)
    assert plain.native_async and not checklist.native_async
    plain.use_mode("decision")
    assert not plain.native_async, "decision mode reads logprobs through its own path"


def test_the_run_freezes_only_what_existed_before_it_and_hands_it_back(monkeypatch):
    import gc

    from scijudge.run.aio import _older_objects_frozen

    assert gc.get_freeze_count() == 0
    with _older_objects_frozen():
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0
    gc.freeze()  # a caller that froze objects itself keeps them frozen
    calls: list[str] = []
    real_freeze, real_unfreeze = gc.freeze, gc.unfreeze
    try:
        # The count itself may shrink by a few while we look (a frozen object another thread lets go of is
        # freed), so what is checked is that the run neither froze again nor handed the caller's objects back.
        monkeypatch.setattr(gc, "freeze", lambda: calls.append("freeze"))
        monkeypatch.setattr(gc, "unfreeze", lambda: calls.append("unfreeze"))
        with _older_objects_frozen():
            pass
        assert calls == []
        assert gc.get_freeze_count() > 0
    finally:
        monkeypatch.undo()
        assert (gc.freeze, gc.unfreeze) == (real_freeze, real_unfreeze)
        gc.unfreeze()


@pytest.mark.slow  # a timed stop: about a second each
@pytest.mark.parametrize("executor", ["async", "threads"])
def test_a_stop_during_retries_accounts_for_every_task(loopback, tmp_path, executor):
    """Requests in flight that the stop ends without an answer (a 503 retried when the stop came) are counted as in
    flight without an answer: stored + in flight + not sent + no answer = every task."""
    server = loopback(lambda body: Fault(503, "busy"), latency=0.05)
    stop = threading.Event()
    threading.Timer(0.6, stop.set).start()
    with Run(tmp_path / "r.sqlite") as run:
        summary = judge_items(items(40), judges(server.url, names=("t.a",)),
                              run=run, executor=executor, concurrency=8, stop=stop, grace=5)
    assert summary.interrupted and server.count > 0
    assert summary.judged + summary.abandoned + summary.not_sent + summary.no_answer == 40, summary
