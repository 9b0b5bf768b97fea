"""A stopped run says the same two counts for every executor (issue 35 item 12): judgments in flight that got no
answer in the grace period, and judgments never sent; a second Ctrl-C prints one line before exiting 130."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from scijudge.testing.openai_server import Hang

SPEC = """
name = "test.interrupt"
family = "likert"
description = "a rubric for interrupt tests"
instructions = "Rate the answer."
[[inputs]]
name = "question"
[[inputs]]
name = "answer"
"""
N = 10


def _files(tmp_path: Path) -> tuple[Path, Path]:
    items, spec = tmp_path / "items.jsonl", tmp_path / "spec.toml"
    items.write_text("".join(json.dumps({"id": f"it{i:03d}", "question": "Q?", "answer": f"text {i}"}) + "\n"
                             for i in range(N)))
    spec.write_text(SPEC)
    return items, spec


def _stop_after(server, stop: threading.Event, arrived: int) -> None:
    """Ctrl-C once ``arrived`` requests reached the server (they hang there)."""
    def watch() -> None:
        deadline = time.monotonic() + 60
        while server.count < arrived and time.monotonic() < deadline:
            time.sleep(0.01)
        stop.set()
    threading.Thread(target=watch, daemon=True).start()


def _run(loopback, tmp_path, executor):
    from scijudge.data import load_items
    from scijudge.judges.build import load_judge
    from scijudge.run.api import judge_items
    from scijudge.run.store import Run

    server = loopback(lambda body: Hang(30))
    items, spec = _files(tmp_path)
    judge = load_judge(str(spec), model="openai/judge", api_base=server.url, cache=False)
    stop = threading.Event()
    in_flight = getattr(executor, "concurrency", 2)
    _stop_after(server, stop, in_flight)
    summary = judge_items(load_items(items)[0], [judge], Run(tmp_path / "run.sqlite"), executor=executor,
                          stop=stop, grace=0.3)
    return summary, server, in_flight


def test_threads_count_requests_in_flight_and_judgments_never_sent(loopback, tmp_path):
    from scijudge.run.threads import ThreadExecutor

    summary, server, in_flight = _run(loopback, tmp_path, ThreadExecutor(concurrency=2))
    assert summary.interrupted and summary.judged == 0
    assert server.count == in_flight == 2
    assert (summary.abandoned, summary.not_sent) == (2, N - 2)
    assert summary.unfinished() == f"2 in flight got no answer in time, {N - 2} not sent yet"


@pytest.mark.slow
def test_processes_say_the_same_two_counts(loopback, tmp_path):
    from scijudge.run.processes import ProcessExecutor

    summary, server, in_flight = _run(loopback, tmp_path, ProcessExecutor(processes=2, concurrency=4))
    assert summary.interrupted and summary.judged == 0
    assert server.count == in_flight == 4
    assert (summary.abandoned, summary.not_sent) == (4, N - 4)


@pytest.mark.slow
def test_the_cli_says_both_counts_and_a_second_ctrl_c_prints_one_line(loopback, tmp_path):
    import os
    import signal
    import subprocess
    import sys

    server = loopback(lambda body: Hang(60))
    items, spec = _files(tmp_path)
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="true", DSPY_CACHEDIR=str(tmp_path / "cache"),
               PYTHONUNBUFFERED="1")
    args = [sys.executable, "-m", "scijudge", "judge", str(items), "-j", str(spec), "-m", "openai/judge",
            "--api-base", server.url, "--run", str(tmp_path / "run.sqlite"), "--no-cache", "--no-progress",
            "--concurrency", "3"]
    first = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    while server.count < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    first.send_signal(signal.SIGINT)
    output, _ = first.communicate(timeout=60)  # the default grace (10 s) passes: the hanging requests stay lost
    assert first.returncode == 130, output
    assert f"3 in flight got no answer in time, {N - 3} not sent yet" in output.replace("\n", " "), output

    second = subprocess.Popen([*args, "--grace", "30"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
    deadline = time.monotonic() + 120
    while server.count < 6 and time.monotonic() < deadline:
        time.sleep(0.05)
    second.send_signal(signal.SIGINT)
    time.sleep(1.0)
    second.send_signal(signal.SIGINT)
    output, _ = second.communicate(timeout=30)
    assert second.returncode == 130, output
    quit_lines = [line for line in output.splitlines() if line.startswith("quit at once")]
    assert len(quit_lines) == 1 and "resume with: scijudge judge" in quit_lines[0], output


def test_the_interrupt_line_counts_every_planned_judgment_once():
    from scijudge.run.summary import RunSummary

    summary = RunSummary(planned=10, judged=4, abandoned=2, not_sent=3, no_answer=1, interrupted=True)
    assert summary.unfinished() == "2 in flight got no answer in time, 3 not sent yet, 1 got no answer (not stored)"
