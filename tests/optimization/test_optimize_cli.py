"""`scijudge optimize` as a user runs it: default output file, quiet terminal with a log, literal error text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from scijudge.cli import app


@pytest.mark.slow
def test_checklist_from_tasks_and_reports_writes_a_named_spec_under_optimized(
        loopback: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from test_optimize_families import _checklist_answer, _checklist_files, _World

    from scijudge.spec.signatures import render_instructions
    from scijudge.spec.judge_spec import get_spec

    tasks_path, reports, verdicts_path, _ = _checklist_files(tmp_path)
    world = _World(_checklist_answer, render_instructions(get_spec("researchrubrics.checklist")))
    server = loopback(world.http_handler)
    recipe = tmp_path / "copro-verdicts.toml"
    recipe.write_text('optimizer = "copro"\nmetric = "verdict_balanced"\n[split]\ntrain = 0.5\ndev = 0.2\ntest = 0.3\n'
                      'seed = 2\n[settings]\nbreadth = 3\ndepth = 1\nnum_threads = 1\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["optimize", "--judge", "researchrubrics.checklist", "--tasks", str(tasks_path),
                                   "--reports", str(reports), "--labels", str(verdicts_path), "--model",
                                   "openai/toy", "--api-base", server.url, "--recipe", str(recipe), "--no-cache"])
    assert res.exit_code == 0, res.output
    written = list((tmp_path / "optimized").glob("researchrubrics.checklist@copro-verdicts-*.toml"))
    assert len(written) == 1
    assert f"optimized judge: optimized/{written[0].name}" in res.output
    spec = get_spec(written[0])
    assert spec.name == "researchrubrics.checklist"  # labels keep matching the base judge
    assert spec.provenance["display_name"] == written[0].stem
    log = tmp_path / "optimized" / "optimize.log"
    assert "log: optimized/optimize.log" in res.output and log.stat().st_size > 0
    assert "proposed_instruction" not in res.output  # the optimizers' own chatter went to the log
    assert "balanced_accuracy" in res.output and "n (test units)" in res.output


def test_error_text_is_printed_literally(tmp_path: Path) -> None:
    items = tmp_path / "items.jsonl"
    items.write_text(json.dumps({"id": "a", "question": "q", "answer": "a"}) + "\n", encoding="utf-8")
    res = CliRunner().invoke(app, ["optimize", "--judge", "yescieval.qa.correctness", "--items", str(items),
                                   "--labels", str(items), "--model", "openai/x", "--recipe", "needs[track].toml"])
    assert res.exit_code != 0
    assert "needs[track].toml" in res.output and "Traceback" not in res.output


def test_the_cost_stop_names_the_cost_budget() -> None:
    from scijudge.optimization._budget import Budget, BudgetStop, Gate

    budget = Budget(max_cost=0.01)
    budget.cost = 0.02
    with pytest.raises(BudgetStop) as stop:
        Gate(budget, "optimization").acquire()
    assert "cost budget" in stop.value.reason and "max_lm_calls" not in stop.value.reason
