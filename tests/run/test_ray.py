"""The Ray path stores the same judgments as the single-process path (tiny local model, Ray on this machine)."""

from __future__ import annotations

import sqlite3

import pytest

# .ci/run installs the ray extra and sets SCIJUDGE_REQUIRE_EXTRAS: there a missing Ray fails instead of skipping.
pytestmark = [pytest.mark.slow,  # starts Ray and a tiny local model: tens of seconds
              pytest.mark.needs_extra("ray")]


def test_ray_actors_store_the_same_judgments_as_one_process(tmp_path):
    pytest.importorskip("torch", reason="the tiny local model needs the 'local' extra")
    from scijudge.data import load_items
    from scijudge.run.ray import RayExecutor
    from scijudge.lm.tiny import build_tiny_model
    from scijudge.judges.recipe import JudgeRecipe
    from scijudge.run.api import judge_items
    from scijudge.run.store import Run
    from scijudge.spec.judge_spec import get_spec

    paths = build_tiny_model(tmp_path / "tiny")
    items, _ = load_items("datasets/yescieval_example/items.jsonl")
    items = items[:3]  # one done already, one chunk for each of the two actors
    recipes = [JudgeRecipe(get_spec("yescieval.qa.correctness"), f"hf:{paths['adapter']}", {"max_tokens": 96})]
    one = Run(tmp_path / "one.sqlite")
    judge_items(items, [recipe.build() for recipe in recipes], run=one, concurrency=1)
    spread = Run(tmp_path / "ray.sqlite")
    spread.record(next(r for r in one.results() if r.item_id == items[0].id))  # resumed: one judgment already done
    summary = judge_items(items, recipes, spread, executor=RayExecutor(workers=2, concurrency=1, chunk_items=1))
    assert (summary.judged, summary.skipped_done) == (2, 1), "the actors skip what the store holds"

    def stored(path):
        with sqlite3.connect(path) as db:
            return {row[0]: row[1:] for row in db.execute(
                "SELECT key, item_id, judge, spec_hash, model, status, score, result FROM judgments")}

    assert len(stored(one.path)) == 3
    assert stored(spread.path) == stored(one.path)
