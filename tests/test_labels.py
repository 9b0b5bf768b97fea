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


_FRAME_CASES = {
    "mixed": [{"item_id": "q1", "judge": "j", "score": 3}, {"item_id": "q2", "judge": "j", "score": 2.5, "annotator": "a",
              "rationale": "r", "source": "expert"}, {"item_id": "q3", "judge": "j", "verdict": "yes"},
              {"item_id": "q4", "judge": "j", "part": "p1", "verdict": ""}, {"item_id": "q5", "judge": "j", "score": 2**60},
              {"item_id": "q6", "judge": "j", "score": None, "verdict": "no", "annotator": None}],
    "text_score": [{"item_id": "q1", "judge": "j", "score": "3"}],  # pydantic reads it; the frame path must too
    "verdict_file": [{"sample_id": "s1", "criterion": 2, "verdict": "Satisfied"}],
    "bool_score": [{"item_id": "q1", "judge": "j", "score": True}],
    "both": [{"item_id": "q1", "judge": "j", "score": 1, "verdict": "yes"}],
    "neither": [{"item_id": "q1", "judge": "j"}],
    "extra": [{"item_id": "q1", "judge": "j", "score": 1, "x": 1}],
    "int_part": [{"item_id": "q1", "judge": "j", "score": 1, "part": 3}],
    "null_part": [{"item_id": "q1", "judge": "j", "score": 1, "part": None}],
    "empty_id": [{"item_id": "", "judge": "j", "score": 1}],
    "bad_source": [{"item_id": "q1", "judge": "j", "score": 1, "source": "robot"}],
    "number_annotator": [{"item_id": "q1", "judge": "j", "score": 1, "annotator": 7}],
    "duplicate": [{"item_id": "q1", "judge": "j", "score": 1, "annotator": "a"}, {"item_id": "q2", "judge": "j", "score": 2},
                  {"item_id": "q1", "judge": "j", "score": 2, "annotator": "a"}],
    "duplicate_unnamed": [{"item_id": "q1", "judge": "j", "part": "c", "score": 1},
                          {"item_id": "q1", "judge": "j", "part": "c", "score": 2, "annotator": ""}],
    "good_then_bad": [{"item_id": "q1", "judge": "j", "score": 1}, {"item_id": "q2", "judge": "j", "score": "x"}],
}


def _frame_or_error(read: object) -> object:
    try:
        return read()  # type: ignore[operator]
    except InputError as exc:
        return ("error", str(exc), exc.file, exc.line, exc.field)


@pytest.mark.parametrize("name", sorted(_FRAME_CASES))
def test_load_labels_frame_equals_labels_to_frame_of_load_labels(tmp_path: Path, name: str) -> None:

    _assert_frame_path_reads_as_load_labels(_jsonl(tmp_path / f"{name}.jsonl", _FRAME_CASES[name]))


def _assert_frame_path_reads_as_load_labels(path: Path) -> None:
    """``load_labels_frame(path)`` is ``labels_to_frame(load_labels(path))``, or refuses it with the same error."""
    from scijudge.labels import load_labels_frame

    plain = _frame_or_error(lambda: labels_to_frame(load_labels(path)))
    fast = _frame_or_error(lambda: load_labels_frame(path))
    if isinstance(plain, tuple):
        assert fast == plain
    else:
        pd = pytest.importorskip("pandas")
        pd.testing.assert_frame_equal(fast, plain, check_exact=True)


