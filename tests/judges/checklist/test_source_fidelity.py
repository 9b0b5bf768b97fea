"""Issue 16, ResearchRubrics side: illustrative example lists, unknown axes, the source-compatible zero
policy, compliance by domain and complexity, an overlap that follows the chunk budget, and the checklist
judge standing apart from the importer."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from scijudge.errors import InputError
from scijudge.metrics.compliance import (
    compliance_by_report,
    facet_summary,
    facets_from_tasks,
)

EXAMPLE = Path(__file__).resolve().parents[3] / "datasets" / "researchrubrics_example"
SCORE = {"satisfied": 1.0, "partially": 0.5, "not_satisfied": 0.0}


def _rows(item: str, rubric: dict[str, Any], judged: list[tuple[str, float, str | None]],
          facets: dict[str, str] | None = None) -> list[dict[str, Any]]:
    rows = []
    for part, weight, verdict in judged:
        result: dict[str, Any] = {"weight": weight, "axis": "Explicit Criteria", "rubric": rubric}
        if facets is not None:
            result["task_facets"] = facets
        rows.append({"item_id": item, "judge": "researchrubrics.checklist", "part": part, "family": "checklist",
                     "spec_hash": "h", "model": "m", "status": "ok" if verdict else "abstained",
                     "score": SCORE[verdict] if verdict else None, "verdict": verdict,
                     "created_at": "2025-01-01T00:00:00", "result": result})
    return rows


def _source_compliance(scores_and_weights: list[tuple[float, float]]) -> float:
    """ResearchRubrics' calculate_compliance_score.py rule, written out: a failed criterion has score 0."""
    numerator = sum(s * w for s, w in scores_and_weights)
    denominator = sum(w for _, w in scores_and_weights if w > 0)
    return numerator / denominator if denominator > 0 else 0.0


# 5 criteria: +4 satisfied, +3 abstained, +2 never judged, -2 satisfied (penalty), +1 partially
RUBRIC = {"n": 5, "positive_weight": 10.0, "negative_weight": -2.0,
          "axes": {"Explicit Criteria": {"n": 5, "positive_weight": 10.0, "negative_weight": -2.0}}}


def test_zero_policy_reproduces_the_source_rule_and_is_never_the_default() -> None:
    frame = pd.DataFrame(_rows("r1", RUBRIC, [("a", 4, "satisfied"), ("b", 3, None), ("d", -2, "satisfied"),
                                              ("e", 1, "partially")]))
    zero = compliance_by_report(frame, policy="zero").iloc[0]
    # by hand: (4·1 + 3·0 + 2·0 − 2·1 + 1·0.5) / 10 = 2.5 / 10
    assert zero["compliance"] == pytest.approx(0.25)
    assert zero["compliance"] == pytest.approx(_source_compliance([(1, 4), (0, 3), (0, 2), (1, -2), (0.5, 1)]))
    default = compliance_by_report(frame).iloc[0]
    assert default["compliance"] == pytest.approx(2.5 / 5)  # judged-only: over the judged positive weight 4 + 1
    assert default["compliance_zero"] == pytest.approx(0.25)  # reported beside, but not the point value
    only_penalties = {"n": 1, "positive_weight": 0.0, "negative_weight": -1.0, "axes": {}}
    empty = compliance_by_report(pd.DataFrame(_rows("r2", only_penalties, [("p", -1, "satisfied")])),
                                 policy="zero").iloc[0]
    assert empty["compliance"] == 0.0 == _source_compliance([(1, -1)])
    with pytest.raises(InputError, match="zero"):
        compliance_by_report(frame, policy="nope")  # type: ignore[arg-type]


def test_compliance_by_domain_and_complexity() -> None:
    full = {"n": 1, "positive_weight": 1.0, "negative_weight": 0.0, "axes": {}}
    frame = pd.DataFrame(
        _rows("t1", full, [("a", 1, "satisfied")], {"domain": "Physics", "logical_nesting": "Deep"})
        + _rows("t2", full, [("a", 1, "not_satisfied")], {"domain": "Physics", "logical_nesting": "Shallow"})
        + _rows("t3", full, [("a", 1, "partially")], {"domain": "Biology", "logical_nesting": "Deep"}))
    per_report = compliance_by_report(frame)
    by_domain = facet_summary(per_report, "domain").set_index("domain")
    assert by_domain.loc["Physics", "compliance"] == pytest.approx(0.5)  # mean of 1 and 0
    assert by_domain.loc["Biology", "compliance"] == pytest.approx(0.5)
    by_nesting = facet_summary(per_report, "logical_nesting").set_index("logical_nesting")
    assert by_nesting.loc["Deep", "compliance"] == pytest.approx(0.75) and by_nesting.loc["Deep", "reports"] == 2
    assert facet_summary(per_report, "exploration").empty  # not in the task file: no table
    with pytest.raises(InputError):
        facet_summary(per_report, "colour")


def test_facets_come_from_the_task_file_for_older_runs() -> None:
    from scijudge.importers.researchrubrics import load_tasks

    full = {"n": 1, "positive_weight": 1.0, "negative_weight": 0.0, "axes": {}}
    frame = pd.DataFrame(_rows("rr-example-001", full, [("a", 1, "satisfied")]))
    per_report = facets_from_tasks(compliance_by_report(frame), load_tasks(EXAMPLE / "tasks.jsonl"))
    row = per_report.iloc[0]
    first = json.loads((EXAMPLE / "tasks.jsonl").read_text().splitlines()[0])
    assert (row["domain"], row["conceptual_breadth"], row["logical_nesting"], row["exploration"]) == (
        first["domain"], first["conceptual_breadth"], first["logical_nesting"], first["exploration"])


