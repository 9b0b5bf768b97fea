"""LM backends by model-string prefix: adding one takes a few lines, and the executors ask the registry."""

from __future__ import annotations

import json
import re

import pytest

from scijudge import Item, Run, judge_items, load_judge
from scijudge.errors import ModelError
from scijudge.lm import is_local_model, make_lm, register_backend
from scijudge.lm._backends import backend_for, local_prefixes, unregister_backend
from scijudge.judges.recipe import JudgeRecipe
from scijudge.run.processes import WorkerPool
from scijudge.testing.scripted import request_text, scripted_lm

PAPERS = [{"title": "A study", "abstract": "It found things."}]
ITEMS = [Item(id=f"q{i}", question="Q?", papers=PAPERS, answer=f"An answer. SCORE={1 + i % 5}") for i in range(4)]


def _rating(request) -> str:
    found = re.findall(r"SCORE=(\d)", request_text(request))
    return json.dumps({"judgment": {"rationale": "marker", "rating": int(found[-1])}})


@pytest.fixture
def toy_backend():
    """A toy backend, registered the way a new one would be, and removed afterwards."""
    built: list[tuple[str, dict]] = []

    def toy_factory(model: str, *, cache: bool, max_tokens: int | None, **options):
        built.append((model, options))
        return scripted_lm(_rating, model=f"toy/{model.removeprefix('toy:')}", cache=cache)

    register_backend("toy:", toy_factory)
    yield built
    unregister_backend("toy:")


def test_a_new_backend_is_a_factory_and_one_registration_judged_end_to_end(toy_backend, tmp_path):
    judge = load_judge("yescieval.qa.correctness", model="toy:judge-1", flavour="sweet")
    with Run(tmp_path / "run.sqlite") as run:
        summary = judge_items(ITEMS, [judge], run=run, concurrency=2)
        frame = run.to_pandas()
    assert summary.ok == 4
    assert sorted(frame.score) == [1.0, 2.0, 3.0, 4.0]
    assert set(frame.model) == {"toy/judge-1"}
    # make_lm handed the model string and the backend's own options to the factory, untouched
    model, options = toy_backend[0]
    assert model == "toy:judge-1" and options["flavour"] == "sweet" and options["api_base"] is None


def test_hf_is_the_registered_local_backend():
    assert backend_for("hf:/models/adapter").prefix == "hf:"
    assert is_local_model("hf:/models/adapter") and "hf:" in local_prefixes()
    assert not is_local_model("openai/gpt-4o-mini") and backend_for("openai/gpt-4o-mini") is None


def test_executors_ask_the_registry_whether_a_model_is_local(toy_backend):
    register_backend("toylocal:", lambda model, **_: scripted_lm(_rating), local=True)
    try:
        assert is_local_model("toylocal:x") and not is_local_model("toy:x")
        with pytest.raises(ModelError, match="batches inside one process"):
            WorkerPool([JudgeRecipe(spec=None, model="toylocal:x")], processes=2)
        from scijudge.run.ray import check_ray_recipes

        with pytest.raises(ModelError, match="is an API model"):
            check_ray_recipes([JudgeRecipe(spec=None, model="toy:x")])
        check_ray_recipes([JudgeRecipe(spec=None, model="toylocal:x")])  # a local backend is what Ray serves
    finally:
        unregister_backend("toylocal:")


def test_the_longest_prefix_wins_and_no_prefix_is_shadowed_silently(toy_backend):
    register_backend("toy:big/", lambda model, **_: scripted_lm(_rating, model="toy/big"), local=True)
    try:
        assert backend_for("toy:big/x").prefix == "toy:big/" and backend_for("toy:small").prefix == "toy:"
        assert make_lm("toy:big/x").model == "toy/big"
    finally:
        unregister_backend("toy:big/")
    with pytest.raises(ValueError, match="already registered"):
        register_backend("hf:", lambda model, **_: None)


def test_api_models_still_refuse_local_only_options():
    with pytest.raises(ModelError, match=r"apply only to local models \(hf:"):
        make_lm("openai/gpt-4o-mini", dtype="float32")
