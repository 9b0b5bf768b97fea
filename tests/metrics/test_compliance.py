"""Compliance, coverage and agreement from the run store, checked by hand and against scikit-learn."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import (
    accuracy_score,
    cohen_kappa_score,
    confusion_matrix,
    f1_score,
)

from scijudge.errors import InputError
from scijudge.labels import HumanLabel
from scijudge.metrics.compliance import (
    checklist_agreement,
    compliance_by_axis,
    compliance_by_report,
    compliance_summary,
    task_macro_f1,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "datasets" / "researchrubrics_example"
SCORE = {"satisfied": 1.0, "partially": 0.5, "not_satisfied": 0.0}


def _rows(item: str, rubric: dict[str, Any], judged: list[tuple[str, float, str, str | None]],
          model: str = "m1", tokens: tuple[int, int] = (100, 10), cost: float | None = 0.01) -> list[dict[str, Any]]:
    """Run-store rows for one report; ``judged`` = (part, weight, axis, verdict or None for an abstention)."""
    rows = []
    for part, weight, axis, verdict in judged:
        rows.append({
            "item_id": item, "judge": "researchrubrics.checklist", "part": part, "family": "checklist",
            "spec_hash": "h1", "model": model, "status": "ok" if verdict else "abstained",
            "score": SCORE[verdict] if verdict else None, "verdict": verdict, "created_at": "2025-01-01T00:00:00",
            "result": {"weight": weight, "axis": axis, "rubric": rubric}, "tokens_in": tokens[0],
            "tokens_out": tokens[1], "cost": cost,
        })
    return rows


# Report A: every criterion judged. Axis totals written by hand.
RUBRIC_A = {"n": 5, "positive_weight": 14.0, "negative_weight": -4.0, "axes": {
    "Explicit Criteria": {"n": 2, "positive_weight": 8.0, "negative_weight": 0.0},
    "Implicit Criteria": {"n": 2, "positive_weight": 2.0, "negative_weight": -4.0},
    "Communication Quality": {"n": 1, "positive_weight": 4.0, "negative_weight": 0.0}}}


def _report_a(penalty: str = "satisfied") -> list[dict[str, Any]]:
    return _rows("A", RUBRIC_A, [
        ("c1", 5, "Explicit Criteria", "satisfied"), ("c2", 3, "Explicit Criteria", "partially"),
        ("c3", 2, "Implicit Criteria", "not_satisfied"), ("c4", -4, "Implicit Criteria", penalty),
        ("c5", 4, "Communication Quality", "satisfied")])


# Report B: 4 criteria; c2 abstained, c4 (weight 5) never judged at all.
RUBRIC_B = {"n": 4, "positive_weight": 10.0, "negative_weight": -1.0, "axes": {
    "Explicit Criteria": {"n": 3, "positive_weight": 10.0, "negative_weight": 0.0},
    "Implicit Criteria": {"n": 1, "positive_weight": 0.0, "negative_weight": -1.0}}}


def _report_b() -> list[dict[str, Any]]:
    return _rows("B", RUBRIC_B, [("c1", 2, "Explicit Criteria", "satisfied"), ("c2", 3, "Explicit Criteria", None),
                                 ("c3", -1, "Implicit Criteria", "satisfied")], tokens=(50, 5), cost=None)


def test_compliance_matches_a_hand_computed_report() -> None:
    (row,) = compliance_by_report(pd.DataFrame(_report_a())).to_dict(orient="records")
    # (5·1 + 3·0.5 + 2·0 + (−4)·1 + 4·1) / (5 + 3 + 2 + 4) = 6.5 / 14
    assert row["compliance"] == pytest.approx(6.5 / 14)
    assert row["compliance_lo"] == row["compliance_hi"] == pytest.approx(6.5 / 14)
    assert (row["coverage"], row["n_judged"], row["complete"]) == (1.0, 5, True)
    assert (row["tokens_in"], row["tokens_out"], row["cost"]) == (500, 50, pytest.approx(0.05))


def test_satisfied_penalty_lowers_compliance() -> None:
    fired = compliance_by_report(pd.DataFrame(_report_a("satisfied")))["compliance"].item()
    quiet = compliance_by_report(pd.DataFrame(_report_a("not_satisfied")))["compliance"].item()
    assert quiet == pytest.approx(10.5 / 14)  # (5 + 1.5 + 0 + 0 + 4) / 14
    assert quiet - fired == pytest.approx(4 / 14)  # the penalty's weight, never in the denominator


def test_per_axis_compliance_by_hand() -> None:
    axes = compliance_by_axis(pd.DataFrame(_report_a())).set_index("axis")["compliance"]
    assert axes["Explicit Criteria"] == pytest.approx((5 + 1.5) / 8)
    assert axes["Implicit Criteria"] == pytest.approx((0 - 4) / 2)
    assert axes["Communication Quality"] == pytest.approx(4 / 4)


def test_abstentions_and_missing_criteria_are_not_scored_zero() -> None:
    frame = pd.DataFrame(_report_a() + _report_b())
    rows = compliance_by_report(frame).set_index("item_id")
    b = rows.loc["B"]
    # judged: 2·1 + (−1)·1 = 1 over judged positive weight 2
    assert b["compliance"] == pytest.approx(1 / 2)
    # unknown: c2 (+3, abstained) and c4 (+5, no row); lowest 1/10, highest (1 + 3 + 5)/10
    assert (b["compliance_lo"], b["compliance_hi"]) == (pytest.approx(1 / 10), pytest.approx(9 / 10))
    assert (b["coverage"], b["n_abstained"], b["n_missing"]) == (0.5, 1, 1)
    assert (b["tokens_in"], math.isnan(b["cost"])) == (150, True)
    bounds = compliance_by_report(frame, policy="bounds").set_index("item_id")["compliance"]
    assert math.isnan(bounds["B"]) and bounds["A"] == pytest.approx(6.5 / 14)
    axes = compliance_by_axis(frame).set_index(["item_id", "axis"])
    assert math.isnan(axes.loc[("B", "Implicit Criteria"), "compliance"])  # only a penalty: no positive weight
    assert axes.loc[("B", "Explicit Criteria"), "compliance_hi"] == pytest.approx((2 + 3 + 5) / 10)
    (summary,) = compliance_summary(compliance_by_report(frame)).to_dict(orient="records")
    assert summary["compliance"] == pytest.approx((6.5 / 14 + 0.5) / 2)
    assert (summary["reports"], summary["complete_reports"], summary["n_missing"]) == (2, 1, 1)


def test_contenders_are_kept_apart_and_bad_rows_are_named() -> None:
    other = _rows("A", RUBRIC_A, [("c1", 5, "Explicit Criteria", "not_satisfied")], model="m2")
    rows = compliance_by_report(pd.DataFrame(_report_a() + other)).set_index("model")
    assert rows.loc["m2", "coverage"] == pytest.approx(1 / 5) and rows.loc["m1", "coverage"] == 1.0
    bare = _report_a()
    bare[0]["result"] = {"rating": 3}
    with pytest.raises(InputError, match="not made by ChecklistJudge"):
        compliance_by_report(pd.DataFrame(bare))
    changed = _report_a()
    changed[1]["result"] = {**changed[1]["result"], "rubric": {**RUBRIC_A, "n": 6}}
    with pytest.raises(InputError, match="disagree about the report's rubric"):
        compliance_by_report(pd.DataFrame(changed))
    with pytest.raises(InputError, match="unknown policy"):
        compliance_by_report(pd.DataFrame(_report_a()), policy="optimistic")  # type: ignore[arg-type]


def _agreement_data(seed: int = 7) -> tuple[pd.DataFrame, list[HumanLabel]]:
    rng = np.random.default_rng(seed)
    classes = ["satisfied", "partially", "not_satisfied"]
    rows: list[dict[str, Any]] = []
    labels: list[HumanLabel] = []
    for task in ("t1", "t2", "t3"):
        n = 12
        rubric = {"n": n, "positive_weight": float(n), "negative_weight": 0.0, "axes": {}}
        for k in range(n):
            human = classes[rng.integers(0, 3)]
            judge = human if rng.random() < 0.6 else classes[rng.integers(0, 3)]
            rows += _rows(task, rubric, [(f"c{k}", 1.0, "Explicit Criteria", judge)])
            labels.append(HumanLabel(item_id=task, judge="researchrubrics.checklist", part=f"c{k}", verdict=human))
    return pd.DataFrame(rows), labels


@pytest.mark.parametrize("mode", ["binary", "ternary"])
def test_agreement_matches_scikit_learn(mode: str) -> None:
    frame, labels = _agreement_data()
    (agreement,) = checklist_agreement(frame, labels, mode=mode)  # type: ignore[arg-type]
    to_mode = (lambda v: "not_satisfied" if v == "partially" else v) if mode == "binary" else (lambda v: v)
    classes = ["satisfied", "not_satisfied"] if mode == "binary" else ["satisfied", "partially", "not_satisfied"]
    judged = {(r["item_id"], r["part"]): to_mode(r["verdict"]) for r in frame.to_dict(orient="records")}
    human = [to_mode(lab.verdict) for lab in labels]
    judge = [judged[(lab.item_id, lab.part)] for lab in labels]
    per_task = []
    for task in ("t1", "t2", "t3"):
        idx = [i for i, lab in enumerate(labels) if lab.item_id == task]
        per_task.append(f1_score([human[i] for i in idx], [judge[i] for i in idx], labels=classes,
                                 average="macro", zero_division=0))
    assert agreement.macro_f1 == pytest.approx(float(np.mean(per_task)))
    assert list(agreement.per_task_f1.values()) == pytest.approx(per_task)
    assert agreement.accuracy == pytest.approx(accuracy_score(human, judge))
    assert agreement.kappa == pytest.approx(cohen_kappa_score(human, judge, labels=classes))
    assert agreement.confusion == confusion_matrix(human, judge, labels=classes).tolist()
    assert (agreement.n_pairs, agreement.n_tasks, agreement.labels) == (36, 3, classes)


def test_macro_f1_by_hand_and_the_benchmark_rule_for_absent_classes() -> None:
    # satisfied: TP 1, FP 0, FN 1 → P 1, R 1/2, F1 2/3; not_satisfied: TP 2, FP 1, FN 0 → P 2/3, R 1, F1 4/5
    mean, per_task = task_macro_f1(["satisfied", "satisfied", "not_satisfied", "not_satisfied"],
                                   ["satisfied", "not_satisfied", "not_satisfied", "not_satisfied"],
                                   ["t"] * 4, ["satisfied", "not_satisfied"])
    assert mean == pytest.approx((2 / 3 + 4 / 5) / 2) == per_task["t"]
    # a class absent from both sides of a task counts as F1 = 0, as in the benchmark's own script
    mean, _ = task_macro_f1(["satisfied"] * 3, ["satisfied"] * 3, ["t"] * 3, ["satisfied", "not_satisfied"])
    assert mean == pytest.approx(0.5)


def test_agreement_counts_abstentions_and_needs_one_annotator() -> None:
    frame = pd.DataFrame(_report_b())  # c1 judged, c2 abstained, c3 judged; no row for c4
    labels = [HumanLabel(item_id="B", judge="researchrubrics.checklist", part=p, verdict="Satisfied", annotator="x")
              for p in ("c1", "c2", "c3", "c4")]
    (agreement,) = checklist_agreement(frame, labels)
    assert (agreement.n_labels, agreement.n_pairs, agreement.n_abstained, agreement.n_unjudged) == (4, 2, 1, 1)
    assert agreement.accuracy == 1.0 and math.isnan(agreement.kappa)  # one class only: kappa undefined
    second = labels + [HumanLabel(item_id="B", judge="researchrubrics.checklist", part="c1", verdict="not satisfied",
                                  annotator="y")]
    with pytest.raises(InputError, match="choose one annotator"):
        checklist_agreement(frame, second)
    (only_y,) = checklist_agreement(frame, second, annotator="y")
    assert (only_y.n_pairs, only_y.accuracy) == (1, 0.0)


def test_compliance_command_on_a_judged_example(tmp_path: Path) -> None:
    """End to end: example tasks + reports → judge (scripted answers = the human verdicts) → CLI numbers."""
    import typer
    from typer.testing import CliRunner

    from scijudge.commands.compliance import compliance_cmd
    from scijudge.importers.researchrubrics import (
        load_checklist_items,
        load_human_verdicts,
    )
    from scijudge.judges.checklist import ChecklistJudge
    from scijudge.run.api import judge_items
    from scijudge.run.store import Run
    from scijudge.testing.scripted import request_text, scripted_lm

    human = {lab.part: lab.verdict for lab in load_human_verdicts(EXAMPLE / "human_verdicts.jsonl")}
    items, _ = load_checklist_items(EXAMPLE / "tasks.jsonl", EXAMPLE / "reports")
    judge = ChecklistJudge(lm=scripted_lm(lambda request: "unused"))
    by_text = {r["criterion"]: r["id"] for item in items for r in item.meta["rubrics"]}

    def respond(request: Any) -> str:
        text = request_text(request)
        criterion = text.split("[[ ## criterion ## ]]\n", )[-1].split("\n\n[[ ## ")[0].strip()
        verdict = human[by_text[criterion]]
        verdict = "not_satisfied" if verdict == "partially" else verdict  # a binary judge
        return json.dumps({"judgment": {"reasoning": "r", "evidence_quotes": [], "missing_elements": [],
                                        "verdict": verdict, "confidence": 0.9}})

    judge.lm = scripted_lm(respond)
    run_path = tmp_path / "rr.sqlite"
    with Run(run_path) as run:
        summary = judge_items(items, [judge], run=run, concurrency=4)
    assert summary.ok == 12

    app = typer.Typer()
    app.command("compliance")(compliance_cmd)
    app.command("noop")(lambda: None)  # a second command keeps `compliance` a subcommand
    runner = CliRunner()
    help_text = runner.invoke(app, ["compliance", "--help"]).output
    assert "Example: scijudge compliance" in help_text
    out = tmp_path / "numbers.json"
    invoked = runner.invoke(app, ["compliance", str(run_path), "--labels", str(EXAMPLE / "human_verdicts.jsonl"),
                                  "--tasks", str(EXAMPLE / "tasks.jsonl"), "--out", str(out)],
                             env={"COLUMNS": "220"})
    assert invoked.exit_code == 0, invoked.output
    numbers = json.loads(out.read_text())
    by_report = {r["item_id"]: r["compliance"] for r in numbers["reports"]}
    # binary reference values from the dataset card: 12/17 and 13/18
    assert by_report == {"rr-example-001": pytest.approx(12 / 17), "rr-example-002": pytest.approx(13 / 18)}
    # piped (not a terminal): CSV with full values
    assert "0.70588" in invoked.output and "0.72222" in invoked.output and "Implicit Criteria" in invoked.output
    (agreement,) = numbers["agreement"]
    assert agreement["macro_f1"] == 1.0 and agreement["n_pairs"] == 12
