"""Optimizations that survive real providers: flaky proposal calls, dead endpoints, budget stops, bad recipes."""

from __future__ import annotations

import json
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest

from scijudge.errors import InputError
from scijudge.lm import make_lm
from scijudge.optimization import RetryPolicy, optimize, recipe_from_dict, run_experiment
from scijudge.testing.toy_judge import markers, output_fields, toy_setup
from scijudge.spec.judge_spec import get_spec
from scijudge.testing.faults import FlakyHandler
from scijudge.testing.scripted import request_text, scripted_lm

REPO = Path(__file__).resolve().parents[2]
FAST = RetryPolicy(max_retries=6, backoff_base=0.001, backoff_max=0.01)
SMALL: dict[str, dict[str, Any]] = {
    "mipro": {"num_candidates": 3, "num_trials": 4, "max_bootstrapped_demos": 1, "max_labeled_demos": 1},
    "gepa": {"max_metric_calls": 60},
    "simba": {"bsize": 6, "num_candidates": 3, "max_steps": 2, "max_demos": 1},
    "copro": {"breadth": 3, "depth": 1},
}


def recipe(name: str, seed: int = 3, **budget: Any) -> Any:
    data = tomllib.loads((REPO / "optimizers" / f"{name}.toml").read_text(encoding="utf-8"))
    data["settings"] = {**data["settings"], **SMALL.get(name, {}), "num_threads": 1}
    data["budget"] = {"max_lm_calls": 400, **budget}
    data["split"] = {**data["split"], "seed": seed}
    return recipe_from_dict(data, source=f"{name}.toml")


def is_proposal(body: dict[str, Any]) -> bool:
    """A proposal/reflection request (the judge's requests announce the single output field `judgment`)."""
    system = "\n".join(str(m.get("content")) for m in body.get("messages", []) if m.get("role") == "system")
    return bool(system) and output_fields(system) != ["judgment"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["copro", "mipro", "gepa", "simba"])
def test_optimizers_finish_with_30_percent_of_proposal_calls_failing(loopback: Any, name: str) -> None:
    spec, items, labels, world = toy_setup()
    flaky = FlakyHandler(world.http_handler, rate=0.3, seed=11, when=is_proposal)
    server = loopback(world.http_handler)
    proposer = loopback(flaky)
    lm = make_lm("openai/toy-judge", api_base=server.url, cache=False)
    prompt_lm = make_lm("openai/toy-proposer", api_base=proposer.url, cache=False)
    result = optimize(spec, items, labels, lm, recipe(name), prompt_lm=prompt_lm, n_boot=0, retry=FAST)
    assert flaky.failed >= 1 and flaky.selected >= 2  # failures did happen on proposal calls
    assert result.stopped is None  # the search ran to its end, not stopped by the failures
    # every try, failed or not, went through the budget. A call asking for n generations takes n slots before
    # it is sent; when its first request fails the others are never sent, so at most one slot per failure
    # (COPRO asks for 2) is counted without a request
    sent = server.count + proposer.count
    assert result.budget["lm_calls"] - flaky.failed <= sent <= result.budget["lm_calls"]
    assert result.after["n_units"] == len(result.split.test)


def test_a_proposal_error_that_never_clears_is_a_stop_with_the_best_so_far(loopback: Any) -> None:
    spec, items, labels, world = toy_setup()
    server = loopback(world.http_handler)
    proposer = loopback(FlakyHandler(world.http_handler, rate=1.0, when=is_proposal))
    lm = make_lm("openai/toy-judge", api_base=server.url, cache=False)
    prompt_lm = make_lm("openai/toy-proposer", api_base=proposer.url, cache=False)
    result = optimize(spec, items, labels, lm, recipe("copro"), prompt_lm=prompt_lm, n_boot=0,
                      retry=RetryPolicy(max_retries=2, backoff_base=0.001, backoff_max=0.01))
    assert result.stopped and "after retries" in result.stopped
    assert result.spec.provenance["stopped_early"] is True
    assert result.after["n_units"] == len(result.split.test)


def _write_toy_files(tmp_path: Path) -> tuple[Path, Path]:
    _, items, labels, _ = toy_setup()
    items_path, labels_path = tmp_path / "items.jsonl", tmp_path / "labels.jsonl"
    items_path.write_text("".join(i.model_dump_json() + "\n" for i in items), encoding="utf-8")
    labels_path.write_text("".join(json.dumps(lab.model_dump(exclude_none=True)) + "\n" for lab in labels),
                           encoding="utf-8")
    return items_path, labels_path


def _cli(args: list[str]) -> tuple[int, str, float]:
    from typer.testing import CliRunner

    from scijudge.cli import app

    started = time.perf_counter()
    res = CliRunner().invoke(app, args)
    return res.exit_code, res.output, time.perf_counter() - started


