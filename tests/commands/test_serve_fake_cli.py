"""`scijudge serve-fake`: a user-facing fake OpenAI-compatible model that every API path can be tried against."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from scijudge.testing.fake_model import FakeModel, instance

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"judgment": {"$ref": "#/$defs/R"}}, "required": ["judgment"],
     "additionalProperties": False,
     "$defs": {"R": {"type": "object", "properties": {"rating": {"type": "integer", "minimum": 1, "maximum": 5},
                                                      "rationale": {"type": "string"}},
                     "required": ["rating", "rationale"], "additionalProperties": False}}},
    {"type": "object", "properties": {"score": {"type": "number", "minimum": 1, "maximum": 5, "multipleOf": 0.5},
                                      "flags": {"type": "array", "items": {"enum": ["F1", "F2"]}, "minItems": 1},
                                      "verdict": {"anyOf": [{"type": "null"}, {"enum": ["satisfied", "not"]}]},
                                      "ok": {"type": "boolean"}}},
])
def test_fake_answers_validate_against_the_request_schema(schema):
    for seed in range(30):
        value = instance(schema, random.Random(seed))
        jsonschema.validate(value, schema)


def test_the_same_prompt_gets_the_same_answer_and_decisions_get_level_logprobs():
    model = FakeModel(seed=3)
    body = {"messages": [{"role": "user", "content": "rate this"}],
            "response_format": {"type": "json_schema", "json_schema": {"schema": {
                "type": "object", "properties": {"rating": {"type": "integer", "minimum": 1, "maximum": 5}}}}}}
    assert model(body) == model(body)
    decision = model({"messages": [{"role": "user", "content": "rate"}], "logprobs": True, "top_logprobs": 5})
    top = decision.logprobs[0]["top_logprobs"]
    assert sorted(t["token"] for t in top) == ["1", "2", "3", "4", "5"]
    assert abs(sum(pow(2.718281828459045, t["logprob"]) for t in top) - 1) < 1e-6


@pytest.mark.slow
def test_serve_fake_serves_judge_and_decision_runs_until_ctrl_c(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "LITELLM_LOCAL_MODEL_COST_MAP": "true",
           "OPENAI_API_KEY": "fake", "PYTHONUNBUFFERED": "1"}
    server = subprocess.Popen([sys.executable, "-m", "scijudge", "serve-fake", "--port", "0"], cwd=tmp_path, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = server.stdout.readline()
        assert "serving a fake judge model at http://127.0.0.1:" in first, first + server.stderr.read()
        url = first.split(" at ")[1].split()[0]
        items = str(REPO / "datasets/yescieval_example/items.jsonl")
        for mode, run in (("generate", "gen.sqlite"), ("decision", "dec.sqlite")):
            done = subprocess.run([sys.executable, "-m", "scijudge", "judge", items, "-j", "yescieval.qa.correctness",
                                   "-m", "openai/fake", "--api-base", url, "--run", run, "--mode", mode],
                                  cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
            assert done.returncode == 0, done.stderr
            with sqlite3.connect(tmp_path / run) as db:
                rows = db.execute("SELECT status, score, probs FROM judgments").fetchall()
            assert len(rows) == 12 and {status for status, _, _ in rows} == {"ok"}
            assert all(1 <= score <= 5 for _, score, _ in rows)
            if mode == "decision":
                assert all(abs(sum(json.loads(probs).values()) - 1) < 1e-6 for _, _, probs in rows)
        server.send_signal(signal.SIGINT)
        out, err = server.communicate(timeout=30)
        assert server.returncode == 0, err
        assert "stopped after 24 requests" in out
    finally:
        if server.poll() is None:
            server.kill()


def test_a_taken_port_is_one_line(tmp_path):
    import socket

    from typer.testing import CliRunner

    from scijudge.cli import app

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        result = CliRunner().invoke(app, ["serve-fake", "--port", str(port)])
    assert result.exit_code == 2
    assert f"cannot listen on 127.0.0.1:{port}" in result.output
    assert "Traceback" not in result.output
