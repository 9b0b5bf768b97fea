"""import-judgments: files and frames of judgments made elsewhere become run-store records."""

from __future__ import annotations

import hashlib
import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from scijudge.cli import app
from scijudge.errors import InputError
from scijudge.importers.judgments import (
    judgments_from_frame,
    load_judgments,
    parse_mapping,
)
from scijudge.run.store import Run


def _write_jsonl(path, rows):
    path.write_text("".join((json.dumps(r) if isinstance(r, dict) else r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_jsonl_rows_abstentions_variants_and_bad_lines(tmp_path):
    path = _write_jsonl(tmp_path / "j.jsonl", [
        {"item_id": "q1", "judge": "qa.correctness", "model": "m", "score": 4, "confidence": 0.8, "endpoint": "http://h/v1"},
        {"item_id": "q1x", "judge": "qa.correctness", "model": "m", "score": 2, "variant_of": "q1", "level": "extreme"},
        {"item_id": "q2", "judge": "qa.correctness", "model": "m", "reason": "refused"},
        {"item_id": "q3", "judge": "qa.correctness", "model": "m", "score": "high"},
        "{not json",
        {"item_id": "q4", "judge": "qa.correctness", "score": 3},
        {"item_id": "q5", "judge": "qa.correctness", "model": "m", "score": 3, "confidence": 1.5},
        {"item_id": "q6", "judge": "qa.correctness", "model": "m", "verdict": "Yes", "part": "c1"},
    ])
    imported = load_judgments(path)
    assert [(e.line, e.field) for e in imported.errors] == [(4, "score"), (5, None), (6, "model"), (7, "confidence")]
    assert all(str(path) in str(e) for e in imported.errors)
    by_id = {r.item_id: r for r in imported.results}
    assert set(by_id) == {"q1", "q1x", "q2", "q6"}
    assert by_id["q2"].status == "abstained" and by_id["q2"].reason == "refused"
    assert by_id["q1x"].result["variant_of"] == "q1" and by_id["q1x"].result["level"] == "extreme"
    assert by_id["q1"].result["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert by_id["q1"].result["imported_from"] == str(path) and by_id["q1"].result["line"] == 1
    assert by_id["q6"].verdict == "Yes" and by_id["q6"].part == "c1"
    assert imported.n_rows == 8


def test_missing_score_without_reason_names_the_line(tmp_path):
    path = _write_jsonl(tmp_path / "j.jsonl", [{"item_id": "a", "judge": "j", "model": "m", "score": None}])
    (result,) = load_judgments(path).results
    assert result.status == "abstained" and "line 1" in result.reason and result.score is None


def test_csv_with_mapping_and_long_format_levels(tmp_path):
    path = tmp_path / "ratings.csv"
    path.write_text("qid,rubric,llm,rating,condition\n"
                    "q1,coh,gpt,5,original\n"
                    "q1,coh,gpt,3,extreme\n"
                    "\n"
                    "q2,coh,gpt,,subtle\n"
                    "q2,coh,gpt,x,original\n", encoding="utf-8")
    mapping = parse_mapping(["qid=item_id", "rubric=judge", "llm=model", "rating=score", "condition=level"])
    imported = load_judgments(path, mapping=mapping)
    assert [(e.line, e.field) for e in imported.errors] == [(6, "score")]  # header is line 1, blank line 4 kept
    ids = {(r.item_id, r.status) for r in imported.results}
    assert ids == {("q1", "ok"), ("q1::extreme", "ok"), ("q2::subtle", "abstained")}
    variant = next(r for r in imported.results if r.item_id == "q1::extreme")
    assert variant.result["variant_of"] == "q1" and variant.score == 3.0


def test_mapping_and_column_errors_are_clear(tmp_path):
    with pytest.raises(InputError, match="SOURCE=FIELD"):
        parse_mapping(["rating"])
    with pytest.raises(InputError, match="unknown field 'rank'"):
        parse_mapping(["rating=rank"])
    path = tmp_path / "r.csv"
    path.write_text("id,judge,model,score\nq,j,m,1\n", encoding="utf-8")
    with pytest.raises(InputError, match="no field 'item_id'") as info:
        load_judgments(path)
    assert info.value.field == "item_id" and str(path) in str(info.value)


def test_frame_import_matches_file_import(tmp_path):
    frame = pd.DataFrame({"item_id": ["a", "b"], "judge": ["j", "j"], "model": ["m", "m"], "score": [1.0, None]})
    imported = judgments_from_frame(frame)
    assert [r.status for r in imported.results] == ["ok", "abstained"]
    assert imported.sha256 and imported.results[0].result["imported_from"] == "(DataFrame)"
    with pytest.raises(InputError, match="no column 'model'"):
        judgments_from_frame(frame.drop(columns="model"))


def test_cli_writes_the_store_with_provenance_and_lists_bad_rows(tmp_path):
    path = _write_jsonl(tmp_path / "j.jsonl", [
        {"item_id": "q1", "judge": "j", "model": "m", "score": 4},
        {"item_id": "q2", "judge": "j", "model": "m", "score": "?"},
    ])
    store = tmp_path / "run.sqlite"
    result = CliRunner().invoke(app, ["import-judgments", str(path), "--run", str(store)])
    assert result.exit_code == 1, result.output
    assert f"{path}:2, field 'score'" in " ".join(result.output.split())
    run = Run(store, create=False)
    assert len(run) == 1
    imports = run.meta()["imports"]
    assert imports[0]["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest() and imports[0]["bad_rows"] == 1
    # re-importing the same file replaces, not duplicates; --strict writes nothing when a row is bad
    CliRunner().invoke(app, ["import-judgments", str(path), "--run", str(store)])
    assert len(run) == 1
    strict = CliRunner().invoke(app, ["import-judgments", str(path), "--run", str(tmp_path / "s.sqlite"), "--strict"])
    assert strict.exit_code == 2 and "Traceback" not in strict.output
    run.close()
