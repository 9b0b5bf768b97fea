"""Human label loaders: JSONL, CSV and TSV, with errors that name file, line and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scijudge.errors import InputError
from scijudge.labels import HumanLabel, labels_to_frame, load_labels


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_jsonl_labels_with_several_annotators(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "labels.jsonl", [
        {"item_id": "q1", "judge": "yescieval.qa.correctness", "score": 4, "annotator": "ann"},
        {"item_id": "q1", "judge": "yescieval.qa.correctness", "score": 5, "annotator": "bob", "rationale": "fine"},
        {"item_id": "r1", "judge": "researchrubrics.checklist", "part": "c3", "verdict": "satisfied"},
    ])
    labels = load_labels(path)
    assert [label.score for label in labels] == [4.0, 5.0, None]
    assert labels[2].verdict == "satisfied" and labels[2].part == "c3"
    assert labels[1].origin == (str(path), 2)
    frame = labels_to_frame(labels)
    assert list(frame.columns) == ["item_id", "judge", "part", "score", "verdict", "annotator", "rationale",
                                   "label_source", "source_file", "source_line"]
    assert frame["label_source"].tolist() == ["unknown"] * 3
    assert frame["score"].dtype == float and frame["source_line"].tolist() == [1, 2, 3]


def test_csv_and_tsv_labels(tmp_path: Path) -> None:
    csv_path = tmp_path / "labels.csv"
    csv_path.write_text('item_id,judge,score,annotator,rationale\nq1,j,4,a,"multi\nline"\nq2,j,3,a,\n\nq3,j,2.5,a,\n')
    labels = load_labels(csv_path)
    assert [(x.item_id, x.score) for x in labels] == [("q1", 4.0), ("q2", 3.0), ("q3", 2.5)]
    assert labels[0].rationale == "multi\nline"
    assert labels[1].origin == (str(csv_path), 4)  # the quoted newline makes row 2 span lines 2-3
    assert labels[2].origin == (str(csv_path), 6)
    tsv = tmp_path / "labels.tsv"
    tsv.write_text("item_id\tjudge\tverdict\nq1\tj\tA\n")
    assert load_labels(tsv)[0].verdict == "A"


@pytest.mark.parametrize("content,where,field", [
    ('{"item_id": "q1", "judge": "j", "score": 4}\n{"item_id": "q2", "judge": "j"}\n', ":2", "score"),
    ('{"item_id": "q1", "judge": "j", "score": 4, "verdict": "A"}\n', ":1", "score"),
    ('{"item_id": "q1", "judge": "j", "score": "high"}\n', ":1", "score"),
    ('{"item_id": "q1", "judge": "j", "score": 4, "grader": "x"}\n', ":1", "grader"),
    ('{"judge": "j", "score": 4}\n', ":1", "item_id"),
    ('{"item_id": "q1", "judge": "j", "score": 4}\n{not json}\n', ":2", None),
])
def test_bad_jsonl_lines_are_located(tmp_path: Path, content: str, where: str, field: str | None) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(InputError) as err:
        load_labels(path)
    assert f"bad.jsonl{where}" in str(err.value)
    assert err.value.field == field


def test_bad_csv_is_located(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("item_id,judge,score\nq1,j,4\nq2,j,four\n")
    with pytest.raises(InputError, match=r"bad.csv:3, field 'score': not a number"):
        load_labels(path)
    path.write_text("item_id,judge,stars\nq1,j,4\n")
    with pytest.raises(InputError, match=r"bad.csv:1, field 'stars': unknown column"):
        load_labels(path)
    path.write_text("item_id,score\nq1,4\n")
    with pytest.raises(InputError, match=r"field 'judge'"):
        load_labels(path)


def test_duplicate_label_by_one_annotator_is_an_error(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "dup.jsonl", [
        {"item_id": "q1", "judge": "j", "score": 4, "annotator": "ann"},
        {"item_id": "q1", "judge": "j", "score": 4, "annotator": "bob"},
        {"item_id": "q1", "judge": "j", "part": "c1", "score": 4, "annotator": "ann"},
        {"item_id": "q1", "judge": "j", "score": 2, "annotator": "ann"},
    ])
    with pytest.raises(InputError) as err:
        load_labels(path)
    assert "dup.jsonl:4" in str(err.value) and "first at line 1" in str(err.value)
    with pytest.raises(InputError, match="duplicate label"):
        labels_to_frame([HumanLabel(item_id="q", judge="j", score=1), HumanLabel(item_id="q", judge="j", score=2)])


def test_missing_file_and_unknown_format(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not found"):
        load_labels(tmp_path / "nope.jsonl")
    other = tmp_path / "labels.xlsx"
    other.write_text("x")
    with pytest.raises(InputError, match="unknown labels format"):
        load_labels(other)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(InputError, match="no labels"):
        load_labels(empty)


def test_labels_say_where_they_came_from_and_refuse_unknown_sources(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "labels.jsonl", [
        {"item_id": "q1", "judge": "j", "score": 4, "source": "expert"},
        {"item_id": "q2", "judge": "j", "score": 3, "source": "llm"},
    ])
    assert [label.source for label in load_labels(path)] == ["expert", "llm"]
    bad = _jsonl(tmp_path / "bad.jsonl", [{"item_id": "q1", "judge": "j", "score": 4, "source": "oracle"}])
    with pytest.raises(InputError) as caught:
        load_labels(bad)
    assert caught.value.line == 1 and caught.value.field == "source"