def test_criterion_prompt_treats_example_lists_as_illustrative() -> None:
    from scijudge.spec.signatures import render_instructions
    from scijudge.spec.judge_spec import get_spec

    for name in ("researchrubrics.checklist", "researchrubrics.checklist.ternary", "researchrubrics.synthesis"):
        text = " ".join(render_instructions(get_spec(name)).split())
        assert "not exhaustive" in text and "does not need to cover every listed example" in text, name
        assert "an item list" not in text and "part of an item list" not in text, name


def _task_file(tmp_path: Path, axis: str) -> tuple[Path, Path]:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"prompt": "Explain X.", "sample_id": "s1", "domain": "Chemistry",
                                 "rubrics": [{"criterion": "Defines X.", "weight": 2, "axis": axis}]}) + "\n")
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "s1.md").write_text("X is the thing that is defined here. " * 250)
    return tasks, reports


@pytest.mark.slow
def test_cli_allow_unknown_axes_and_chunk_tokens_1000(tmp_path: Path, loopback: Any) -> None:
    from typer.testing import CliRunner

    from scijudge.cli import app
    from scijudge.run.store import Run
    from scijudge.testing.openai_server import last_user_text

    tasks, reports = _task_file(tmp_path, "Domain Accuracy")
    verdict = json.dumps({"judgment": {"reasoning": "r", "evidence_quotes": [], "missing_elements": [],
                                       "verdict": "satisfied", "confidence": 0.9}})
    evidence = json.dumps({"judgment": {"bearing": "supports", "notes": "defined", "quotes": []}})
    runner = CliRunner()
    server = loopback(lambda body: evidence if "[[ ## report_part ## ]]" in last_user_text(body) else verdict)
    base = ["judge", str(tasks), "--reports", str(reports), "-j", "researchrubrics.checklist",
            "-m", "openai/judge", "--api-base", server.url, "--no-progress"]
    refused = runner.invoke(app, [*base, "--run", str(tmp_path / "a.sqlite")], env={"COLUMNS": "200"})
    assert refused.exit_code != 0 and "Domain Accuracy" in refused.output and "unknown axis" in refused.output
    ok = runner.invoke(app, [*base, "--run", str(tmp_path / "b.sqlite"), "--allow-unknown-axes",
                             "--chunk-tokens", "1000"], env={"OPENAI_API_KEY": "k", "COLUMNS": "200"})
    assert ok.exit_code == 0, ok.output
    frame = Run(tmp_path / "b.sqlite", create=False).to_pandas()
    (row,) = frame.to_dict(orient="records")
    assert row["status"] == "ok" and row["result"]["axis"] == "Domain Accuracy"
    assert row["result"]["mode"] == "chunked" and row["result"]["chunks"] >= 2  # about 2,000 tokens > 1000
    assert row["result"]["task_facets"] == {"domain": "Chemistry"}


def test_default_overlap_follows_the_chunk_budget() -> None:
    from scijudge.judges.checklist import ChecklistJudge, default_overlap
    from scijudge.testing.scripted import scripted_lm

    assert default_overlap(96_000) == 1_000 and default_overlap(1_000) == 125 and default_overlap(64) == 8
    judge = ChecklistJudge(lm=scripted_lm(lambda r: ""), chunk_tokens=1000)
    assert judge.overlap_tokens == 125
    with pytest.raises(InputError, match="overlap"):
        ChecklistJudge(lm=scripted_lm(lambda r: ""), chunk_tokens=1000, overlap_tokens=1000)  # explicit: checked


@pytest.mark.slow
def test_checklist_judge_does_not_import_the_importer() -> None:
    code = ("import sys, scijudge.judges.checklist; "
            "print(any(m.startswith('scijudge.importers') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_compliance_command_zero_policy_and_facet_tables(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from scijudge.cli import app
    from scijudge.importers.researchrubrics import load_checklist_items
    from scijudge.judges.checklist import ChecklistJudge
    from scijudge.run.api import judge_items
    from scijudge.run.store import Run
    from scijudge.testing.scripted import scripted_lm

    items, _ = load_checklist_items(EXAMPLE / "tasks.jsonl", EXAMPLE / "reports")
    answer = json.dumps({"judgment": {"reasoning": "r", "evidence_quotes": [], "missing_elements": [],
                                      "verdict": "satisfied", "confidence": 0.9}})
    judge = ChecklistJudge(lm=scripted_lm(lambda request: answer))
    with Run(tmp_path / "rr.sqlite") as run:
        judge_items(items, [judge], run=run, concurrency=2)
    out = tmp_path / "numbers.json"
    result = CliRunner().invoke(app, ["compliance", str(tmp_path / "rr.sqlite"), "--policy", "zero", "--no-axes",
                                      "--out", str(out)], env={"COLUMNS": "220"})
    assert result.exit_code == 0, result.output
    assert "zero (source-compatible" in result.output and "Compliance by domain" in result.output
    numbers = json.loads(out.read_text())
    assert set(numbers["by_facet"]) == {"domain", "conceptual_breadth", "logical_nesting", "exploration"}
    tasks = [json.loads(line) for line in (EXAMPLE / "tasks.jsonl").read_text().splitlines()]
    for report in numbers["reports"]:
        task = next(t for t in tasks if t["sample_id"] == report["item_id"])
        expected = _source_compliance([(1.0, r["weight"]) for r in task["rubrics"]])  # every criterion satisfied
        assert report["compliance"] == pytest.approx(expected) and report["domain"] == task["domain"]