def test_load_labels_frame_reads_csv_blank_lines_and_empty_files_as_load_labels_does(tmp_path: Path) -> None:
    import pandas as pd

    from scijudge.labels import load_labels_frame

    csv_path = tmp_path / "l.csv"
    csv_path.write_text("item_id,judge,score,verdict,annotator\nq1,j, 3 ,,a\n\nq2,j,,yes,\nq3,j,2,,b\n")
    pd.testing.assert_frame_equal(load_labels_frame(csv_path), labels_to_frame(load_labels(csv_path)), check_exact=True)
    jsonl = tmp_path / "l.jsonl"
    jsonl.write_text('\ufeff{"item_id": "q1", "judge": "j", "score": 1}\n\n{"item_id": "q2", "judge": "j", "score": 2}\n')
    frame = load_labels_frame(jsonl)
    pd.testing.assert_frame_equal(frame, labels_to_frame(load_labels(jsonl)), check_exact=True)
    assert list(frame["source_line"]) == [1, 3]
    (tmp_path / "blank.jsonl").write_text("\n\n")
    for read in (load_labels, load_labels_frame):
        with pytest.raises(InputError, match="no labels in file"):
            read(tmp_path / "blank.jsonl")


@pytest.mark.parametrize("depth", [63, 64])
def test_jsonl_lines_that_could_be_invalid_text_are_still_checked(tmp_path: Path, depth: int) -> None:
    """iter_jsonl skips its walk over a line's values only when the line has no \\u escape and too few brackets
    to nest deeper than allowed: a lone surrogate and a line one level too deep are still bad lines."""
    from scijudge.labels import load_labels_frame

    ok = '{"item_id": "q1", "judge": "j", "score": 1, "rationale": ' + "[" * depth + "1" + "]" * depth + "}\n"
    surrogate = '{"item_id": "q\\ud800", "judge": "j", "score": 1}\n'
    for read in (load_labels, load_labels_frame):
        path = tmp_path / "l.jsonl"
        path.write_text(ok)
        with pytest.raises(InputError) as err:  # the rationale is not text: pydantic refuses it, not the depth check
            read(path)
        assert ("nested more than" in str(err.value)) == (depth == 64)
        path.write_text(surrogate)
        with pytest.raises(InputError, match="lone surrogate"):
            read(path)


@pytest.mark.parametrize("line", [
    '{"a": 1}\n', '{"a": 1}', ' {"a": 1}\n', '{"a": 1} \n', '{"a": 1}\r\n', '\ufeff{"a": 1}\n', '{"a": 1}{"b": 2}\n',
    '{"a": NaN}\n', '[1, 2]\n', '{"a": 1,}\n', '{"a": "\\ud800"}\n', '{"a": 1}\n\n', '{"a": {"b": 1, "b": 2}}\n',
    "[" * 5000 + "]" * 5000 + "\n",
])
def test_jsonl_lines_decode_as_json_loads_decodes_them(line: str) -> None:
    from scijudge.data import _loads_line

    def decoded(loads: object) -> object:
        try:
            return "ok", loads(line)  # type: ignore[operator]
        except (ValueError, RecursionError) as exc:
            return type(exc).__name__, str(exc)

    assert repr(decoded(_loads_line)) == repr(decoded(json.loads))


def test_label_frame_in_chunks_equals_label_by_label_with_an_odd_row_in_a_later_chunk(tmp_path):
    """Chunks of plainly valid rows are read column by column; a chunk with one row that is not goes row by row:
    the frame is what HumanLabel makes of each row either way, and a bad row is refused after the rows before it."""
    import pandas as pd

    from scijudge.labels import load_labels_frame

    rows = [{"item_id": f"q{n}", "judge": "j", "score": n % 5 + 1, "annotator": "a", "source": "expert"}
            for n in range(11_000)]
    rows[7_001] = {"item_id": "q7001", "judge": "j", "verdict": "yes"}  # a verdict among scores
    rows[9_000] = {"item_id": "q9000", "judge": "j", "score": 2.5, "part": "p", "rationale": "why"}
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    expected = labels_to_frame(load_labels(path))
    pd.testing.assert_frame_equal(load_labels_frame(path), expected)
    rows[10_500] = {"item_id": "bad", "judge": "j", "score": "high"}
    path.write_text("".join(json.dumps(r) + "\n" for r in rows[:10_700]) + "not json\n")
    with pytest.raises(InputError) as by_rows:
        load_labels(path)
    with pytest.raises(InputError) as by_chunks:
        load_labels_frame(path)
    assert str(by_chunks.value) == str(by_rows.value) and ":10501," in str(by_rows.value)


