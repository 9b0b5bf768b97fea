"""ResearchRubrics tasks, reports and human verdicts: the public format in, clear errors or listed skips out."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from scijudge.errors import InputError
from scijudge.importers.researchrubrics import (
    AXES,
    criterion_id,
    load_checklist_items,
    load_human_verdicts,
    load_reports,
    load_tasks,
    read_tasks,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "datasets" / "researchrubrics_example"


def _task(sample_id: str = "t1", **changes: Any) -> dict[str, Any]:
    task: dict[str, Any] = {
        "prompt": "Review battery recycling routes.", "sample_id": sample_id, "domain": "Chemistry",
        "conceptual_breadth": "Moderate", "logical_nesting": "Shallow", "exploration": "Low",
        "rubrics": [
            {"criterion": "Compares hydrometallurgy with pyrometallurgy.", "weight": 5, "axis": "Explicit Criteria"},
            {"criterion": "Cites a source for every recovery rate.", "weight": 2.5,
             "axis": "References & Citation Quality"},
            {"criterion": "Recommends burning cells in open pits.", "weight": -5, "axis": "Implicit Criteria"},
        ],
    }
    task.update(changes)
    return task


def _write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


def _reports(folder: Path, **texts: str) -> Path:
    folder.mkdir(exist_ok=True)
    for sample_id, text in texts.items():
        (folder / f"{sample_id}.md").write_text(text, encoding="utf-8")
    return folder


def test_example_dataset_loads_into_checklist_items() -> None:
    items, skipped = load_checklist_items(EXAMPLE / "tasks.jsonl", EXAMPLE / "reports")
    assert skipped == []
    assert [i.id for i in items] == ["rr-example-001", "rr-example-002"]
    first = items[0]
    assert first.question.startswith("Write a short report on why perovskite")
    assert first.answer.startswith("# Why perovskite solar cells degrade outdoors")
    rubrics = first.meta["rubrics"]
    assert len(rubrics) == 6 and first.meta["domain"] == "Materials Science"
    assert [r["weight"] for r in rubrics] == [5.0, 4.0, 3.0, 3.0, 2.0, -4.0]
    assert {r["axis"] for r in rubrics} <= set(AXES)
    assert rubrics[0]["id"] == criterion_id(rubrics[0]["criterion"])
    assert first._origin == (str(EXAMPLE / "tasks.jsonl"), 1)
    labels = load_human_verdicts(EXAMPLE / "human_verdicts.jsonl", tasks=load_tasks(EXAMPLE / "tasks.jsonl"))
    assert len(labels) == 12 and {lab.verdict for lab in labels} == {"satisfied", "partially", "not_satisfied"}
    assert labels[0].part == rubrics[0]["id"] and labels[0].judge == "researchrubrics.checklist"


def test_criterion_ids_ignore_whitespace_case_and_order() -> None:
    assert criterion_id("Cites  a source\nfor every rate.") == criterion_id("cites a source for every rate.")
    assert criterion_id("Cites a source.") != criterion_id("Cites two sources.")
    from scijudge.importers.researchrubrics import Task

    reordered = Task.model_validate(_task(rubrics=list(reversed(_task()["rubrics"]))))
    original = Task.model_validate(_task())
    assert [c.id for c in reordered.rubrics] == [c.id for c in reversed(original.rubrics)]
    assert all(c.id.startswith("c") and len(c.id) == 11 for c in original.rubrics)


def test_axis_names_are_normalised_to_the_published_spelling(tmp_path: Path) -> None:
    task = _task(rubrics=[{"criterion": "x", "weight": 1, "axis": "references and citation   quality"}])
    (loaded,) = load_tasks(_write_jsonl(tmp_path / "t.jsonl", [task]))
    assert loaded.rubrics[0].axis == "References & Citation Quality"


@pytest.mark.parametrize(
    ("weight", "message"),
    [(0, "must not be zero"), ("heavy", "must be a number"), ("3", "must be a number"), (True, "must be a number"),
     (None, "must be a number"), (10**400, "must be finite, got an integer of about 401 digits")],
)
def test_bad_weights_name_file_line_and_field(tmp_path: Path, weight: Any, message: str) -> None:
    rubrics = _task()["rubrics"]
    rubrics[1]["weight"] = weight
    path = _write_jsonl(tmp_path / "tasks.jsonl", [_task("ok"), _task("bad", rubrics=rubrics)])
    with pytest.raises(InputError) as caught:
        load_tasks(path)
    error = caught.value
    assert (error.file, error.line, error.field) == (str(path), 2, "rubrics.1.weight")
    assert message in str(error) and f"{path}:2" in str(error)


def test_non_finite_weight_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    text = json.dumps(_task()).replace('"weight": 2.5', '"weight": NaN')
    path.write_text(text + "\n", encoding="utf-8")
    with pytest.raises(InputError, match="finite"):
        load_tasks(path)


def test_unknown_axis_is_an_error_unless_allowed(tmp_path: Path) -> None:
    rubrics = _task()["rubrics"]
    rubrics[0]["axis"] = "Vibes"
    path = _write_jsonl(tmp_path / "tasks.jsonl", [_task(rubrics=rubrics)])
    with pytest.raises(InputError) as caught:
        load_tasks(path)
    assert caught.value.field == "rubrics.0.axis" and "Explicit Criteria" in str(caught.value)
    (task,) = load_tasks(path, any_axis=True)
    assert task.rubrics[0].axis == "Vibes"


def test_duplicated_criterion_names_both_positions(tmp_path: Path) -> None:
    rubrics = _task()["rubrics"]
    rubrics.append({"criterion": "  compares HYDROMETALLURGY with   pyrometallurgy. ", "weight": 1,
                    "axis": "Explicit Criteria"})
    path = _write_jsonl(tmp_path / "tasks.jsonl", [_task(rubrics=rubrics)])
    with pytest.raises(InputError) as caught:
        load_tasks(path)
    assert caught.value.field == "rubrics.3.criterion" and "rubrics.0.criterion" in str(caught.value)


def test_duplicated_sample_id_and_missing_rubrics(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "tasks.jsonl", [_task("a"), _task("a")])
    with pytest.raises(InputError, match="duplicated sample_id 'a' \\(first on line 1\\)"):
        load_tasks(path)
    path = _write_jsonl(tmp_path / "empty.jsonl", [_task("a", rubrics=[])])
    with pytest.raises(InputError) as caught:
        load_tasks(path)
    assert caught.value.field == "rubrics"
    tasks, skipped = read_tasks(_write_jsonl(tmp_path / "mixed.jsonl", [_task("a"), "{not json", _task("b")]),
                                skip_invalid=True)
    assert [t.sample_id for t in tasks] == ["a", "b"] and skipped[0].line == 2


def test_report_without_task_is_an_error_or_a_listed_skip(tmp_path: Path) -> None:
    tasks = _write_jsonl(tmp_path / "tasks.jsonl", [_task("t1")])
    reports = _reports(tmp_path / "reports", t1="# Report one\nText.", stray="# Who am I?")
    with pytest.raises(InputError) as caught:
        load_checklist_items(tasks, reports)
    assert caught.value.field == "sample_id" and caught.value.file == str(reports / "stray.md")
    assert "no task with sample_id 'stray'" in str(caught.value)
    items, skipped = load_checklist_items(tasks, reports, skip_invalid=True)
    assert [i.id for i in items] == ["t1"]
    assert [(s.file, s.field) for s in skipped] == [(str(reports / "stray.md"), "sample_id")]


def test_task_without_report_is_always_listed(tmp_path: Path) -> None:
    tasks = _write_jsonl(tmp_path / "tasks.jsonl", [_task("t1"), _task("t2")])
    reports = _reports(tmp_path / "reports", t2="Some report.")
    items, skipped = load_checklist_items(tasks, reports)
    assert [i.id for i in items] == ["t2"]
    (skip,) = skipped
    assert (skip.file, skip.line, skip.field) == (str(tasks), 1, "sample_id") and "no report" in skip.reason
    with pytest.raises(InputError, match="no task has a report"):
        load_checklist_items(tasks, _reports(tmp_path / "none"))


def test_empty_report_is_an_error_or_a_listed_skip(tmp_path: Path) -> None:
    tasks = _write_jsonl(tmp_path / "tasks.jsonl", [_task("t1"), _task("t2")])
    reports = _reports(tmp_path / "reports", t1="  \n\n ", t2="Real text.")
    with pytest.raises(InputError, match="report is empty") as caught:
        load_checklist_items(tasks, reports)
    assert caught.value.file == str(reports / "t1.md")
    items, skipped = load_checklist_items(tasks, reports, skip_invalid=True)
    assert [i.id for i in items] == ["t2"]
    reasons = sorted(s.reason for s in skipped)
    assert reasons[0].startswith("no report for sample_id 't1'") and reasons[1] == "report is empty"


def test_non_utf8_markdown_names_the_line(tmp_path: Path) -> None:
    tasks = _write_jsonl(tmp_path / "tasks.jsonl", [_task("t1"), _task("t2")])
    reports = _reports(tmp_path / "reports", t2="fine")
    (reports / "t1.md").write_bytes("# Title\nline two\nna\u00efve".encode("latin-1"))
    with pytest.raises(InputError) as caught:
        load_checklist_items(tasks, reports)
    assert caught.value.file == str(reports / "t1.md") and caught.value.line == 3
    assert "not UTF-8" in str(caught.value)
    items, skipped = load_checklist_items(tasks, reports, skip_invalid=True)
    assert [i.id for i in items] == ["t2"] and any("not UTF-8" in s.reason for s in skipped)


def test_pdf_text_and_jsonl_reports(tmp_path: Path) -> None:
    folder = tmp_path / "reports"
    folder.mkdir()
    (folder / "t1.txt").write_text("Page one ends here.\fPage two\r\nstarts.", encoding="utf-8")
    (folder / "t1.pdf").write_bytes(b"%PDF-1.7")
    (folder / ".DS_Store").write_bytes(b"\x00\x01")
    reports, skipped = load_reports(folder, skip_invalid=True)
    assert reports["t1"].text == "Page one ends here.\n\nPage two\nstarts."
    assert len(skipped) == 1 and "pdftotext" in skipped[0].reason
    with pytest.raises(InputError, match="not a report file"):
        load_reports(folder)
    jsonl = _write_jsonl(tmp_path / "reports.jsonl", [{"sample_id": "t1", "report": "A."},
                                                      {"sample_id": "t2", "report": ""}])
    with pytest.raises(InputError) as caught:
        load_reports(jsonl)
    assert (caught.value.line, caught.value.field) == (2, "report")
    tasks = _write_jsonl(tmp_path / "tasks.jsonl", [_task("t1")])
    items, _ = load_checklist_items(tasks, _write_jsonl(tmp_path / "ok.jsonl", [{"sample_id": "t1", "report": "A."}]))
    assert items[0].answer == "A." and items[0].meta["report_file"] == str(tmp_path / "ok.jsonl")


def test_md_and_txt_for_one_sample_is_ambiguous(tmp_path: Path) -> None:
    folder = _reports(tmp_path / "reports", t1="markdown")
    (folder / "t1.txt").write_text("text", encoding="utf-8")
    with pytest.raises(InputError, match="two reports for sample_id 't1'"):
        load_reports(folder)


def test_human_verdicts_by_text_or_id_with_clear_errors(tmp_path: Path) -> None:
    tasks = load_tasks(_write_jsonl(tmp_path / "tasks.jsonl", [_task("t1")]))
    first = tasks[0].rubrics[0]
    rows = [{"sample_id": "t1", "criterion": first.criterion, "verdict": "Partially Satisfied"},
            {"sample_id": "t1", "criterion": tasks[0].rubrics[2].id, "verdict": "not_satisfied"}]
    labels = load_human_verdicts(_write_jsonl(tmp_path / "v.jsonl", rows), tasks=tasks)
    assert [(lab.part, lab.verdict) for lab in labels] == [(first.id, "partially"),
                                                           (tasks[0].rubrics[2].id, "not_satisfied")]
    cases = [
        ({"sample_id": "t9", "criterion": first.criterion, "verdict": "Satisfied"}, "sample_id", "unknown sample_id"),
        ({"sample_id": "t1", "criterion": "Something else.", "verdict": "Satisfied"}, "criterion", "no such criterion"),
        ({"sample_id": "t1", "criterion": first.criterion, "verdict": "Mostly"}, "verdict", "unknown verdict"),
    ]
    for row, field, message in cases:
        path = _write_jsonl(tmp_path / "bad.jsonl", [rows[1], row])
        with pytest.raises(InputError, match=message) as caught:
            load_human_verdicts(path, tasks=tasks)
        assert (caught.value.line, caught.value.field) == (2, field)
    with pytest.raises(InputError, match="duplicated verdict"):
        load_human_verdicts(_write_jsonl(tmp_path / "dup.jsonl", [rows[0], rows[0]]), tasks=tasks)
