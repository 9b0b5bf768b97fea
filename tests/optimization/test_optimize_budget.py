"""Budgets counted at the loopback server: N LM calls are never exceeded, cost stops the run, re-runs hit the cache."""

from __future__ import annotations

import math
import tomllib
from pathlib import Path
from typing import Any

import dspy
import pytest

from scijudge.testing.toy_judge import toy_setup
from scijudge.optimization._recipes import recipe_from_dict
from scijudge.errors import BudgetExceeded
from scijudge.lm import make_lm
from scijudge.optimization import optimize
from scijudge.testing import Reply

REPO = Path(__file__).resolve().parents[2]
SMALL: dict[str, dict[str, Any]] = {
    "mipro": {"num_candidates": 3, "num_trials": 4, "max_bootstrapped_demos": 1, "max_labeled_demos": 1},
    "gepa": {"max_metric_calls": 60},
    "simba": {"bsize": 6, "num_candidates": 3, "max_steps": 2, "max_demos": 1},
    "copro": {"breadth": 3, "depth": 1},
    "bootstrap_rs": {"num_candidate_programs": 2},
}


def recipe(name: str, threads: int = 1, **budget: Any) -> Any:
    data = tomllib.loads((REPO / "optimizers" / f"{name}.toml").read_text(encoding="utf-8"))
    data["settings"] = {**data["settings"], **SMALL[name], "num_threads": threads}
    data["budget"] = budget
    data["split"] = {**data["split"], "seed": 3}
    return recipe_from_dict(data, source=f"{name}.toml")


@pytest.mark.slow
@pytest.mark.parametrize(("name", "limit"), [("mipro", 30), ("gepa", 45), ("copro", 40), ("bootstrap_rs", 33),
                                             ("simba", 60)])
def test_call_budget_is_never_exceeded(loopback: Any, name: str, limit: int) -> None:
    """Four threads judging at once, proposals on a second server: together they never see limit + 1 requests."""
    spec, items, labels, world = toy_setup()
    server = loopback(world.http_handler)
    proposer = loopback(world.http_handler)
    lm = make_lm("openai/toy-judge", api_base=server.url, cache=False)
    prompt_lm = make_lm("openai/toy-proposer", api_base=proposer.url, cache=False)
    try:
        result = optimize(spec, items, labels, lm, recipe(name, threads=4, max_lm_calls=limit), prompt_lm=prompt_lm,
                          n_boot=0)
    except BudgetExceeded as exc:  # the budget ran out before any candidate was fully scored
        assert "budget" in str(exc)
        assert server.count + proposer.count <= limit
        return
    assert server.count + proposer.count <= limit
    assert server.count + proposer.count == result.budget["lm_calls"]
    assert proposer.count > 0 or name == "bootstrap_rs"  # proposal calls went to the prompt model (and counted)
    assert result.stopped and "budget" in result.stopped  # these limits are below what the runs want
    assert result.budget["optimization_lm_calls"] <= limit - 2 * len(result.split.test)
    assert result.after["n_units"] == len(result.split.test)  # the reserve paid for the whole test evaluation


def test_budget_stop_keeps_the_best_candidate_so_far(loopback: Any) -> None:
    spec, items, labels, world = toy_setup()
    server = loopback(world.http_handler)
    lm = make_lm("openai/toy-judge", api_base=server.url, cache=False)
    result = optimize(spec, items, labels, lm, recipe("gepa", max_lm_calls=45), n_boot=0)
    assert server.count <= 45 and result.stopped
    scored = [t for t in result.trials if t["score"] is not None]
    best = max(scored, key=lambda t: t["score"])
    assert best["score"] > scored[0]["score"]  # a better candidate than the base was found before the stop
    assert result.after["score"] > result.before["score"]
    assert any("stopped early" in n for n in result.notes)


@pytest.mark.slow
def test_cost_budget(loopback: Any) -> None:
    """Priced model (gpt-4o-mini's public price), a fixed token count per reply: the spend stays within one
    call of the budget, and the test evaluation still gets judged."""
    import litellm

    spec, items, labels, world = toy_setup()
    server = loopback(lambda body: Reply(world.http_handler(body), prompt_tokens=100_000, completion_tokens=1_000))
    price = litellm.model_cost["gpt-4o-mini"]
    per_call = 100_000 * price["input_cost_per_token"] + 1_000 * price["output_cost_per_token"]
    lm = make_lm("openai/gpt-4o-mini", api_base=server.url, cache=False)
    result = optimize(spec, items, labels, lm, recipe("gepa", max_cost_usd=0.7), n_boot=0)
    spent = server.count * per_call
    assert result.budget["cost_usd"] == pytest.approx(spent)
    # the optimizer stops when the spend plus the test reserve (with its retry margin) would reach the budget;
    # what the test evaluation did not need of that margin is left unspent
    reserve = math.ceil(1.25 * 2 * len(result.split.test))
    unused = reserve - result.budget["evaluation_lm_calls"]
    assert 0.7 - (unused + 1) * per_call < spent <= 0.7 + per_call
    assert result.stopped and "cost budget" in result.stopped
    assert result.after["n_units"] == len(result.split.test)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mipro", "gepa", "simba"])
def test_rerun_is_served_from_the_cache(loopback: Any, tmp_path: Path, name: str) -> None:
    dspy.configure_cache(enable_disk_cache=True, disk_cache_dir=str(tmp_path / "cache"), enable_memory_cache=True)
    spec, items, labels, world = toy_setup()
    server = loopback(world.http_handler)
    lm = make_lm("openai/toy-judge", api_base=server.url, cache=True)
    first = optimize(spec, items, labels, lm, recipe(name, max_lm_calls=400), n_boot=0)
    sent = server.count
    assert sent == first.budget["lm_calls"] - first.budget["cached_calls"] > 0  # repeats inside a run hit the cache too
    again = optimize(spec, items, labels, make_lm("openai/toy-judge", api_base=server.url, cache=True),
                     recipe(name, max_lm_calls=400), n_boot=0)
    assert server.count == sent + 1  # not one new request but the (never cached) preflight
    assert again.budget["preflight_lm_calls"] == 1
    assert again.budget["cached_calls"] == again.budget["lm_calls"] - 1 == first.budget["lm_calls"] - 1
    assert again.spec.spec_hash() == first.spec.spec_hash()
    assert again.after == first.after


def test_a_fatal_model_error_ends_the_run_at_once(loopback: Any) -> None:
    """A rejected API key is not a failed example: the run stops with the provider's error after one request."""
    from scijudge.errors import ModelError
    from scijudge.testing import Fault

    spec, items, labels, _ = toy_setup()
    server = loopback(lambda body: Fault(401, "invalid api key", "authentication_error"))
    lm = make_lm("openai/toy-judge", api_base=server.url, cache=False)
    with pytest.raises(ModelError, match="invalid api key"):
        optimize(spec, items, labels, lm, recipe("mipro", max_lm_calls=400), n_boot=0)
    assert server.count == 1
