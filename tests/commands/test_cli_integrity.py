"""Issue 10 through `scijudge judge` as a user runs it: exit codes, interrupts, worker processes, one writer."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scijudge.testing.openai_server import closed_port_url

pytestmark = pytest.mark.slow  # every test here takes seconds (see CONTRIBUTING.md)

SPEC_TOML = 'name = "t.cli"\nfamily = "likert"\ndescription = "d"\ninstructions = "Rate it."\n[[inputs]]\nname = "answer"\n'
GOOD = json.dumps({"judgment": {"rationale": "r", "rating": 4}})


def _setup(tmp_path: Path, n: int) -> dict[str, str]:
    (tmp_path / "spec.toml").write_text(SPEC_TOML)
    (tmp_path / "items.jsonl").write_text("".join(json.dumps({"id": f"it{i:03d}", "answer": f"text {i}"}) + "\n"
                                                 for i in range(n)))
    env = dict(os.environ)
    env.update(LITELLM_LOCAL_MODEL_COST_MAP="true", DSPY_CACHEDIR=str(tmp_path / "cache"), PYTHONUNBUFFERED="1")
    return env


def _judge_args(url: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "scijudge", "judge", "items.jsonl", "-j", "spec.toml", "-m", "openai/judge",
            "--api-base", url, "--run", "run.sqlite", "--no-progress", "--no-cache", *extra]


def _stored(path: Path) -> int:
    if not path.exists():
        return 0
    try:
        with sqlite3.connect(path) as db:
            return db.execute("SELECT COUNT(*) FROM judgments").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def test_unreachable_endpoint_exits_non_zero_fast_and_a_fixed_run_judges_everything(loopback, tmp_path):
    env = _setup(tmp_path, 5)
    started = time.perf_counter()
    down = subprocess.run(_judge_args(closed_port_url()), cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=60)
    assert time.perf_counter() - started < 30
    assert down.returncode == 3, down.stderr
    assert "cannot reach" in down.stderr and "Traceback" not in down.stderr
    assert _stored(tmp_path / "run.sqlite") == 0
    server = loopback(lambda b: GOOD)
    fixed = subprocess.run(_judge_args(server.url), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert fixed.returncode == 0, fixed.stderr
    assert _stored(tmp_path / "run.sqlite") == 5 and server.count == 5


def test_ctrl_c_stores_answers_in_flight_prints_resume_and_exits_130(loopback, tmp_path):
    env = _setup(tmp_path, 30)
    server = loopback(lambda b: GOOD, latency=0.6)
    proc = subprocess.Popen(_judge_args(server.url, "--concurrency", "4", "--grace", "5"), cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while _stored(tmp_path / "run.sqlite") < 4 and time.monotonic() < deadline:
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "resume with: scijudge judge items.jsonl" in err
    sent, stored = server.count, _stored(tmp_path / "run.sqlite")
    assert stored == sent < 30, "every request sent before the stop has its answer stored"
    again = subprocess.run(_judge_args(server.url), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert server.count == 30, "the re-run asks only for what was never answered"



def test_ctrl_c_at_concurrency_512_stores_every_answer_in_flight_on_the_event_loop(loopback, tmp_path):
    """The same Ctrl-C at ``--concurrency 512`` (the asyncio executor, what ``judge`` picks from 64 for an API
    model): the answers of all the requests in flight arrive within the grace and are stored; exit 130."""
    env = _setup(tmp_path, 2048)
    server = loopback(lambda b: GOOD, latency=1.0)
    proc = subprocess.Popen(_judge_args(server.url, "--concurrency", "512", "--grace", "20"), cwd=tmp_path,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 90
    while _stored(tmp_path / "run.sqlite") < 512 and time.monotonic() < deadline:
        time.sleep(0.05)
    # The answers come in waves (every request waits 1 s): interrupt once the second wave is in flight, however
    # long a loaded machine takes to send it.
    in_flight = 0
    while in_flight < 100 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.02)
        in_flight = server.count - _stored(tmp_path / "run.sqlite")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "resume with: scijudge judge items.jsonl" in err
    sent, stored = server.count, _stored(tmp_path / "run.sqlite")
    assert in_flight >= 100, "the interrupt must land with many requests in flight"
    assert stored == sent < 2048, "every request sent before the stop has its answer stored"


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_killing_the_parent_of_worker_processes_stops_all_api_traffic(loopback, tmp_path):
    env = _setup(tmp_path, 400)
    server = loopback(lambda b: GOOD, latency=0.3)
    proc = subprocess.Popen(_judge_args(server.url, "--processes", "2", "--concurrency", "4"), cwd=tmp_path,
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 90
    while server.count < 8 and time.monotonic() < deadline:
        time.sleep(0.1)
    workers = _children(proc.pid)
    assert server.count >= 8 and workers
    proc.kill()  # SIGKILL: no handler runs in the parent
    proc.wait(10)
    time.sleep(2.0)
    settled = server.count
    time.sleep(2.0)
    assert server.count == settled, "no request may be sent after the parent died"
    assert not [pid for pid in workers if _alive(pid)], "workers must exit with their parent"


def test_a_second_judge_process_on_the_same_store_refuses(loopback, tmp_path):
    from scijudge.run.store import Run

    env = _setup(tmp_path, 2)
    server = loopback(lambda b: GOOD)
    holder = Run(tmp_path / "run.sqlite").claim_writer()
    try:
        busy = subprocess.run(_judge_args(server.url), cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=120)
    finally:
        holder.close()
    assert busy.returncode == 3 and "run.sqlite is being written by another process" in busy.stderr
    assert f"pid {os.getpid()}" in busy.stderr and server.count == 0


def _rating_of(value: int) -> str:
    return json.dumps({"judgment": {"rationale": "r", "rating": value}})


def test_two_endpoints_behind_one_model_name_keep_their_judgments_apart(loopback, tmp_path):
    """The same command against A then B (one model name, the response cache on): B is asked, both sets stay."""
    env = _setup(tmp_path, 4)
    a, b = loopback(lambda body: _rating_of(1)), loopback(lambda body: _rating_of(5))
    args = [a for a in _judge_args("URL") if a != "--no-cache"]
    for server in (a, b):
        done = subprocess.run([x if x != "URL" else server.url for x in args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
    assert a.count == 4 and b.count == 4  # B was asked: neither the cache nor the store answered for it
    with sqlite3.connect(tmp_path / "run.sqlite") as db:
        rows = db.execute("SELECT endpoint, score FROM judgments WHERE current = 1").fetchall()
    by_endpoint: dict[str, list[float]] = {}
    for endpoint, score in rows:
        by_endpoint.setdefault(endpoint, []).append(score)
    assert by_endpoint == {a.url: [1.0] * 4, b.url: [5.0] * 4}


def test_an_edited_item_is_judged_again_and_the_old_judgment_kept_as_history(loopback, tmp_path):
    env = _setup(tmp_path, 3)
    server = loopback(lambda body: _rating_of(4))
    first = subprocess.run(_judge_args(server.url), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    lines = (tmp_path / "items.jsonl").read_text().splitlines()
    lines[1] = json.dumps({"id": "it001", "answer": "a rewritten answer"})
    (tmp_path / "items.jsonl").write_text("\n".join(lines) + "\n")
    again = subprocess.run(_judge_args(server.url), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert server.count == 4  # three first, then only the edited item
    assert "items changed since the last run" in again.stdout + again.stderr
    with sqlite3.connect(tmp_path / "run.sqlite") as db:
        history = db.execute("SELECT item_id, current FROM judgments ORDER BY rowid").fetchall()
    assert [r for r in history if r[0] == "it001"] == [("it001", 0), ("it001", 1)] and len(history) == 4
