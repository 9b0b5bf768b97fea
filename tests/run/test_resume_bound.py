"""A SIGKILL of `scijudge judge` at concurrency C re-requests at most C judgments when the run is resumed.

The thread executor stores each result in the worker that made it before that worker sends anything else, so
what was sent but not stored at any moment is bounded by the number of threads. Requests are counted at the
loopback server, with and without the response cache.
"""

from __future__ import annotations

import collections
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scijudge.testing.openai_server import last_user_text
from scijudge.testing.cli import stored_ok_items

pytestmark = pytest.mark.slow  # two CLI subprocesses per case

CONCURRENCY = 16
ITEMS = 8 * CONCURRENCY
SPEC_TOML = """
name = "test.bound"
family = "likert"
description = "a rubric for the resume-bound test"
instructions = "Rate the answer."
[[inputs]]
name = "question"
[[inputs]]
name = "answer"
"""


_stored = stored_ok_items  # what a CLI run has stored so far


@pytest.mark.parametrize("cache", [False, True], ids=["no-cache", "cache-on"])
def test_sigkill_at_concurrency_c_re_requests_at_most_c(loopback, tmp_path: Path, cache: bool) -> None:
    requests: collections.Counter[str] = collections.Counter()

    def handler(body: dict) -> str:
        requests[re.search(r"ITEM-(it\d+)", last_user_text(body)).group(1)] += 1
        return json.dumps({"judgment": {"rationale": "ok", "rating": 3}})

    server = loopback(handler, latency=0.1)
    items, spec, run = tmp_path / "items.jsonl", tmp_path / "spec.toml", tmp_path / "run.sqlite"
    items.write_text("".join(json.dumps({"id": f"it{i:03d}", "question": "Q?", "answer": f"ITEM-it{i:03d} text"})
                             + "\n" for i in range(ITEMS)))
    spec.write_text(SPEC_TOML)
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="true", DSPY_CACHEDIR=str(tmp_path / "dspy_cache"),
               PYTHONUNBUFFERED="1")
    args = [sys.executable, "-m", "scijudge", "judge", str(items), "-j", str(spec), "-m", "openai/judge",
            "--api-base", server.url, "--run", str(run), "--concurrency", str(CONCURRENCY), "--no-progress",
            *([] if cache else ["--no-cache"])]

    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while len(_stored(run)) < 2 * CONCURRENCY and time.time() < deadline and proc.poll() is None:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    stored_before = _stored(run)
    sent_before = sum(requests.values())
    assert 2 * CONCURRENCY <= len(stored_before) < ITEMS, "the kill must land mid-run"
    assert sent_before - len(stored_before) <= CONCURRENCY  # sent but not stored at the kill

    finished = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stderr
    assert _stored(run) == {f"it{i:03d}" for i in range(ITEMS)}, "no judgment may be lost"
    re_requested = sum(requests.values()) - ITEMS
    assert re_requested <= CONCURRENCY, f"{re_requested} judgments were requested twice (concurrency {CONCURRENCY})"
    assert not {item for item, n in requests.items() if n > 1} & stored_before, "a stored judgment was re-requested"


def test_a_store_that_stops_writing_stops_the_sending_within_c(loopback, tmp_path: Path) -> None:
    """Deterministic form: once the store hangs (a process about to be killed), at most C more requests go out.

    (A main loop that stored results while 2 x C tasks were queued let the threads send up to 2 x C.)"""
    import threading

    from scijudge import Item, Judge, Run, get_spec, judge_items, make_lm

    server = loopback(lambda body: json.dumps({"judgment": {"rationale": "ok", "rating": 4}}), latency=0.05)
    judge = Judge(get_spec("yescieval.qa.correctness"), lm=make_lm("openai/judge", api_base=server.url, cache=False))
    items = [Item(id=f"i{i}", question="Q?", papers=[{"title": "T", "abstract": "A."}], answer=f"A {i} [1].")
             for i in range(10 * CONCURRENCY)]
    blocked, release, stop = threading.Event(), threading.Event(), threading.Event()
    with Run(tmp_path / "r.sqlite") as run:
        real, stored = run.record, [0]

        def record(result: object) -> None:
            if stored[0] >= CONCURRENCY:  # after C stored results the store hangs
                blocked.set()
                release.wait(60)
            real(result)
            stored[0] += 1

        run.record = record  # type: ignore[method-assign]
        worker = threading.Thread(target=judge_items, args=(items, [judge]),
                                  kwargs=dict(run=run, concurrency=CONCURRENCY, stop=stop, grace=0.5))
        worker.start()
        try:
            assert blocked.wait(60)
            time.sleep(1.0)  # every thread that can still send does so (latency 0.05 s)
            sent, kept = server.count, stored[0]
        finally:
            stop.set()
            release.set()
            worker.join(60)
    assert kept == CONCURRENCY
    assert CONCURRENCY < sent <= kept + CONCURRENCY, f"sent {sent}, stored {kept}"
