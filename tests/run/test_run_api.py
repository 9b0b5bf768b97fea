"""One run API: ``judge_items(..., executor=...)`` from Python stores exactly what the CLI stores."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scijudge.testing.batch_server import BatchServer
from scijudge.testing.openai_server import last_user_text

SPEC_TOML = """
name = "test.api"
family = "likert"
description = "a rubric for run-API tests"
instructions = "Rate the answer."
[[inputs]]
name = "question"
[[inputs]]
name = "answer"
"""


def _rating(body: dict) -> str:
    number = int(re.search(r"ITEM-it(\d+)", last_user_text(body)).group(1))
    return json.dumps({"judgment": {"rationale": "fine", "rating": number % 5 + 1}})


def _files(tmp_path: Path, n: int) -> tuple[Path, Path]:
    items, spec = tmp_path / "items.jsonl", tmp_path / "spec.toml"
    items.write_text("".join(json.dumps({"id": f"it{i:03d}", "question": "Q?", "answer": f"ITEM-it{i:03d} text"}) + "\n"
                             for i in range(n)))
    spec.write_text(SPEC_TOML)
    return items, spec


def _stored(run: Path) -> set[tuple]:
    with sqlite3.connect(run) as db:
        return set(db.execute("SELECT key, item_id, judge, part, spec_hash, model, endpoint, input_hash, decoding, "
                              "status, score FROM judgments"))


def _cli(*args: str) -> None:
    from scijudge.cli import app

    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("executor", ["batch", pytest.param("processes", marks=pytest.mark.slow), "threads"])
def test_python_and_the_cli_store_the_same_judgments(tmp_path, executor):
    """With worker processes the CLI shards the items over two workers and Python uses one: the two stores
    are equal only if sharding loses, repeats and changes nothing (and one worker fewer to start: each imports
    DSPy afresh)."""
    from scijudge import Run, judge_items, load_items, load_judge
    from scijudge.run.api import make_executor

    server = BatchServer(_rating).start()
    try:
        items_path, spec = _files(tmp_path, 6)
        flags = {"batch": ["--batch", "--batch-poll", "0.02"], "processes": ["--processes", "2"], "threads": []}
        _cli("judge", str(items_path), "-j", str(spec), "-m", "openai/judge", "--api-base", server.url,
             "--run", str(tmp_path / "cli.sqlite"), "--no-cache", "--no-progress", *flags[executor])
        options = {"batch": {"poll": 0.02}, "processes": {"processes": 1, "use_cache": False}, "threads": {}}
        items, _ = load_items(items_path)
        judge = load_judge(str(spec), model="openai/judge", api_base=server.url, cache=False)
        with Run(tmp_path / "py.sqlite") as run:
            summary = judge_items(items, [judge], run, executor=make_executor(executor, **options[executor]))
        assert summary.ok == 6
    finally:
        server.stop()
    cli, python = _stored(tmp_path / "cli.sqlite"), _stored(tmp_path / "py.sqlite")
    assert len(cli) == 6 and cli == python


def test_an_executor_refuses_judges_it_cannot_serve_before_anything_is_sent(tmp_path):
    from scijudge import ModelError, judge_items, load_judge
    from scijudge.judges.fused import FusedJudge
    from scijudge.spec.judge_spec import get_spec
    from scijudge.testing.scripted import scripted_lm

    lm = scripted_lm(lambda request: "{}")
    fused = FusedJudge([get_spec("yescieval.qa.correctness"), get_spec("yescieval.qa.coherence")], lm=lm)
    with pytest.raises(ModelError, match="--fused"):
        judge_items([], [fused], executor="batch")
    with pytest.raises(ModelError, match="not built by scijudge.make_lm"):
        judge_items([], [load_judge("yescieval.qa.correctness", lm=lm)], executor="processes")
    assert lm.engine.requests == []


def test_every_judge_family_implements_the_contract():
    from scijudge.judges import JudgeProtocol
    from scijudge.judges.build import build_judge
    from scijudge.judges.fused import FusedJudge
    from scijudge.spec.judge_spec import get_spec

    names = ["yescieval.qa.correctness", "yescieval.qa.correctness.pairwise", "researchrubrics.checklist",
             "lematerial.synthesis", "lematerial.linking"]
    judges = [build_judge(get_spec(name)) for name in names]
    judges.append(FusedJudge([get_spec("yescieval.qa.correctness"), get_spec("yescieval.qa.coherence")]))
    assert all(isinstance(judge, JudgeProtocol) for judge in judges)
