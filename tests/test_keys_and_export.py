"""API keys come from the environment or .env and are never written; runs export to JSONL and CSV."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd
import pytest

pytestmark = pytest.mark.slow  # every test here takes seconds (see CONTRIBUTING.md)

SPEC = 'name = "t.k"\nfamily = "likert"\ndescription = "d"\ninstructions = "Rate it."\n[[inputs]]\nname = "answer"\n'


def test_key_from_dotenv_is_used_and_never_stored(loopback, tmp_path):
    secret = "sk-test-SECRET-0123456789"
    server = loopback(lambda b: json.dumps({"judgment": {"rationale": "ok", "rating": 4}}))
    (tmp_path / ".env").write_text(f"OPENAI_API_KEY={secret}\n")
    (tmp_path / "spec.toml").write_text(SPEC)
    (tmp_path / "items.jsonl").write_text(json.dumps({"id": "a", "answer": "x"}) + "\n")
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env.update(LITELLM_LOCAL_MODEL_COST_MAP="true", DSPY_CACHEDIR=str(tmp_path / "cache"))
    base = [sys.executable, "-m", "scijudge"]
    judged = subprocess.run(base + ["judge", "items.jsonl", "-j", "spec.toml", "-m", "openai/judge", "--api-base",
                                    server.url, "--run", "run.sqlite", "--no-progress"],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert judged.returncode == 0, judged.stderr
    assert server.auth_headers == [f"Bearer {secret}"]
    for fmt in ("jsonl", "csv"):
        exported = subprocess.run(base + ["export", "run.sqlite", "--format", fmt, "--out", f"out.{fmt}"],
                                  cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert exported.returncode == 0, exported.stderr
    for name in ("run.sqlite", "run.sqlite-wal", "out.jsonl", "out.csv"):
        path = tmp_path / name
        if path.exists():
            assert secret.encode() not in path.read_bytes(), f"key leaked into {name}"
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert rows[0]["score"] == 4.0 and rows[0]["attempts"][0]["outcome"] == "ok"
    frame = pd.read_csv(tmp_path / "out.csv")
    assert frame.loc[0, "item_id"] == "a" and frame.loc[0, "score"] == 4.0
