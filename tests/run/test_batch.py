"""`scijudge judge --batch` against the loopback files+batches server: every item through batches, follow-ups,
expiry, kill-and-resume, cost at the batch price."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scijudge.testing.openai_server import Fault, last_user_text

SPEC_TOML = """
name = "test.batch"
family = "likert"
description = "a rubric for batch tests"
instructions = "Rate the answer."
[[inputs]]
name = "question"
[[inputs]]
name = "answer"
"""


def _files(tmp_path: Path, n: int) -> tuple[Path, Path, Path]:
    items, spec, run = tmp_path / "items.jsonl", tmp_path / "spec.toml", tmp_path / "run.sqlite"
    items.write_text("".join(json.dumps({"id": f"it{i:03d}", "question": "Q?", "answer": f"ITEM-it{i:03d} text"}) + "\n"
                             for i in range(n)))
    spec.write_text(SPEC_TOML)
    return items, spec, run


def _item(body: dict) -> int:
    return int(re.search(r"ITEM-it(\d+)", last_user_text(body)).group(1))


def _rating(body: dict) -> str:
    """A valid answer whose rating is derived from the item number (so results can be checked by hand)."""
    return json.dumps({"judgment": {"rationale": "fine", "rating": _item(body) % 5 + 1}})


def _judge(items: Path, spec: Path, run: Path, url: str, *extra: str, model: str = "openai/judge") -> object:
    from scijudge.cli import app

    return CliRunner().invoke(app, ["judge", str(items), "-j", str(spec), "-m", model, "--api-base", url,
                                    "--run", str(run), "--no-cache", "--no-progress", "--batch",
                                    "--batch-poll", "0.02", *extra])


def _rows(run: Path) -> dict[str, tuple]:
    with sqlite3.connect(run) as db:
        return {item: (status, score, reason) for item, status, score, reason
                in db.execute("SELECT item_id, status, score, reason FROM judgments")}


def _batches(run: Path) -> list[tuple]:
    with sqlite3.connect(run) as db:
        return db.execute("SELECT remote_id, status, processed, strategy, total FROM batches ORDER BY rowid").fetchall()


def test_batch_line_is_the_request_a_direct_call_sends(batch_server):
    from scijudge.data import Item
    from scijudge.judges.build import load_judge

    server = batch_server(_rating)
    judge = load_judge("yescieval.qa.correctness", model="openai/judge", api_base=server.url, cache=False)
    item = Item.model_validate({"id": "it007", "question": "Q?", "answer": "ITEM-it007 text",
                                "papers": [{"title": "T", "abstract": "A"}]})
    assert judge.judge_one(item).status == "ok"
    direct = server.requests[0]
    line = judge.chain.chat_body("judge", judge.predict.signature, judge.predict.demos, judge.inputs_for(item),
                                 strategy="json_schema", temperature=0.0, max_tokens=1024)
    assert line == direct


@pytest.mark.slow
def test_every_item_goes_through_one_batch_and_no_direct_request(batch_server, tmp_path):
    server = batch_server(_rating, complete_after=0.1)
    items, spec, run = _files(tmp_path, 12)
    result = _judge(items, spec, run, server.url)
    assert result.exit_code == 0, result.output
    assert server.count == 0, "batch mode must send no direct chat request"
    assert server.batch_count == 1 and len(server.batch_lines) == 12
    assert {line["custom_id"] for line in server.batch_lines} == {
        r[0] for r in sqlite3.connect(run).execute("SELECT key FROM judgments")}
    rows = _rows(run)
    assert rows == {f"it{i:03d}": ("ok", float(i % 5 + 1), None) for i in range(12)}
    assert [(status, processed, strategy, total) for _, status, processed, strategy, total in _batches(run)] == [
        ("completed", 1, "json_schema", 12)]
    from scijudge.cli import app

    listing = CliRunner().invoke(app, ["batches", str(run), "--json"])
    assert listing.exit_code == 0, listing.output
    listed = json.loads(listing.stdout)
    assert listed[0]["status"] == "completed" and listed[0]["lines"] == 12 and listed[0]["completed"] == 12
    # A second run finds everything done and creates nothing.
    again = _judge(items, spec, run, server.url)
    assert again.exit_code == 0 and server.batch_count == 1


@pytest.mark.slow
def test_failed_lines_go_to_the_next_strategy_in_a_follow_up_batch(batch_server, tmp_path):
    def handler(body):
        n, strategy = _item(body), body["response_format"]["type"]
        if n == 1 and strategy == "json_schema":
            return Fault(status=400, message="response_format json_schema is not supported")
        if n == 2 and strategy == "json_schema":
            return json.dumps({"judgment": {"rationale": "x", "rating": 9}})  # out of scale: validation fails
        if n == 3:
            return "not json at all"  # fails under every strategy
        return _rating(body)

    server = batch_server(handler)
    items, spec, run = _files(tmp_path, 5)
    result = _judge(items, spec, run, server.url)
    assert result.exit_code == 0, result.output
    assert server.count == 0 and server.batch_count == 2
    batches = _batches(run)
    assert [(b[3], b[4]) for b in batches] == [("json_schema", 5), ("json_object", 3)]
    follow_up = [line for line in server.batch_lines[5:]]
    assert sorted(_item(line["body"]) for line in follow_up) == [1, 2, 3]
    assert all(line["body"]["response_format"] == {"type": "json_object"} for line in follow_up)
    rows = _rows(run)
    assert rows["it001"] == ("ok", 2.0, None) and rows["it002"] == ("ok", 3.0, None)
    assert rows["it003"][0] == "abstained" and rows["it003"][2].startswith("all strategies failed; last problem: parse_error")
    with sqlite3.connect(run) as db:
        attempts = json.loads(db.execute("SELECT attempts FROM judgments WHERE item_id='it002'").fetchone()[0])
    assert [(a["strategy"], a["outcome"]) for a in attempts] == [("json_schema", "validation_error"), ("json_object", "ok")]


@pytest.mark.slow
def test_batch_fallback_direct_sends_failed_lines_as_direct_calls(batch_server, tmp_path):
    seen: list[int] = []

    def handler(body):
        seen.append(_item(body))
        return "garbage" if seen.count(1) == 1 and seen[-1] == 1 else _rating(body)  # item 1 fails once

    server = batch_server(handler)
    items, spec, run = _files(tmp_path, 4)
    result = _judge(items, spec, run, server.url, "--batch-fallback", "direct")
    assert result.exit_code == 0, result.output
    assert server.batch_count == 1
    assert server.count == 1 and _item(server.requests[0]) == 1, "only the failed line is sent directly"
    assert _rows(run)["it001"] == ("ok", 2.0, None)


def test_an_expired_batch_resends_its_unanswered_lines(batch_server, tmp_path):
    server = batch_server(_rating, expire=lambda index: index == 0)
    items, spec, run = _files(tmp_path, 6)
    result = _judge(items, spec, run, server.url)
    assert result.exit_code == 0, result.output
    batches = _batches(run)
    assert [(b[1], b[4]) for b in batches] == [("expired", 6), ("completed", 3)]
    assert server.count == 0 and len(_rows(run)) == 6
    assert all(status == "ok" for status, _, _ in _rows(run).values())


@pytest.mark.slow
def test_cost_is_recorded_at_the_batch_price(batch_server, tmp_path):
    import litellm

    server = batch_server(_rating)
    items, spec, run = _files(tmp_path, 2)
    assert _judge(items, spec, run, server.url, model="openai/gpt-4o-mini").exit_code == 0
    prices = litellm.model_cost["gpt-4o-mini"]
    expected = 50 * prices["input_cost_per_token_batches"] + 20 * prices["output_cost_per_token_batches"]
    assert expected == pytest.approx(0.5 * (50 * prices["input_cost_per_token"] + 20 * prices["output_cost_per_token"]))
    with sqlite3.connect(run) as db:
        costs = [c for (c,) in db.execute("SELECT cost FROM judgments")]
        basis = db.execute("SELECT price_basis FROM batches").fetchone()[0]
    assert costs == [pytest.approx(expected)] * 2
    assert basis == "batch price (cost map)"


def _env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(LITELLM_LOCAL_MODEL_COST_MAP="true", DSPY_CACHEDIR=str(tmp_path / "dspy_cache"), PYTHONUNBUFFERED="1")
    return env


@pytest.mark.slow
def test_kill_during_a_pending_batch_then_rerun_creates_no_second_batch(batch_server, tmp_path):
    hold = threading.Event()
    hold.set()
    server = batch_server(_rating, hold=hold)
    items, spec, run = _files(tmp_path, 8)
    args = [sys.executable, "-m", "scijudge", "judge", str(items), "-j", str(spec), "-m", "openai/judge",
            "--api-base", server.url, "--run", str(run), "--no-cache", "--no-progress", "--batch", "--batch-poll", "0.05"]
    proc = subprocess.Popen(args, env=_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 90
    while server.retrievals < 2 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, proc.stderr.read().decode()
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    assert server.batch_count == 1
    assert [(b[1], b[2]) for b in _batches(run)] == [("in_progress", 0)]
    assert not run.exists() or not _rows(run)
    hold.clear()
    finished = subprocess.run(args, env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert finished.returncode == 0, finished.stderr
    assert server.batch_count == 1, "the re-run must poll the recorded batch, not submit a second one"
    assert server.count == 0
    assert _rows(run) == {f"it{i:03d}": ("ok", float(i % 5 + 1), None) for i in range(8)}


@pytest.mark.parametrize("model", ["openai/judge", "anthropic/claude-haiku-4-5"])
def test_an_orphaned_batch_is_found_by_its_client_id(batch_server, tmp_path, model):
    """Killed after the batch was created but before its id was recorded: found (OpenAI by metadata, Anthropic
    as the one unrecorded batch of its size), not resubmitted; an intent never created is submitted once."""
    from scijudge.data import load_items
    from scijudge.run.batch.anthropic import AnthropicBatchAPI
    from scijudge.run.batch.openai import OpenAIBatchAPI
    from scijudge.run.api import judge_items
    from scijudge.run.batch.executor import BatchExecutor, _line, _Pending, task_key
    from scijudge.run.batch.store import BatchStore
    from scijudge.judges.build import load_judge
    from scijudge.run.store import Run

    server = batch_server(_rating)
    items_path, spec, run_path = _files(tmp_path, 3)
    items, _ = load_items(items_path)
    judge = load_judge(str(spec), model=model, api_base=server.url, cache=False)
    keys = [task_key(item, judge, "") for item in items]
    run = Run(run_path)
    store = BatchStore(run_path)
    provider = model.split("/")[0]
    orphan = store.intend(provider=provider, endpoint=server.url, model=model, stage=0,
                          strategy="json_schema", temperature=0.0, keys=keys, price_basis=None)
    api = OpenAIBatchAPI(server.url, "sk-test") if provider == "openai" else AnthropicBatchAPI(server.url, "sk-test")
    api.submit([_line(api, k, _Pending(i, judge, "")) for k, i in zip(keys, items)], orphan)
    never = store.intend(provider=provider, endpoint=server.url, model=model, stage=0,
                         strategy="json_schema", temperature=0.0, keys=keys[:1], price_basis=None)
    summary = judge_items(items, [judge], run, executor=BatchExecutor(poll=0.02))
    assert summary.ok == 3 and server.batch_count == 1 and server.count == 0
    statuses = {r.client_id: (r.status, r.remote_id is not None) for r in store.records()}
    assert statuses[orphan] == ("completed", True) and statuses[never] == ("never-created", False)


def test_batch_refuses_what_it_cannot_serve(tmp_path):
    from scijudge.cli import app

    items, spec, run = _files(tmp_path, 1)
    result = CliRunner().invoke(app, ["judge", str(items), "-j", str(spec), "-m", "gemini/gemini-x",
                                      "--run", str(run), "--batch"])
    assert result.exit_code == 2 and "not supported yet" in result.output
    result = CliRunner().invoke(app, ["judge", str(items), "-j", str(spec), "-m", "openai/judge", "--api-base",
                                      "http://127.0.0.1:9/v1", "--run", str(run), "--ray", "local"])
    assert result.exit_code == 2 and "API judges do not need Ray" in result.output


def test_anthropic_message_batches_carry_the_chain_request_and_keys(batch_server, tmp_path):
    from scijudge.chain.chain import strict_schema
    from scijudge.spec.outputs import LikertRating

    def handler(params):
        n = _item(params)
        if n == 2:
            return Fault(status=400, message="prompt refused")
        return "no json" if n == 3 else _rating(params)

    server = batch_server(handler)
    items, spec, run = _files(tmp_path, 4)
    result = _judge(items, spec, run, server.url, model="anthropic/claude-haiku-4-5")
    assert result.exit_code == 0, result.output
    assert server.count == 0 and server.batch_count == 1
    params = server.batch_lines[0]["params"]
    assert params["output_config"]["format"] == {"type": "json_schema", "schema": strict_schema(LikertRating)}
    assert params["system"].startswith("Your input fields are:") and params["temperature"] == 0.0
    rows = _rows(run)
    assert rows["it000"] == ("ok", 1.0, None) and rows["it001"] == ("ok", 2.0, None)
    # a 400 about the prompt (not the format) abstains that line alone with the provider's reason, worded as a
    # direct call words it (issue 10)
    assert rows["it002"][2] == "the provider refused this request: prompt refused"
    assert rows["it003"][2].startswith("all strategies failed; last problem: parse_error")
    with sqlite3.connect(run) as db:
        provider, basis = db.execute("SELECT provider, price_basis FROM batches").fetchone()
        costs = {item: cost for item, cost in db.execute("SELECT item_id, cost FROM judgments")}
    assert provider == "anthropic" and basis == "batch price (cost map)"
    assert costs["it000"] == pytest.approx(50 * 0.5e-6 + 20 * 2.5e-6)  # Haiku 4.5 batch: $0.50 / $2.50 per Mtok