def test_unreachable_endpoint_fails_fast_with_one_line(tmp_path: Path) -> None:
    items_path, labels_path = _write_toy_files(tmp_path)
    code, output, seconds = _cli(["optimize", "--judge", "yescieval.qa.correctness", "--items", str(items_path),
                                  "--labels", str(labels_path), "--model", "openai/toy", "--api-base",
                                  "http://127.0.0.1:9/v1", "--recipe", "mipro", "--out", str(tmp_path / "o")])
    assert code == 3 and seconds < 30  # a run-level fault: the exit code `judge` gives an unreachable endpoint
    assert "Traceback" not in output
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: preflight failed") and "127.0.0.1:9" in lines[0]
    assert not list((tmp_path / "o").glob("*.toml"))


@pytest.mark.parametrize(("status", "message"), [(401, "invalid api key"), (404, "model toy does not exist")])
def test_rejected_key_or_unknown_model_fails_the_preflight(loopback: Any, status: int, message: str) -> None:
    from scijudge.optimization._retry import FatalModelError
    from scijudge.testing import Fault

    spec, items, labels, _ = toy_setup()
    server = loopback(lambda body: Fault(status, message, "invalid_request_error"))
    lm = make_lm("openai/toy", api_base=server.url, cache=False)
    with pytest.raises(FatalModelError, match="preflight failed") as err:
        optimize(spec, items, labels, lm, recipe("mipro"), n_boot=0)
    assert message in str(err.value) and "\n" not in str(err.value)
    assert server.count == 1  # one probe, no optimization


@pytest.mark.slow
def test_a_two_recipe_experiment_has_one_baseline_per_model(tmp_path: Path) -> None:
    spec, items, labels, world = toy_setup()
    lm = scripted_lm(world.respond)
    frame = run_experiment([recipe("copro"), recipe("mipro", seed=99)], [lm], judge=spec, items=items, labels=labels,
                           out=tmp_path, n_boot=0)
    assert list(frame["recipe"]) == ["(base judge)", "copro", "mipro"]
    assert set(frame["split"]) == {"0.6/0.15/0.25 seed 3"}  # the first recipe's split (and seed) for all
    # 30 items at 0.6/0.15/0.25: 18/4.5/7.5, the tied remainders go to dev first: 18/5/7
    assert frame["n_test"].nunique() == 1 and frame["n_test"].iloc[0] == 7
    # the base judge judged the test split once: test items were sent 7 (baseline) + 7 + 7 (two optimized) times
    by_id = {i.id: i for i in items}
    sent_for_test = 0
    report = json.loads(next((tmp_path / "scripted_judge").glob("*copro*.report.json")).read_text())
    test_markers = set().union(*(markers(by_id[i].answer) for i in report["split"]["test"]))
    for req in lm.engine.requests:
        last = "".join(getattr(p, "text", "") or "" for p in req.messages[-1].parts)
        sent_for_test += bool(markers(last) & test_markers)
    assert sent_for_test == 3 * 7
    assert (tmp_path / "experiment.csv").exists() and (tmp_path / "experiment.png").exists()


@pytest.mark.slow
def test_a_failing_recipe_leaves_the_other_rows(tmp_path: Path) -> None:
    """Also the registry: a new optimizer is a settings model, a compile function and one register call."""
    from scijudge.optimization import OptimizerEntry, OptimizerSettings, register
    from scijudge.optimization._registry import unregister

    class BoomSettings(OptimizerSettings):
        fuse: int = 1

    def explode(settings: BoomSettings, inputs: Any) -> Any:
        raise RuntimeError(f"boom after fuse {settings.fuse}")

    register(OptimizerEntry("boom", BoomSettings, explode))
    try:
        boom = recipe_from_dict({"optimizer": "boom", "settings": {"fuse": 3}, "split": {"seed": 3}}, source="boom.toml")
        spec, items, labels, world = toy_setup()
        frame = run_experiment([recipe("copro"), boom], [scripted_lm(world.respond)], judge=spec, items=items,
                               labels=labels, out=tmp_path, n_boot=0)
    finally:
        unregister("boom")
    rows = {r["recipe"]: r for r in frame.to_dict("records")}
    assert rows["boom"]["status"] == "failed" and "boom after fuse 3" in rows["boom"]["reason"]
    assert rows["copro"]["status"] == "ok" and rows["copro"]["exact_after"] > rows["(base judge)"]["exact_after"]


