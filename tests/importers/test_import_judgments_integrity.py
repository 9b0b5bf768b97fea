"""import-judgments stores exactly what the file gives: no number it did not give, no row silently replaced,
no mapping guessed at, line numbers of the file, one transaction (Ctrl-C keeps nothing and says so)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from scijudge.cli import app
from scijudge.errors import EXIT_INTERRUPTED, InputError
from scijudge.importers import judgments as importer
from scijudge.importers.judgments import load_judgments, parse_mapping
from scijudge.records import JudgeResult
from scijudge.run.store import Run


def _cli(*args: str):
    return CliRunner().invoke(app, ["import-judgments", *map(str, args)])


def _lines(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


def _bad(imported):
    return [(e.line, e.field) for e in imported.errors]


def test_booleans_and_nan_are_bad_rows_in_jsonl_and_csv_alike(tmp_path):
    jsonl = _lines(tmp_path / "j.jsonl", [
        '{"item_id": "a", "judge": "j", "model": "m", "score": true}',
        '{"item_id": "b", "judge": "j", "model": "m", "score": false}',
        '{"item_id": "c", "judge": "j", "model": "m", "score": NaN}',
        '{"item_id": "d", "judge": "j", "model": "m", "score": 3, "confidence": true}',
        '{"item_id": "e", "judge": "j", "model": "m", "score": 2}',
    ])
    imported = load_judgments(jsonl)
    assert _bad(imported) == [(1, "score"), (2, "score"), (3, "score"), (4, "confidence")]
    assert [(r.item_id, r.score) for r in imported.results] == [("e", 2.0)]
    csv = tmp_path / "j.csv"
    csv.write_text("item_id,judge,model,score\nc,j,m,nan\ne,j,m,2\nf,j,m,True\n", encoding="utf-8")
    imported = load_judgments(csv)
    assert _bad(imported) == [(2, "score"), (4, "score")]
    assert [(r.item_id, r.score) for r in imported.results] == [("e", 2.0)]


def test_two_rows_for_one_judgment_are_a_bad_row_never_a_silent_replacement(tmp_path):
    path = _lines(tmp_path / "j.jsonl", [
        {"item_id": "a", "judge": "j", "model": "m", "score": 4},
        {"item_id": "a", "judge": "j", "model": "m", "score": 5},
        {"item_id": "a", "judge": "j", "model": "m", "score": 5, "part": "c1"},  # another part: its own judgment
        {"item_id": "a", "judge": "j", "model": "m2", "score": 1},
    ])
    store = tmp_path / "r.sqlite"
    done = _cli(path, "--run", store)
    assert done.exit_code == 1
    assert f"{path}:2, field 'item_id': a second judgment of item 'a'" in done.output
    assert "the first is on line 1" in done.output and "3 judgments" in done.output
    with Run(store, create=False) as run:
        assert sorted((r["model"], r["part"], r["score"]) for r in run.rows()) == [
            ("m", "", 4.0), ("m", "c1", 5.0), ("m2", "", 1.0)]
        assert len(run) == 3


def test_mappings_that_would_be_guessed_at_are_errors(tmp_path):
    csv = tmp_path / "r.csv"
    csv.write_text("item_id,judge,model,score,rating\na,j,m,1,5\n", encoding="utf-8")
    with pytest.raises(InputError, match="column 'rating' is mapped to 'score', but there is a column 'score' too"):
        load_judgments(csv, mapping=parse_mapping(["rating=score"]))
    jsonl = _lines(tmp_path / "r.jsonl", [{"item_id": "a", "judge": "j", "model": "m", "rating": 5},
                                          {"item_id": "b", "judge": "j", "model": "m", "rating": 4, "score": 1}])
    with pytest.raises(InputError, match="there is a column 'score' too") as info:
        load_judgments(jsonl, mapping=parse_mapping(["rating=score"]))
    assert info.value.line == 2
    with pytest.raises(InputError, match="two columns are mapped to 'model': 'a' and 'b'"):
        parse_mapping(["a=model", "b=model"])
    with pytest.raises(InputError, match="--map nothere=score: no field 'nothere'"):
        load_judgments(csv, mapping={"nothere": "score"})
    with pytest.raises(InputError, match="no row has a field 'grade'"):
        load_judgments(jsonl, mapping=parse_mapping(["grade=verdict"]))
    done = _cli(csv, "--run", tmp_path / "s.sqlite", "--map", "rating=score")
    assert done.exit_code == 2 and "Traceback" not in done.output and not (tmp_path / "s.sqlite").exists()


def test_csv_bad_rows_are_named_by_their_line_in_the_file(tmp_path):
    csv = tmp_path / "r.csv"
    csv.write_text('item_id,judge,model,score,rationale\n'
                   'a,j,m,4,"one\nrationale over\nthree lines"\n'
                   '\n'
                   'b,j,m,high,x\n'
                   'c,j,m,2,"two\nlines",extra\n', encoding="utf-8")
    imported = load_judgments(csv)
    assert _bad(imported) == [(6, "score"), (7, None)]
    (only,) = imported.results
    assert only.result["line"] == 2 and only.rationale == "one\nrationale over\nthree lines"


def test_a_first_row_without_model_is_a_bad_row_not_a_refused_file(tmp_path):
    path = _lines(tmp_path / "j.jsonl", [{"item_id": "a", "judge": "j", "score": 4},
                                         {"item_id": "b", "judge": "j", "model": "m", "score": 3}])
    imported = load_judgments(path)
    assert _bad(imported) == [(1, "model")] and [r.item_id for r in imported.results] == ["b"]


def test_deeply_nested_json_is_a_bad_row(tmp_path):
    path = _lines(tmp_path / "j.jsonl", ['{"item_id": "a", "judge": "j", "model": "m", "x": ' + "[" * 100_000
                                         + "]" * 100_000 + "}",
                                         {"item_id": "b", "judge": "j", "model": "m", "score": 3}])
    done = _cli(path, "--run", tmp_path / "r.sqlite")
    assert done.exit_code == 1 and "Traceback" not in done.output
    assert f"{path}:1: JSON nested too deeply" in done.output and "1 judgment ->" in done.output


def test_an_import_never_silently_supersedes_what_scijudge_judged(tmp_path):
    store = tmp_path / "r.sqlite"
    judged = JudgeResult(item_id="a", judge="j", family="likert", spec_hash="spec1", model="m", status="ok", score=2)
    with Run(store) as run:
        run.record(judged)
    path = _lines(tmp_path / "j.jsonl", [{"item_id": "b", "judge": "j", "model": "m", "score": 4},
                                         {"item_id": "a", "judge": "j", "model": "m", "score": 5}])
    refused = _cli(path, "--run", store)
    assert refused.exit_code == 2 and f"{path}:2, field 'model'" in refused.output
    assert "--supersede" in refused.output
    with Run(store, create=False) as run:
        assert [(r["item_id"], r["score"]) for r in run.rows()] == [("a", 2.0)]  # nothing written
        assert "imports" not in run.meta()
    allowed = _cli(path, "--run", store, "--supersede")
    assert allowed.exit_code == 0 and "1 judgment made by scijudge is now history" in allowed.output
    with Run(store, create=False) as run:
        assert sorted((r["item_id"], r["score"], r["current"]) for r in run.rows(history=True)) == [
            ("a", 2.0, False), ("a", 5.0, True), ("b", 4.0, True)]


@pytest.mark.slow  # seconds: 12,000 rows / a loopback judging run
def test_ctrl_c_during_an_import_keeps_nothing_says_so_and_exits_130(tmp_path, monkeypatch):
    path = _lines(tmp_path / "j.jsonl", [{"item_id": f"q{k}", "judge": "j", "model": "m", "score": k % 5 + 1}
                                         for k in range(12_000)])
    store = tmp_path / "r.sqlite"
    with Run(store) as run:
        run.record(JudgeResult(item_id="old", judge="j", family="f", spec_hash="imported", model="m", status="ok",
                               score=1))
    real = importer._plain_chunk

    def interrupted(lines, rows, source, sha, created_at):
        if 11_000 in lines:  # after two chunks of 5,000 went into the transaction
            raise KeyboardInterrupt
        return real(lines, rows, source, sha, created_at)

    monkeypatch.setattr(importer, "_plain_chunk", interrupted)
    done = _cli(path, "--run", store)
    assert done.exit_code == EXIT_INTERRUPTED, done.output
    assert "interrupted: nothing was written" in done.output and "run the same command again" in done.output
    with Run(store, create=False) as run:
        assert len(run) == 1 and "imports" not in run.meta()
    monkeypatch.setattr(importer, "_plain_chunk", real)
    again = _cli(path, "--run", store)
    assert again.exit_code == 0, again.output
    with Run(store, create=False) as run:
        assert len(run) == 12_001 and run.meta()["imports"][0]["imported"] == 12_000
