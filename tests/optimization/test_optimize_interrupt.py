"""Ctrl-C during an optimization's search: the best candidate so far is tested and written under a name that says
it is partial; with no candidate, nothing is written; the command exits 130 and never calls the base judge optimized."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from scijudge.cli import app
from scijudge.optimization import OptimizerEntry, OptimizerSettings, optimize, recipe_from_dict, register
from scijudge.optimization._registry import unregister
from scijudge.spec.judge_spec import get_spec
from scijudge.testing.scripted import scripted_lm
from scijudge.testing.toy_judge import toy_setup


@pytest.fixture
def ctrl_c_optimizer() -> Iterator[str]:
    def interrupted(settings: Any, inputs: Any) -> Any:
        raise KeyboardInterrupt

    register(OptimizerEntry("ctrl-c", OptimizerSettings, interrupted, proposes=False))
    yield "ctrl-c"
    unregister("ctrl-c")


@pytest.mark.slow
def test_ctrl_c_before_any_candidate_saves_nothing(tmp_path: Path, ctrl_c_optimizer: str) -> None:
    spec, items, labels, world = toy_setup()
    result = optimize(spec, items, labels, scripted_lm(world.respond),
                      recipe_from_dict({"optimizer": ctrl_c_optimizer, "split": {"seed": 3}}), out=tmp_path, n_boot=0)
    assert result.stopped == "interrupted by Ctrl-C" and result.interrupted and result.unchanged
    assert any("stopped early: interrupted by Ctrl-C" in note for note in result.notes)
    assert result.spec_path is None and list(tmp_path.iterdir()) == []  # the base judge is not saved as a result


@pytest.mark.slow
def test_ctrl_c_after_a_candidate_writes_it_as_partial(tmp_path: Path, ctrl_c_optimizer: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from scijudge.optimization import _api
    from scijudge.spec.signatures import render_instructions

    spec, items, labels, world = toy_setup()
    better = render_instructions(spec) + "\nRead every cited paper before rating."
    monkeypatch.setattr(_api, "_final_program", lambda *a, **k: (better, []))  # the ledger's best so far
    result = optimize(spec, items, labels, scripted_lm(world.respond),
                      recipe_from_dict({"optimizer": ctrl_c_optimizer, "split": {"seed": 3}}), out=tmp_path, n_boot=0)
    assert result.interrupted and not result.unchanged
    assert result.spec_path is not None and result.spec_path.name.endswith(".partial.toml")
    assert result.program_path is not None and ".partial." in result.program_path.name
    saved = get_spec(result.spec_path)
    assert saved.provenance["stopped_early"] is True and saved.provenance["stopped"] == "interrupted by Ctrl-C"


@pytest.mark.slow
def test_the_command_exits_130_and_does_not_call_the_base_judge_optimized(tmp_path: Path, loopback: Any,
                                                                          ctrl_c_optimizer: str) -> None:
    spec, items, labels, world = toy_setup()
    server = loopback(world.http_handler)
    items_path, labels_path = tmp_path / "items.jsonl", tmp_path / "labels.jsonl"
    items_path.write_text("".join(i.model_dump_json() + "\n" for i in items), encoding="utf-8")
    labels_path.write_text("".join(lab.model_dump_json() + "\n" for lab in labels), encoding="utf-8")
    recipe = tmp_path / "ctrl-c.toml"
    recipe.write_text(f'optimizer = "{ctrl_c_optimizer}"\n[split]\nseed = 3\n', encoding="utf-8")
    out = tmp_path / "opt"
    run = CliRunner().invoke(app, ["optimize", "--judge", spec.name, "--items", str(items_path), "--labels",
                                   str(labels_path), "--model", "openai/toy", "--api-base", server.url, "--recipe",
                                   str(recipe), "--out", str(out), "--no-cache"])
    assert run.exit_code == 130, run.output
    assert "optimized judge:" not in run.output
    assert "interrupted (Ctrl-C)" in run.output and "nothing saved" in run.output
    assert not list(out.glob("*.toml"))


@pytest.mark.slow
def test_ctrl_c_in_an_experiment_runs_no_later_recipe_or_model(tmp_path: Path, ctrl_c_optimizer: str) -> None:
    from scijudge.optimization._experiment import run_experiment

    spec, items, labels, world = toy_setup()
    first, second = scripted_lm(world.respond), scripted_lm(world.respond)
    frame = run_experiment([recipe_from_dict({"optimizer": ctrl_c_optimizer, "split": {"seed": 3}}), "copro"],
                           [first, second], judge=spec, items=items, labels=labels, out=tmp_path, n_boot=0,
                           check_model=False)
    runs = frame[frame["recipe"] != "(base judge)"]
    assert runs["stopped"].iloc[0] == "interrupted by Ctrl-C"
    later = runs.iloc[1:]
    assert len(later) == 3 and (later["status"] == "failed").all()
    assert (later["reason"] == "not run: interrupted by Ctrl-C").all()
    assert len(frame[frame["recipe"] == "(base judge)"]) == 1  # the second model was not even tested
