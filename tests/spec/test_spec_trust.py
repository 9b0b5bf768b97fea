"""Spec code outside scijudge (prepare hooks, output classes) runs only when the user trusts it (issue 11)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from scijudge.spec import judge_spec as specs
from scijudge.errors import SpecError
from scijudge.judges.base import Judge
from scijudge.spec.judge_spec import load_spec_file

HOOK = '''
from pathlib import Path
from pydantic import BaseModel

def prep(values, *, source=None, line=None):
    Path("hook-ran").write_text("yes")
    return {"answer": values["answer"].upper()}

class Out(BaseModel):
    rating: int
'''
SPEC = ('name = "t.code"\nfamily = "likert"\ndescription = "d"\ninstructions = "Rate it."\n{extra}'
        '[[inputs]]\nname = "answer"\n')


@pytest.fixture
def untrusted(monkeypatch):
    monkeypatch.setattr(specs, "_trusted", None)
    monkeypatch.delenv(specs.TRUST_ENV, raising=False)


def test_code_outside_scijudge_is_refused_until_trusted(tmp_path, monkeypatch, untrusted):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))  # as `python -m scijudge` run here would have it
    (tmp_path / "evilmod_i11.py").write_text(HOOK)
    (tmp_path / "hook.toml").write_text(SPEC.format(extra='prepare = "evilmod_i11:prep"\n'))
    (tmp_path / "out.toml").write_text(SPEC.format(extra='output = "evilmod_i11:Out"\n'))
    for name, field in (("hook.toml", "prepare"), ("out.toml", "output")):
        spec = load_spec_file(tmp_path / name)
        with pytest.raises(SpecError, match="--trust-spec-code") as caught:
            Judge(spec)
        assert caught.value.field == field and caught.value.file == str(tmp_path / name)
    assert "evilmod_i11" not in sys.modules  # refused before anything was imported
    monkeypatch.setenv(specs.TRUST_ENV, "1")
    assert load_spec_file(tmp_path / "out.toml").output_type().__name__ == "Out"
    monkeypatch.delenv(specs.TRUST_ENV)
    specs.trust_spec_code(True)
    judge = Judge(load_spec_file(tmp_path / "hook.toml"))
    assert judge._prepare({"answer": "x"})["answer"] == "X"
    assert os.environ.get(specs.TRUST_ENV) == "1"  # spawned worker processes inherit the choice
    specs.trust_spec_code(False)
    assert specs.TRUST_ENV not in os.environ and not specs.spec_code_trusted()
    sys.modules.pop("evilmod_i11", None)


def test_private_and_non_model_targets_are_refused_even_inside_scijudge(tmp_path, untrusted):
    (tmp_path / "priv.toml").write_text(SPEC.format(extra='output = "scijudge.spec.outputs:_on_scale"\n'))
    with pytest.raises(SpecError, match="private"):
        load_spec_file(tmp_path / "priv.toml").output_type()
    (tmp_path / "func.toml").write_text(SPEC.format(extra='output = "scijudge.spec.outputs:coerce_number"\n'))
    with pytest.raises(SpecError, match="not a pydantic model"):
        load_spec_file(tmp_path / "func.toml").output_type()


@pytest.mark.slow
def test_cli_refuses_then_runs_with_trust_spec_code(loopback, tmp_path):
    server = loopback(lambda body: json.dumps({"judgment": {"rationale": "ok", "rating": 4}}))
    (tmp_path / "evilmod_i11.py").write_text(HOOK)
    (tmp_path / "hook.toml").write_text(SPEC.format(extra='prepare = "evilmod_i11:prep"\n'))
    (tmp_path / "items.jsonl").write_text(json.dumps({"id": "a", "answer": "shout"}) + "\n")
    env = {k: v for k, v in os.environ.items() if k != specs.TRUST_ENV}
    env.update(LITELLM_LOCAL_MODEL_COST_MAP="true", DSPY_CACHEDIR=str(tmp_path / "cache"))
    base = [sys.executable, "-m", "scijudge", "judge", "items.jsonl", "-j", "hook.toml", "-m", "openai/judge",
            "--api-base", server.url, "--run", "run.sqlite", "--no-progress"]
    refused = subprocess.run(base, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "hook.toml, field 'prepare'" in refused.stderr and "--trust-spec-code" in refused.stderr
    assert not (tmp_path / "hook-ran").exists() and server.count == 0
    trusted = subprocess.run(base + ["--trust-spec-code"], cwd=tmp_path, env=env, capture_output=True, text=True,
                             timeout=180)
    assert trusted.returncode == 0, trusted.stderr
    assert (tmp_path / "hook-ran").exists() and "SHOUT" in json.dumps(server.requests[0])
