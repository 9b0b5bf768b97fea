"""Judging over several worker processes: same results, persisted by the parent, resumable."""

from __future__ import annotations

import json
import re

import pytest

from scijudge import Item, ModelError, Run, get_spec
from scijudge.judges.recipe import JudgeRecipe
from scijudge.run.api import judge_items
from scijudge.run.processes import ProcessExecutor
from scijudge.testing.openai_server import last_user_text

PAPERS = [{"title": "A study", "abstract": "It found things."}]


@pytest.mark.slow
def test_two_processes_judge_everything_once_and_resume(loopback, tmp_path):
    def handler(body):
        marker = int(re.search(r"SCORE=(\d)", last_user_text(body)).group(1))
        return json.dumps({"judgment": {"rationale": "marker", "rating": marker}})

    server = loopback(handler)
    items = [Item(id=f"m{i}", question="Q?", papers=PAPERS, answer=f"SCORE={1 + i % 5}") for i in range(24)]
    recipe = JudgeRecipe(get_spec("yescieval.qa.correctness"), "openai/judge", {"api_base": server.url, "cache": False})
    seen = []
    with Run(tmp_path / "r.sqlite") as run:
        summary = judge_items(items[:16], [recipe], run, executor=ProcessExecutor(processes=2, concurrency=4,
                              use_cache=False), on_result=lambda r, s: seen.append(r.item_id))
        assert summary.ok == 16 and sorted(seen) == sorted(i.id for i in items[:16])
        again = judge_items(items, [recipe], run, executor=ProcessExecutor(processes=2, concurrency=4, use_cache=False))
        frame = run.to_pandas()
    assert again.skipped_done == 16 and again.judged == 8
    assert server.count == 24, "no judgment may be requested twice"
    expected = {item.id: float(1 + i % 5) for i, item in enumerate(items)}
    assert len(frame) == 24 and all(frame.score == frame.item_id.map(expected))


def test_local_models_are_refused_for_several_processes():
    recipe = JudgeRecipe(get_spec("yescieval.qa.correctness"), "hf:/nowhere")
    with pytest.raises(ModelError, match="API models"):
        judge_items([], [recipe], executor=ProcessExecutor(processes=2))


@pytest.mark.slow
def test_a_fatal_error_in_a_worker_stops_the_run_and_keeps_what_completed(loopback, tmp_path):
    from scijudge.testing import Fault

    calls = {"n": 0}

    def handler(body):
        calls["n"] += 1
        return json.dumps({"judgment": {"rationale": "ok", "rating": 3}}) if calls["n"] <= 3 else \
            Fault(401, "invalid api key", "authentication_error")

    server = loopback(handler)
    items = [Item(id=f"f{i}", question="Q?", papers=PAPERS, answer="A") for i in range(12)]
    recipe = JudgeRecipe(get_spec("yescieval.qa.correctness"), "openai/judge", {"api_base": server.url, "cache": False})
    with Run(tmp_path / "r.sqlite") as run, pytest.raises(ModelError, match="invalid api key"):
        judge_items(items, [recipe], run, executor=ProcessExecutor(processes=2, concurrency=2, use_cache=False))
    assert len(Run(tmp_path / "r.sqlite")) == 3