def test_recipes_are_checked_against_the_data_before_any_call() -> None:
    spec, items, labels, world = toy_setup()
    lm = scripted_lm(world.respond)
    too_big = recipe("simba")
    too_big = too_big.model_copy(update={"settings": {**too_big.settings, "bsize": 40}})
    with pytest.raises(InputError, match="recipe simba: .*bsize = 40"):
        run_experiment([recipe("copro"), too_big], [lm], judge=spec, items=items, labels=labels, n_boot=0)
    assert lm.engine.requests == []


def test_a_registered_optimizer_runs_end_to_end_and_an_unchanged_judge_is_said_so() -> None:
    from scijudge.optimization import OptimizerEntry, OptimizerSettings, register
    from scijudge.optimization._registry import unregister

    register(OptimizerEntry("noop", OptimizerSettings, lambda settings, inputs: inputs.student, proposes=False))
    try:
        spec, items, labels, world = toy_setup()
        result = optimize(spec, items, labels, scripted_lm(world.respond),
                          recipe_from_dict({"optimizer": "noop", "split": {"seed": 3}}), n_boot=0)
    finally:
        unregister("noop")
    assert "the optimizer returned the base judge unchanged" in result.notes
    paired = {key: result.after.pop(key) for key in ("gain", "n_paired")}
    assert result.after == result.before  # the same judgments: the same statistics, and no gain on any unit
    assert paired == {"gain": 0.0, "n_paired": len(result.split.test)}


@pytest.mark.slow
def test_a_budget_stop_writes_the_best_so_far(tmp_path: Path) -> None:
    spec, items, labels, world = toy_setup()
    lm = scripted_lm(world.respond)
    result = optimize(spec, items, labels, lm, recipe("simba", max_lm_calls=40), out=tmp_path, n_boot=0)
    assert result.stopped and "LM-call budget" in result.stopped
    assert len(lm.engine.requests) <= 40
    assert result.spec_path is not None and result.spec_path.exists()
    saved = get_spec(result.spec_path)
    assert saved.provenance["stopped_early"] is True and saved.provenance["stopped"] == result.stopped
    assert saved.name == spec.name  # labels still match the base judge's name
    assert saved.provenance["display_name"].startswith(f"{spec.name}@simba-")
    assert result.spec_path.name == saved.provenance["display_name"] + ".toml"
    assert result.after["n_units"] == len(result.split.test)
    assert any("stopped early" in note for note in result.notes)


def test_the_budget_class_swap_still_fits_dspy() -> None:
    """The one DSPy-internal assumption of the budget wrapper: fails here, loudly, if a DSPy release breaks it."""
    import dspy

    from scijudge.optimization._budget import Budget, Gate, budgeted

    lm = scripted_lm(lambda request: "OK")
    assert hasattr(lm, "__dict__") and isinstance(lm, dspy.LM)
    gate = Gate(Budget(max_calls=1), "t")
    wrapped = budgeted(lm, gate)
    assert isinstance(wrapped, type(lm)) and wrapped is not lm
    from dspy import lm15

    wrapped(lm15.Request(model=lm.model, messages=(lm15.Message.user("hi"),)))
    assert gate.budget.calls == 1 and gate.budget.unpriced_calls + gate.budget.cached_calls + (gate.budget.cost > 0) == 1
    from scijudge.optimization._budget import BudgetStop

    with pytest.raises(BudgetStop):
        wrapped(lm15.Request(model=lm.model, messages=(lm15.Message.user("hi"),)))
    assert len(lm.engine.requests) == 1
    assert request_text(lm.engine.requests[0]) == "hi"


@pytest.mark.slow
def test_a_model_that_dies_mid_experiment_keeps_the_table_and_fails_the_run(tmp_path: Path) -> None:
    from scijudge.optimization import OptimizerEntry, OptimizerSettings, register
    from scijudge.optimization._registry import unregister
    from scijudge.optimization._retry import FatalModelError

    def key_revoked(settings: Any, inputs: Any) -> Any:
        raise FatalModelError("openai/toy: invalid api key")

    register(OptimizerEntry("revoked", OptimizerSettings, key_revoked))
    try:
        revoked = recipe_from_dict({"optimizer": "revoked", "split": {"seed": 3}}, source="revoked.toml")
        spec, items, labels, world = toy_setup()
        with pytest.raises(FatalModelError, match="invalid api key"):
            run_experiment([revoked, recipe("copro")], [scripted_lm(world.respond)], judge=spec, items=items,
                           labels=labels, out=tmp_path, n_boot=0)
    finally:
        unregister("revoked")
    import pandas as pd

    table = pd.read_csv(tmp_path / "experiment.csv")
    assert list(table["recipe"]) == ["(base judge)", "revoked", "copro"]
    assert list(table["status"]) == ["ok", "failed", "failed"]
    assert table["reason"].iloc[2].startswith("not run: openai/toy: invalid api key")
