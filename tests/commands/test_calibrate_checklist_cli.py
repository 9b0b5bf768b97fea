"""`calibrate` reads the bundled ResearchRubrics verdict file (criteria by text), labels by position with --tasks,
and counts verdict words once: numbers equal scikit-learn on the same pairs and `compliance --labels`."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from sklearn.metrics import accuracy_score, cohen_kappa_score
from typer.testing import CliRunner

from scijudge.cli import app
from scijudge.records import JudgeResult
from scijudge.run.store import Run

EXAMPLE = Path(__file__).resolve().parents[2] / "datasets" / "researchrubrics_example"
# the verdict words as the file writes them -> one class each (independent of scijudge.vocab)
CANON = {"Satisfied": "satisfied", "Partially Satisfied": "partially", "Not Satisfied": "not_satisfied"}


def _human() -> list[dict]:
    return [json.loads(line) for line in (EXAMPLE / "human_verdicts.jsonl").read_text().splitlines() if line.strip()]


def _run(path: Path) -> list[tuple[str, str]]:
    """A binary judge's run on the example: right on most criteria, judge words in the store's form."""
    from scijudge.importers.researchrubrics import load_checklist_items

    items, _ = load_checklist_items(EXAMPLE / "tasks.jsonl", EXAMPLE / "reports")
    human = {(h["sample_id"], h["criterion"]): CANON[h["verdict"]] for h in _human()}
    pairs = []
    with Run(path) as run:
        k = 0
        for item in items:
            rubric = _rubric(item.meta["rubrics"])
            for r in item.meta["rubrics"]:
                h = human[(item.id, r["criterion"])]
                v = "not_satisfied" if h == "partially" else h
                if k % 4 == 1:
                    v = "satisfied" if v == "not_satisfied" else "not_satisfied"
                k += 1
                pairs.append((h, v))
                run.record(JudgeResult(item_id=item.id, judge="researchrubrics.checklist", part=r["id"],
                                       family="checklist", spec_hash="h", model="m", status="ok", verdict=v,
                                       score=1.0 if v == "satisfied" else 0.0, confidence=0.8,
                                       result={"weight": r["weight"], "axis": r["axis"], "rubric": rubric}))
    return pairs


def _rubric(criteria: list[dict]) -> dict:
    """The rubric summary ChecklistJudge writes into each result (compliance reads it)."""
    axes: dict[str, dict] = {}
    for r in criteria:
        a = axes.setdefault(r["axis"], {"n": 0, "positive_weight": 0.0, "negative_weight": 0.0})
        a["n"] += 1
        a["positive_weight" if r["weight"] > 0 else "negative_weight"] += r["weight"]
    return {"n": len(criteria), "positive_weight": sum(r["weight"] for r in criteria if r["weight"] > 0),
            "negative_weight": sum(r["weight"] for r in criteria if r["weight"] < 0), "axes": axes}


@pytest.mark.slow
def test_calibrate_accepts_the_bundled_verdict_file(tmp_path: Path) -> None:
    pairs = _run(tmp_path / "rr.sqlite")
    h, j = [p[0] for p in pairs], [p[1] for p in pairs]
    out = tmp_path / "rep"
    result = CliRunner().invoke(app, ["calibrate", "--labels", str(EXAMPLE / "human_verdicts.jsonl"), "--run",
                                      str(tmp_path / "rr.sqlite"), "--out", str(out), "--n-boot", "50"])
    assert result.exit_code == 0, result.output
    (row,) = json.loads((out / "report.json").read_text())["verdict_per_rubric"]
    assert row["classes"] == "not_satisfied,partially,satisfied"  # three classes, not four
    assert row["n"] == 12
    assert row["accuracy"] == pytest.approx(accuracy_score(h, j))
    assert row["kappa"] == pytest.approx(cohen_kappa_score(h, j))
    # compliance reads the same file the same way (ternary: the three classes above)
    comp = tmp_path / "c.json"
    done = CliRunner().invoke(app, ["compliance", str(tmp_path / "rr.sqlite"), "--labels",
                                    str(EXAMPLE / "human_verdicts.jsonl"), "--ternary", "--out", str(comp)])
    assert done.exit_code == 0, done.output
    assert "# Compliance per report" in done.output  # piped: CSV tables, not boxes
    assert "report,judge,model,spec_hash,compliance" in done.output and "┃" not in done.output
    (agreement,) = json.loads(comp.read_text())["agreement"]
    assert agreement["accuracy"] == pytest.approx(row["accuracy"]) and agreement["kappa"] == pytest.approx(row["kappa"])


@pytest.mark.slow
def test_labels_by_position_need_the_task_file(tmp_path: Path) -> None:
    pairs = _run(tmp_path / "rr.sqlite")
    tasks = [json.loads(line) for line in (EXAMPLE / "tasks.jsonl").read_text().splitlines() if line.strip()]
    position = {(t["sample_id"], r["criterion"]): i for t in tasks for i, r in enumerate(t["rubrics"], start=1)}
    labels = tmp_path / "by_position.csv"
    with labels.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["sample_id", "criterion", "verdict"])
        for h in _human():
            writer.writerow([h["sample_id"], position[(h["sample_id"], h["criterion"])], h["verdict"].upper()])
    args = ["calibrate", "--labels", str(labels), "--run", str(tmp_path / "rr.sqlite"), "--n-boot", "0"]
    refused = CliRunner().invoke(app, args)
    assert refused.exit_code == 2 and "--tasks" in refused.output and "Traceback" not in refused.output
    out = tmp_path / "rep"
    done = CliRunner().invoke(app, [*args, "--tasks", str(EXAMPLE / "tasks.jsonl"), "--out", str(out)])
    assert done.exit_code == 0, done.output
    (row,) = json.loads((out / "report.json").read_text())["verdict_per_rubric"]
    assert row["accuracy"] == pytest.approx(accuracy_score([p[0] for p in pairs], [p[1] for p in pairs]))


@pytest.mark.slow
def test_every_judgment_abstained_is_one_line(tmp_path: Path) -> None:
    with Run(tmp_path / "a.sqlite") as run:
        for h in _human():
            from scijudge.spec.rubric_criteria import criterion_id

            run.record(JudgeResult(item_id=h["sample_id"], judge="researchrubrics.checklist",
                                   part=criterion_id(h["criterion"]), family="checklist", spec_hash="h", model="m",
                                   status="abstained", reason="refused"))
    done = CliRunner().invoke(app, ["calibrate", "-l", str(EXAMPLE / "human_verdicts.jsonl"), "-r",
                                    str(tmp_path / "a.sqlite")])
    assert done.exit_code == 2 and "12 abstained" in done.output and "Traceback" not in done.output
