"""`scijudge judge` as a user runs it: resumable after SIGKILL, clear errors for bad input."""

from __future__ import annotations

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

pytestmark = pytest.mark.slow  # every test here takes seconds (see CONTRIBUTING.md)

SPEC_TOML = """
name = "test.cli"
family = "likert"
description = "a rubric for CLI tests"
instructions = "Rate the answer."
[[inputs]]
name = "question"
[[inputs]]
name = "answer"
"""


def _env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(LITELLM_LOCAL_MODEL_COST_MAP="true", DSPY_CACHEDIR=str(tmp_path / "dspy_cache"), PYTHONUNBUFFERED="1")
    return env


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "scijudge", *args]


def _write_items(path: Path, n: int) -> None:
    path.write_text("".join(json.dumps({"id": f"it{i:03d}", "question": "Q?", "answer": f"ITEM-it{i:03d} text"}) + "\n"
                            for i in range(n)))


_completed = stored_ok_items  # what a CLI run has stored so far


def test_sigkill_mid_run_loses_nothing_and_resume_never_repeats(loopback, tmp_path):
    seen: list[str] = []

    def handler(body):
        item = re.search(r"ITEM-(it\d+)", last_user_text(body)).group(1)
        seen.append(item)
        return json.dumps({"judgment": {"rationale": "ok", "rating": 3}})

    server = loopback(handler, latency=0.15)
    items, spec, run = tmp_path / "items.jsonl", tmp_path / "spec.toml", tmp_path / "run.sqlite"
    _write_items(items, 40)
    spec.write_text(SPEC_TOML)
    args = _cli("judge", str(items), "-j", str(spec), "-m", "openai/judge", "--api-base", server.url,
                "--run", str(run), "--concurrency", "4", "--no-cache", "--no-progress")
    proc = subprocess.Popen(args, env=_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 60
    while len(_completed(run)) < 10 and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    done_before = _completed(run)
    assert 10 <= len(done_before) < 40, "the kill must land mid-run"
    requested_before = len(seen)

    finished = subprocess.run(args, env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert finished.returncode == 0, finished.stderr
    assert _completed(run) == {f"it{i:03d}" for i in range(40)}, "no judgment may be lost"
    requested_after = seen[requested_before:]
    assert not set(requested_after) & done_before, "a completed judgment was requested again"
    # Only the judgments in flight at the kill (at most the concurrency) can be requested twice in total.
    assert len(seen) - 40 <= 4

    again = subprocess.run(args, env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and len(seen) == requested_before + len(requested_after)
    assert "already done (skipped)" in again.stdout


@pytest.mark.parametrize(
    "content,expected",
    [
        (b'{"id": "a", "question": "q", "answer": "x"}\n{"id": "b", "question": "q", "answer": \n', r"items.jsonl:2: malformed JSON"),
        (b'{"id": "a", "question": "q"}\n', r"items.jsonl:1, field 'answer'"),
        (b'{"id": 5, "question": "q", "answer": "x"}\n', r"items.jsonl:1, field 'id'"),
        (b'{"id": "a", "question": "q", "answer": "   "}\n', r"items.jsonl:1, field 'answer'"),
        (b'{"id": "a", "question": "q", "answer": "caf\xe9"}\n', r"items.jsonl:1: not UTF-8"),
        (b'{"id": "a", "question": "q", "answer": "x", "answr": "y"}\n', r"items.jsonl:1, field 'answr': unknown field"),
    ],
)
def test_bad_items_name_file_line_and_field(tmp_path, content, expected):
    items = tmp_path / "items.jsonl"
    items.write_bytes(content)
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC_TOML)
    result = subprocess.run(_cli("judge", str(items), "-j", str(spec), "-m", "openai/judge", "--api-base",
                                 "http://127.0.0.1:9/v1", "--run", str(tmp_path / "r.sqlite")),
                            env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert re.search(expected, result.stderr.replace("\n", " ")), result.stderr
    assert "Traceback" not in result.stderr


def test_skip_invalid_judges_the_rest_and_lists_skips(loopback, tmp_path):
    server = loopback(lambda b: json.dumps({"judgment": {"rationale": "ok", "rating": 4}}))
    items = tmp_path / "items.jsonl"
    items.write_bytes(b'{"id": "a", "question": "q", "answer": "x"}\nnot json\n{"id": "c", "question": "q"}\n'
                      b'{"id": "d", "question": "q", "answer": "y"}\n')
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC_TOML)
    result = subprocess.run(_cli("judge", str(items), "-j", str(spec), "-m", "openai/judge", "--api-base", server.url,
                                 "--run", str(tmp_path / "r.sqlite"), "--skip-invalid", "--no-progress"),
                            env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "items.jsonl:2" in result.stderr and "items.jsonl:3" in result.stderr and "answer" in result.stderr
    assert _completed(tmp_path / "r.sqlite") == {"a", "d"}


@pytest.mark.parametrize(
    "spec_text,expected",
    [
        ('name = "x"\nfamily = "likert"\ndescription = "d"\ninstructions = "i"\n[[inputs]\nname = "q"\n', r"spec.toml:5: malformed TOML"),
        ('name = "x"\nfamily = "likert"\ndescription = "d"\ninstructions = "i"\n', r"spec.toml.*field 'inputs'"),
        ('name = "x"\nfamily = "vibes"\ndescription = "d"\ninstructions = "i"\n[[inputs]]\nname = "q"\n', r"spec.toml:2, field 'family'"),
        ('name = "x"\nfamily = "likert"\ndescription = "d"\ninstructions = "i"\ncolour = 1\n[[inputs]]\nname = "q"\n', r"field 'colour'"),
    ],
)
def test_malformed_spec_names_file_line_and_field(tmp_path, spec_text, expected):
    items = tmp_path / "items.jsonl"
    _write_items(items, 1)
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text)
    result = subprocess.run(_cli("judge", str(items), "-j", str(spec), "-m", "openai/judge"), env=_env(tmp_path),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert re.search(expected, result.stderr.replace("\n", " ")), result.stderr


def test_unknown_judge_is_a_clear_error(tmp_path):
    items = tmp_path / "items.jsonl"
    _write_items(items, 1)
    result = subprocess.run(_cli("judge", str(items), "-j", "yescieval.qa.correctnes", "-m", "openai/judge"),
                            env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "unknown judge 'yescieval.qa.correctnes'" in result.stderr
