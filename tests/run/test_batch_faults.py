"""Batch mode keeps the direct path's promises under provider faults (issue 23, items 1-8), each scenario against
the loopback batch servers, counting requests, batches and lines at the server and judgments in the store."""

from __future__ import annotations

import json
import re
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scijudge.testing.openai_server import last_user_text

SPEC = """
name = "test.batch.{name}"
family = "likert"
description = "a rubric for batch fault tests"
instructions = "Rate the answer ({name})."
[[inputs]]
name = "question"
[[inputs]]
name = "answer"
"""
MARK = "MARKED-LINE"


def _files(tmp_path: Path, n: int, names: tuple[str, ...] = ("a",)) -> tuple[Path, list[Path], Path]:
    items, run = tmp_path / "items.jsonl", tmp_path / "run.sqlite"
    items.write_text("".join(json.dumps({"id": f"it{i:03d}", "question": "Q?", "answer": f"ITEM-it{i:03d} text"})
                             + "\n" for i in range(n)))
    specs = []
    for name in names:
        spec = tmp_path / f"spec_{name}.toml"
        spec.write_text(SPEC.format(name=name))
        specs.append(spec)
    return items, specs, run


def _item(body: dict) -> int:
    return int(re.search(r"ITEM-it(\d+)", last_user_text(body)).group(1))


def _rating(body: dict) -> str:
    """A valid answer whose rating is the item number mod 5 + 1 (checked by hand below)."""
    return json.dumps({"judgment": {"rationale": "fine", "rating": _item(body) % 5 + 1}})


def _marking(marked: int) -> Callable[[dict], str]:
    """Answers like ``_rating``; item ``marked``'s answer carries MARK so that ``damage`` can find its line."""
    def handler(body: dict) -> str:
        n = _item(body)
        return json.dumps({"judgment": {"rationale": MARK if n == marked else "fine", "rating": n % 5 + 1}})
    return handler


def _cli(*args: str) -> object:
    from scijudge.cli import app

    return CliRunner().invoke(app, [str(a) for a in args])


def _judge(items: Path, specs: list[Path], run: Path, url: str, *extra: str, model: str = "openai/judge") -> object:
    judges = [arg for spec in specs for arg in ("-j", str(spec))]
    return _cli("judge", items, *judges, "-m", model, "--api-base", url, "--run", run, "--no-cache",
                "--no-progress", "--batch", "--batch-poll", "0.02", *extra)


def _rows(run: Path) -> dict[tuple[str, str], tuple]:
    with sqlite3.connect(run) as db:
        return {(item, judge): (status, score) for item, judge, status, score
                in db.execute("SELECT item_id, judge, status, score FROM judgments")}


def _expected(n: int, judges: tuple[str, ...] = ("a",)) -> dict[tuple[str, str], tuple]:
    return {(f"it{i:03d}", f"test.batch.{name}"): ("ok", float(i % 5 + 1)) for i in range(n) for name in judges}


def _judges(specs: list[Path], url: str, model: str = "openai/judge") -> list:
    from scijudge.judges.build import load_judge

    return [load_judge(str(spec), model=model, api_base=url, cache=False) for spec in specs]


def _items(path: Path) -> list:
    from scijudge.data import load_items

    return load_items(path)[0]


def _stop_when_created(stop: threading.Event, stage: int = 0) -> Callable:
    """An ``on_batch`` that asks the run to stop as soon as a batch of this stage is created (a Ctrl-C then)."""
    def on_batch(record) -> None:
        if record.stage == stage and record.remote_id is not None:
            stop.set()
    return on_batch


def _executor(**options):
    from scijudge.run.batch.executor import BatchExecutor

    return BatchExecutor(poll=options.pop("poll", 0.02), **options)