_ODD_LINES = [
    '{"item_id": "q", "judge": "j", "score": 100000000000000000000000000000}',  # orjson: a float; json: exact
    '{"item_id": "q", "judge": "j", "score": 18446744073709551617}', '{"item_id": "q", "judge": "j", "score": 9007199254740993}',
    '{"item_id": "q", "judge": "j", "score": 1e300}', '{"item_id": "q", "judge": "j", "score": 1e400}',
    '{"item_id": "q", "judge": "j", "score": -0.0}', '{"item_id": "q", "judge": "j", "score": NaN}',
    '{"item_id": "q", "judge": "j", "score": 0.1000000000000000055511151231257827}',
    '{"item_id": "q\\u00e9\\ud83d\\ude00", "judge": "j", "score": 1}', '{"item_id": "q\\ud800", "judge": "j", "score": 1}',
    '{"item_id": "q", "judge": "j", "score": 1, "score": 2}', '{"item_id": 100000000000000000000000000000, "judge": "j", "score": 1}',
    '\ufeff{"item_id": "q", "judge": "j", "score": 1}', '{"item_id": "q", "judge": "j", "score": 1} {"x": 1}',
    '{"item_id": "q", "judge": "j", "score": [1]}', '{"item_id": "q", "judge": "j", "verdict": "yes", "source": "llm"}',
    '{"item_id": "q", "judge": "j", "score": 1, "source": ["expert"]}', '   ', '["item_id", "judge"]',
    '{"item_id": "", "judge": "j", "score": 1}', '{"item_id": "q", "judge": "j", "score": true}',
    '{"item_id": "q", "judge": "j", "score": 1, "source": "oracle"}', '{"item_id": "q", "judge": "j", "score": 1, "verdict": "y"}',
    '{"item_id": "q", "judge": "j"}', '{"item_id": "q", "judge": "j", "score": 1, "annotator": 3}',
    '{"item_id": "q", "judge": "j", "score": 1, "part": null}', '{"item_id": "q", "judge": "j", "score": "2"}',
    '{"item_id": "q", "judge": "j", "score": 1' + "0" * 400 + "}",
]


def test_a_score_beyond_any_float_is_one_clear_error(tmp_path: Path) -> None:
    from scijudge.labels import load_labels_frame

    path = tmp_path / "labels.jsonl"
    path.write_text('{"item_id": "q1", "judge": "j", "score": 2}\n{"item_id": "q2", "judge": "j", "score": 1' + "0" * 400 + "}\n")
    for read in (load_labels, load_labels_frame):
        with pytest.raises(InputError) as caught:
            read(path)
        assert (caught.value.line, caught.value.field) == (2, "score") and "finite number" in str(caught.value)


@pytest.mark.parametrize("odd", _ODD_LINES)
@pytest.mark.parametrize("among", [0, 100])
def test_label_frame_reads_lines_where_orjson_and_json_differ_as_json_does(tmp_path: Path, odd: str, among: int,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """orjson reads plain label lines first: an integer beyond 64 bits, NaN, a lone surrogate, a byte-order mark
    or any other unusual line is read by json and taken or refused as ``load_labels`` does, alone or inside a chunk
    of plain lines.

    Chunks of 64 lines here (4,096 in use; the 11,000-row test above reads chunks of that size): among 100 plain
    lines, the odd one lies inside the first chunk and a chunk of plain lines follows, as with 5,000 real-size
    lines, at a fiftieth of the time."""
    import scijudge.labels

    monkeypatch.setattr(scijudge.labels, "_CHUNK_LINES", 64)
    plain = [json.dumps({"item_id": f"p{n}", "judge": "j", "score": n % 5, "annotator": "a"}) for n in range(among)]
    path = tmp_path / "labels.jsonl"
    path.write_bytes(("\n".join([*plain[: among // 2], odd, *plain[among // 2:]]) + "\n").encode("utf-8", "surrogatepass"))
    _assert_frame_path_reads_as_load_labels(path)