# --- 1. unreadable result lines -------------------------------------------------------------------------
def _damage(kind: str, *, once: bool) -> Callable[[bytes], bytes]:
    done: list[bool] = []

    def damage(content: bytes) -> bytes:
        lines = content.decode().splitlines()
        marked = [line for line in lines if MARK in line]
        if not marked or (once and done):
            return content
        done.append(True)
        line = marked[0]
        rest = [other for other in lines if other != line]
        record = json.loads(line)
        if kind == "malformed":
            return "\n".join([line.replace('"custom_id"', '"custom_id" ::', 1), *rest]).encode() + b"\n"
        if kind == "cut_off_last":
            return "\n".join([*rest, line[: len(line) // 2]]).encode()
        if kind == "no_custom_id":
            del record["custom_id"]
        elif kind == "no_choices":
            del record["response"]["body"]["choices"]
        return "\n".join([json.dumps(record), *rest]).encode() + b"\n"

    return damage


@pytest.mark.parametrize("kind", ["malformed", "cut_off_last", "no_custom_id", "no_choices"])
def test_an_unreadable_result_line_is_reported_and_sent_again_and_the_rest_stored(batch_server, tmp_path, kind):
    server = batch_server(_marking(4), damage=_damage(kind, once=True))
    items, specs, run = _files(tmp_path, 12)
    result = _judge(items, specs, run, server.url)
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    said = " ".join(result.output.split())
    assert said.count("1 judgment without a readable result line is sent again") == 1, result.output
    assert "not sent again" not in said, result.output
    assert _rows(run) == _expected(12)
    assert server.batch_count == 2 and len(server.batch_lines) == 12 + 1, "only the unreadable line is sent again"
    assert _item(server.batch_lines[-1]["body"]) == 4
    assert server.count == 0


def test_an_anthropic_result_line_that_is_not_json_is_reported_and_sent_again(batch_server, tmp_path):
    server = batch_server(_marking(2), damage=_damage("malformed", once=True))
    items, specs, run = _files(tmp_path, 6)
    result = _judge(items, specs, run, server.url, model="anthropic/claude-haiku-4-5")
    assert result.exit_code == 0, result.output
    assert sum("not JSON" in line for line in result.output.splitlines()) == 1
    assert _rows(run) == _expected(6)
    assert server.batch_count == 2 and len(server.batch_lines) == 7


def test_a_line_unreadable_every_time_gets_no_answer_and_exit_4(batch_server, tmp_path):
    server = batch_server(_marking(4), damage=_damage("malformed", once=False))
    items, specs, run = _files(tmp_path, 12)
    result = _judge(items, specs, run, server.url)
    assert result.exit_code == 4, result.output
    assert "resume with" in result.output or "re-run to retry" in result.output
    expected = _expected(12)
    del expected[("it004", "test.batch.a")]
    assert _rows(run) == expected, "every readable line is stored; the unreadable one is not stored at all"
    assert server.batch_count == 3 and len(server.batch_lines) == 12 + 2, "sent three times in all"
    said = " ".join(result.output.split())
    assert said.count("1 judgment without a readable result line is sent again") == 2, result.output
    assert "1 judgment without a readable result line is not sent again in this run: no answer after 3 batches" \
        in said, "the third unreadable line is not said to be sent again: nothing is sent"


@pytest.mark.slow
def test_a_result_download_failing_keeps_the_batch_and_the_rerun_collects_it_without_paying_again(batch_server,
                                                                                                 tmp_path):
    server = batch_server(_rating, content_faults=3)  # the SDK tries each download 3 times: the first run fails
    items, specs, run = _files(tmp_path, 12)
    first = _judge(items, specs, run, server.url)
    assert first.exit_code in (3, 4), first.output
    assert "Traceback" not in first.output and "resume with" in first.output
    assert "could not download the output file" in first.output
    assert _rows(run) == {}
    again = _judge(items, specs, run, server.url)
    assert again.exit_code == 0, again.output
    assert _rows(run) == _expected(12)
    assert server.batch_count == 1 and len(server.batch_lines) == 12, "the re-run collected the paid batch"


# --- 2. identity: batch lines carry exactly the direct prompt, or the combination is refused -----------------
@pytest.mark.parametrize("options", [pytest.param(["--preset", "yescieval-native"], marks=pytest.mark.needs_extra("yescieval")),
                                     ["--fused"], ["--fused", "--layout", "item-first"]])
def test_batch_refuses_presets_and_fused_judges_before_sending_anything(batch_server, tmp_path, options):
    server = batch_server(_rating)
    result = _cli("judge", "datasets/yescieval_example/items.jsonl", "-j", "yescieval.qa.correctness", "-j",
                  "yescieval.qa.coherence", "-m", "openai/judge", "--api-base", server.url, "--run",
                  tmp_path / "run.sqlite", "--no-progress", "--batch", *options)
    assert result.exit_code == 2, result.output
    said = result.output.strip()  # the library names its fields (fused, batch); the command line the flag at fault
    assert said == "error: --fused: fused and layout run in one process, without batch" if "--fused" in options \
        else "without --batch" in said
    assert server.count == 0 and server.batch_count == 0


# --- 3. resume with fewer judges or --limit pays nothing twice ----------------------------------------------------
@pytest.mark.parametrize("narrower", ["fewer judges", "limit"])
def test_every_answer_of_a_collected_batch_is_kept_whatever_the_resume_asks(batch_server, tmp_path, narrower):
    from scijudge.run.api import judge_items
    from scijudge.run.store import Run

    hold = threading.Event()
    hold.set()
    server = batch_server(_rating, hold=hold)
    items_path, specs, run_path = _files(tmp_path, 6, ("a", "b"))
    items = _items(items_path)
    stop = threading.Event()
    first = judge_items(items, _judges(specs, server.url), Run(run_path), stop=stop,
                        executor=_executor(on_batch=_stop_when_created(stop)))
    assert first.interrupted and first.judged == 0 and server.batch_count == 1 and len(server.batch_lines) == 12
    hold.clear()
    if narrower == "fewer judges":
        second = judge_items(items, _judges(specs[:1], server.url), Run(run_path), executor=_executor())
        assert second.judged == 6
        assert _rows(run_path) == _expected(6, ("a",))
    else:
        second = judge_items(items, _judges(specs, server.url), Run(run_path), limit=3, executor=_executor())
        assert second.judged == 3 and len(_rows(run_path)) == 3
    from scijudge.run.batch.store import BatchStore

    store = BatchStore(run_path)
    assert store.kept_count() == 12 - second.judged, "the answers this run did not ask for are kept"
    store.close()
    third = judge_items(items, _judges(specs, server.url), Run(run_path), executor=_executor())
    assert third.judged == 12 - second.judged and third.skipped_done == second.judged
    assert _rows(run_path) == _expected(6, ("a", "b"))
    assert server.batch_count == 1 and len(server.batch_lines) == 12, "12 lines paid for 12 judgments"
    assert server.count == 0


# --- 4. interrupts --------------------------------------------------------------------------------------------------
def test_a_stop_while_polling_returns_at_once_keeps_the_batch_and_the_resume_collects_it(batch_server, tmp_path):
    import time

    from scijudge.run.api import judge_items
    from scijudge.run.store import Run

    hold = threading.Event()
    hold.set()
    server = batch_server(_rating, hold=hold)
    items_path, specs, run_path = _files(tmp_path, 6)
    items = _items(items_path)
    stop = threading.Event()
    notes: list[str] = []

    def on_batch(record) -> None:
        if record.remote_id is not None:
            threading.Timer(0.3, stop.set).start()  # Ctrl-C while the batch runs

    started = time.monotonic()
    summary = judge_items(items, _judges(specs, server.url), Run(run_path), stop=stop,
                          executor=_executor(poll=30.0, on_batch=on_batch, on_note=notes.append))
    assert time.monotonic() - started < 10, "a poll interval of 30 s must not delay the stop"
    assert summary.interrupted and summary.abandoned == 6 and summary.judged == 0
    assert any("6 lines still pending at the provider" in note for note in notes), notes
    with sqlite3.connect(run_path) as db:
        assert db.execute("SELECT status, processed FROM batches").fetchall() == [("in_progress", 0)]
    hold.clear()
    resumed = judge_items(items, _judges(specs, server.url), Run(run_path), executor=_executor())
    assert resumed.judged == 6 and _rows(run_path) == _expected(6)
    assert server.batch_count == 1 and len(server.batch_lines) == 6


def test_a_stop_during_submission_creates_no_further_batch(batch_server, tmp_path):
    from scijudge.run.api import judge_items
    from scijudge.run.store import Run

    server = batch_server(_rating)
    items_path, specs, run_path = _files(tmp_path, 6)
    items = _items(items_path)
    stop = threading.Event()
    notes: list[str] = []
    summary = judge_items(items, _judges(specs, server.url), Run(run_path), stop=stop,
                          executor=_executor(batch_size=1, on_batch=_stop_when_created(stop), on_note=notes.append))
    assert summary.interrupted and server.batch_count == 1
    assert any("5 judgments were not sent yet" in note for note in notes), notes
    resumed = judge_items(items, _judges(specs, server.url), Run(run_path), executor=_executor(batch_size=1))
    assert resumed.judged == 6 and _rows(run_path) == _expected(6)
    assert server.batch_count == 6 and len(server.batch_lines) == 6, "each line sent once"


# --- 5. expired lines are sent again at the same strategy ----------------------------------------------------------
def test_lines_returned_as_batch_expired_are_sent_again_at_the_same_strategy(batch_server, tmp_path):
    server = batch_server(_rating, expire=lambda index: index == 0, expired_in_error_file=True)
    items, specs, run = _files(tmp_path, 6)
    result = _judge(items, specs, run, server.url)
    assert result.exit_code == 0, result.output
    assert _rows(run) == _expected(6), "no abstention: an expired line was never answered"
    assert server.batch_count == 2 and len(server.batch_lines) == 9
    assert all(line["body"]["response_format"]["type"] == "json_schema" for line in server.batch_lines[6:])


# --- 6. every attempt and its cost survive a kill between rounds -----------------------------------------------------
def _litellm_prices(model: str) -> dict:
    """litellm's own price map (its bundled JSON, read without importing litellm, which takes seconds)."""
    import importlib.util

    folder = Path(importlib.util.find_spec("litellm").submodule_search_locations[0])
    return json.loads((folder / "model_prices_and_context_window_backup.json").read_text())[model]


def test_the_failed_first_round_is_billed_and_logged_after_a_kill_between_rounds(batch_server, tmp_path):
    from scijudge.run.api import judge_items
    from scijudge.run.store import Run

    hold = threading.Event()

    def handler(body):
        if _item(body) == 1 and body["response_format"]["type"] == "json_schema":
            return json.dumps({"judgment": {"rationale": "x", "rating": 9}})  # out of scale: validation fails
        return _rating(body)

    server = batch_server(handler, hold=hold)
    items_path, specs, run_path = _files(tmp_path, 3)
    items = _items(items_path)
    stop = threading.Event()

    def on_batch(record) -> None:  # the follow-up batch is created, then the process dies (a stop, then new objects)
        if record.stage == 1 and record.remote_id is not None:
            hold.set()
            stop.set()

    model = "openai/gpt-4o-mini"
    first = judge_items(items, _judges(specs, server.url, model), Run(run_path), stop=stop,
                        executor=_executor(on_batch=on_batch))
    assert first.interrupted and first.judged == 2
    hold.clear()
    judge_items(items, _judges(specs, server.url, model), Run(run_path), executor=_executor())
    with sqlite3.connect(run_path) as db:
        cost, tokens_in, attempts = db.execute(
            "SELECT cost, tokens_in, attempts FROM judgments WHERE item_id = 'it001'").fetchone()
    attempts = json.loads(attempts)
    assert [(a["strategy"], a["outcome"]) for a in attempts] == [("json_schema", "validation_error"),
                                                                 ("json_object", "ok")]
    prices = _litellm_prices("gpt-4o-mini")
    one_call = 50 * prices["input_cost_per_token_batches"] + 20 * prices["output_cost_per_token_batches"]
    assert cost == pytest.approx(2 * one_call), "both paid rounds are billed"
    assert tokens_in == 100
    assert server.batch_count == 2 and len(server.batch_lines) == 4


# --- 7. creation is idempotent -------------------------------------------------------------------------------------
@pytest.mark.parametrize("model", ["openai/judge", "anthropic/claude-haiku-4-5"])
def test_a_create_answered_500_after_the_batch_was_made_is_adopted_not_repeated(batch_server, tmp_path, model):
    server = batch_server(_rating, create_fault=lambda index: index == 0)
    items, specs, run = _files(tmp_path, 6)
    result = _judge(items, specs, run, server.url, model=model)
    assert result.exit_code == 0, result.output
    assert server.batch_count == 1 and server.create_calls == 1 and len(server.batch_lines) == 6
    with sqlite3.connect(run) as db:
        assert db.execute("SELECT COUNT(*) FROM batches").fetchone()[0] == 1
    assert _rows(run) == _expected(6)


@pytest.mark.parametrize("skew", [0.0, 120.0, -120.0])
def test_an_unrecorded_anthropic_batch_is_found_without_clocks(batch_server, tmp_path, skew):
    """Two batches of the same size made in the same second, the second killed before its id was recorded, at a
    provider whose clock is off: the resume adopts the unrecorded one and creates nothing."""
    from scijudge.run.api import judge_items
    from scijudge.run.batch.anthropic import AnthropicBatchAPI
    from scijudge.run.batch.executor import Pending, _line, task_key
    from scijudge.run.batch.store import BatchStore
    from scijudge.run.store import Run

    model = "anthropic/claude-haiku-4-5"
    server = batch_server(_rating, clock_offset=skew)
    items_path, specs, run_path = _files(tmp_path, 6)
    items = _items(items_path)
    judge = _judges(specs, server.url, model)[0]
    run = Run(run_path)
    store = BatchStore(run_path)
    api = AnthropicBatchAPI(server.url, "sk-test")
    for half, record_it in ((items[:3], True), (items[3:], False)):
        keys = [task_key(item, judge, "") for item in half]
        client_id = store.intend(provider="anthropic", endpoint=server.url, model=model, stage=0,
                                 strategy="json_schema", temperature=0.0, keys=keys, price_basis=None)
        remote_id, status = api.submit([_line(api, k, Pending(i, judge, "")) for k, i in zip(keys, half)],
                                       client_id)
        if record_it:
            store.submitted(client_id, remote_id, status)
    summary = judge_items(items, [judge], run, executor=_executor())
    assert summary.ok == 6 and server.batch_count == 2 and server.create_calls == 2 and server.count == 0
    assert _rows(run_path) == _expected(6)


# --- 8. a way out: --abandon, and provider faults exit 3 ----------------------------------------------------------
def test_a_gateway_that_cannot_list_batches_stops_with_exit_3_and_abandon_lets_the_run_go_on(batch_server, tmp_path):
    from scijudge.judges.build import load_judge
    from scijudge.run.batch.executor import task_key
    from scijudge.run.batch.store import BatchStore

    server = batch_server(_rating, list_batches=False)
    items, specs, run = _files(tmp_path, 3)
    judge = load_judge(str(specs[0]), model="openai/judge", api_base=server.url, cache=False)
    store = BatchStore(run)  # killed between recording the intent and recording the created batch
    intent = store.intend(provider="openai", endpoint=server.url, model="openai/judge", stage=0,
                          strategy="json_schema", temperature=0.0,
                          keys=[task_key(item, judge, "") for item in _items(items)], price_basis=None)
    store.close()
    stopped = _judge(items, specs, run, server.url)
    said = " ".join(stopped.output.split())
    assert stopped.exit_code == 3 and "re-run to look it up again" in said, stopped.output
    assert "--abandon" not in said and "Traceback" not in said, "no way out offered on the first error"
    again = _judge(items, specs, run, server.url)
    said = " ".join(again.output.split())
    assert again.exit_code == 3 and f"--abandon {intent}" in said and "may still run and bill it" in said, said
    assert server.batch_count == 0
    abandoned = _cli("batches", run, "--abandon", intent)
    said = " ".join(abandoned.output.split())
    assert abandoned.exit_code == 0 and "go back to pending" in said, said
    assert "never confirmed as created" in said and "may still run and bill it" in said, said
    done = _judge(items, specs, run, server.url)
    assert done.exit_code == 0, done.output
    assert _rows(run) == _expected(3) and server.batch_count == 1


def test_a_batch_the_provider_no_longer_knows_exits_3_and_can_be_abandoned(batch_server, tmp_path):
    from scijudge.run.api import judge_items
    from scijudge.run.store import Run

    hold = threading.Event()
    hold.set()
    server = batch_server(_rating, hold=hold)
    items_path, specs, run_path = _files(tmp_path, 4)
    stop = threading.Event()
    judge_items(_items(items_path), _judges(specs, server.url), Run(run_path), stop=stop,
                executor=_executor(on_batch=_stop_when_created(stop)))
    (remote_id,) = list(server.batches)
    server.forget(remote_id)
    hold.clear()
    stopped = _judge(items_path, specs, run_path, server.url)
    assert stopped.exit_code == 3, stopped.output
    assert f"scijudge batches {run_path} --abandon {remote_id}" in stopped.output.replace("\n", "")
    assert "resume with" in stopped.output
    assert _cli("batches", run_path, "--abandon", remote_id).exit_code == 0
    unknown = _cli("batches", run_path, "--abandon", "batch_nope")
    assert unknown.exit_code == 2 and "no batch 'batch_nope'" in unknown.output
    done = _judge(items_path, specs, run_path, server.url)
    assert done.exit_code == 0, done.output
    assert _rows(run_path) == _expected(4) and server.create_calls == 2 and len(server.batch_lines) == 8


@pytest.mark.slow
@pytest.mark.parametrize("signum", ["SIGINT", "SIGTERM"])
def test_a_signal_while_batches_run_exits_130_at_once_with_the_resume_line(batch_server, tmp_path, signum):
    import os
    import signal
    import subprocess
    import sys
    import time

    hold = threading.Event()
    hold.set()
    server = batch_server(_rating, hold=hold)
    items, specs, run = _files(tmp_path, 5)
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="true", DSPY_CACHEDIR=str(tmp_path / "cache"),
               PYTHONUNBUFFERED="1")
    args = [sys.executable, "-m", "scijudge", "judge", str(items), "-j", str(specs[0]), "-m", "openai/judge",
            "--api-base", server.url, "--run", str(run), "--no-cache", "--no-progress", "--batch",
            "--batch-poll", "30", "--grace", "3"]
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 120
    while server.retrievals < 1 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None and server.retrievals >= 1
    sent = time.monotonic()
    proc.send_signal(getattr(signal, signum))
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, output
    assert time.monotonic() - sent < 10, "the 30 s poll interval must not delay the stop"
    assert "resume with: scijudge judge" in output and "5 lines still pending at the provider" in output
    with sqlite3.connect(run) as db:
        assert db.execute("SELECT status, processed FROM batches").fetchall() == [("in_progress", 0)]
    hold.clear()
    resumed = _judge(items, specs, run, server.url)
    assert resumed.exit_code == 0, resumed.output
    assert _rows(run) == _expected(5) and server.batch_count == 1 and len(server.batch_lines) == 5


# --- issue 35 item 5: a custom_id that comes back twice keeps its paid answer -------------------------------------
def _repeat_marked(error_first: bool) -> Callable[[bytes], bytes]:
    """The marked line's answer and an error copy of it in the same result file (in either order)."""
    def damage(content: bytes) -> bytes:
        lines = content.decode().splitlines()
        marked = [line for line in lines if MARK in line]
        if not marked:
            return content
        copy = json.loads(marked[0])
        copy["response"] = {"status_code": 500, "request_id": "dup",
                            "body": {"error": {"message": "internal error", "type": "server_error"}}}
        index = lines.index(marked[0])
        lines.insert(index if error_first else index + 1, json.dumps(copy))
        return ("\n".join(lines) + "\n").encode()
    return damage


@pytest.mark.parametrize("error_first", [False, True], ids=["answer-then-error", "error-then-answer"])
def test_a_custom_id_repeated_with_an_error_copy_keeps_the_paid_answer(batch_server, tmp_path, error_first):
    server = batch_server(_marking(4), damage=_repeat_marked(error_first))
    items, specs, run = _files(tmp_path, 12)
    result = _judge(items, specs, run, server.url)
    assert result.exit_code == 0, result.output
    assert sum("came back again" in line for line in result.output.splitlines()) == 1, result.output
    assert _rows(run) == _expected(12)
    assert server.batch_count == 1 and len(server.batch_lines) == 12, "12 lines billed for 12 judgments"
    assert server.count == 0


# --- item 6: a pending batch is never bought again by a run without --batch ---------------------------------------
def test_a_run_without_batch_refuses_judgments_a_pending_batch_holds_and_abandon_cancels_it(batch_server, tmp_path):
    from scijudge.run.api import judge_items
    from scijudge.run.store import Run

    hold = threading.Event()
    hold.set()
    server = batch_server(_rating, hold=hold)
    items_path, specs, run_path = _files(tmp_path, 6)
    stop = threading.Event()
    first = judge_items(_items(items_path), _judges(specs, server.url), Run(run_path), stop=stop,
                        executor=_executor(on_batch=_stop_when_created(stop)))
    assert first.interrupted and first.abandoned == 6 and first.not_sent == 0
    (remote_id,) = list(server.batches)
    direct = _cli("judge", items_path, "-j", specs[0], "-m", "openai/judge", "--api-base", server.url, "--run",
                  run_path, "--no-cache", "--no-progress")
    assert direct.exit_code == 2, direct.output
    assert f"batch {remote_id} holds 6 of these judgments" in direct.output.replace("\n", "")
    assert f"scijudge batches {run_path} --abandon {remote_id}" in direct.output.replace("\n", "")
    assert server.count == 0, "nothing bought twice by direct calls"
    abandoned = _cli("batches", run_path, "--abandon", remote_id)
    assert abandoned.exit_code == 0, abandoned.output
    assert server.cancel_calls == 1 and "billed" in abandoned.output
    assert server.batches[remote_id]["batch"]["status"] == "cancelled"
    again = _cli("judge", items_path, "-j", specs[0], "-m", "openai/judge", "--api-base", server.url, "--run",
                 run_path, "--no-cache", "--no-progress")
    assert again.exit_code == 0, again.output
    assert _rows(run_path) == _expected(6) and server.count == 6


def test_a_run_without_batch_refuses_judgments_with_a_kept_batch_answer(batch_server, tmp_path):
    from scijudge.run.api import judge_items
    from scijudge.run.store import Run

    server = batch_server(_rating)
    items_path, specs, run_path = _files(tmp_path, 6, ("a", "b"))
    items = _items(items_path)
    hold = threading.Event()
    server.hold = hold
    hold.set()
    stop = threading.Event()
    judge_items(items, _judges(specs, server.url), Run(run_path), stop=stop,
                executor=_executor(on_batch=_stop_when_created(stop)))
    hold.clear()
    judge_items(items, _judges(specs[:1], server.url), Run(run_path), executor=_executor())  # keeps b's answers
    direct = _cli("judge", items_path, "-j", specs[1], "-m", "openai/judge", "--api-base", server.url, "--run",
                  run_path, "--no-cache", "--no-progress")
    assert direct.exit_code == 2 and "6 of these judgments have an answer a batch already collected" in \
        direct.output.replace("\n", ""), direct.output
    assert server.count == 0


# --- item 7: --abandon under the writer lock; a failed batch's reason; a full disk ---------------------------------
def test_abandon_is_refused_while_another_process_writes_the_store(batch_server, tmp_path):
    from scijudge.run._writer_lock import WriterLock
    from scijudge.run.api import judge_items
    from scijudge.run.store import Run

    hold = threading.Event()
    hold.set()
    server = batch_server(_rating, hold=hold)
    items_path, specs, run_path = _files(tmp_path, 3)
    stop = threading.Event()
    judge_items(_items(items_path), _judges(specs, server.url), Run(run_path), stop=stop,
                executor=_executor(on_batch=_stop_when_created(stop)))
    (remote_id,) = list(server.batches)
    lock = WriterLock(run_path)  # another writer (a run polling this batch)
    try:
        refused = _cli("batches", run_path, "--abandon", remote_id)
    finally:
        lock.release()
    assert refused.exit_code == 3 and "being written by another process" in refused.output, refused.output
    assert server.cancel_calls == 0
    with sqlite3.connect(run_path) as db:
        assert db.execute("SELECT processed FROM batches").fetchall() == [(0,)]


@pytest.mark.slow  # seconds: the fast subset stays under a minute
def test_abandon_that_cannot_reach_the_provider_warns_the_batch_may_stay_billed(batch_server, tmp_path):
    from scijudge.run.api import judge_items
    from scijudge.run.store import Run

    hold = threading.Event()
    hold.set()
    server = batch_server(_rating, hold=hold)
    items_path, specs, run_path = _files(tmp_path, 3)
    stop = threading.Event()
    judge_items(_items(items_path), _judges(specs, server.url), Run(run_path), stop=stop,
                executor=_executor(on_batch=_stop_when_created(stop)))
    (remote_id,) = list(server.batches)
    server.stop()  # the provider cannot be reached
    result = _cli("batches", run_path, "--abandon", remote_id)
    assert result.exit_code == 0, result.output
    text = result.output.replace("\n", " ")
    assert f"could not cancel batch {remote_id}" in text and "billed" in text and "go back to pending" in text


def test_a_failed_batch_shows_the_providers_reason_and_is_not_sent_again(batch_server, tmp_path):
    server = batch_server(_rating, fail=lambda index: "the input file is invalid")
    items, specs, run = _files(tmp_path, 6)
    result = _judge(items, specs, run, server.url)
    assert result.exit_code == 3, result.output
    assert "the input file is invalid" in result.output and "Traceback" not in result.output
    assert server.batch_count == 1 and len(server.batch_lines) == 6, "the same lines are not sent twice more"
    assert _rows(run) == {}


@pytest.mark.slow
def test_a_full_disk_while_batching_exits_3_and_the_resume_collects_the_recorded_batch(batch_server, tmp_path):
    """The disk fills (RLIMIT_FSIZE set on the running process) right after the batch is created: the batch
    store cannot record it; one line, exit 3; the resume finds the batch by its client id and pays nothing twice."""
    import os
    import resource
    import subprocess
    import sys

    child: list[int] = []

    def fill_disk(index: int) -> bool:
        resource.prlimit(child[0], resource.RLIMIT_FSIZE, (1, resource.RLIM_INFINITY))  # every write fails
        return False

    server = batch_server(_rating, create_fault=fill_disk)
    items, specs, run = _files(tmp_path, 4)
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="true", DSPY_CACHEDIR=str(tmp_path / "cache"))
    args = [sys.executable, "-m", "scijudge", "judge", str(items), "-j", str(specs[0]), "-m", "openai/judge",
            "--api-base", server.url, "--run", str(run), "--no-cache", "--no-progress", "--batch",
            "--batch-poll", "0.02"]
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    child.append(proc.pid)
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 3, output
    assert "Traceback" not in output and "cannot write" in output, output
    assert server.batch_count == 1
    resumed = _judge(items, specs, run, server.url)
    assert resumed.exit_code == 0, resumed.output
    assert _rows(run) == _expected(4) and server.batch_count == 1 and len(server.batch_lines) == 4
