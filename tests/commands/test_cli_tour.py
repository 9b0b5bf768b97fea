"""Issue 35, "done when" (a new user's tour): every command, given a file that is not a run store, a wrong path or
an output equal to an input, answers in one line naming the file, exits non-zero and changes nothing."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from _cli_checks import digest as _digest
from _cli_checks import one_line_error as _one_line_error

from scijudge.cli import app


def _foreign(folder: Path) -> None:
    (folder / "empty.jsonl").write_bytes(b"")
    (folder / "items.jsonl").write_text('{"id": "q1", "inputs": {}}\n')
    (folder / "notes.txt").write_text("hello\n")
    db = sqlite3.connect(folder / "other.db")
    db.execute("CREATE TABLE foo (x)")
    db.commit()
    db.close()


@pytest.mark.parametrize(("name", "needle"), [("empty.jsonl", "an empty file"), ("items.jsonl", "JSON or JSONL"),
                                              ("notes.txt", "looks like text"), ("other.db", "its tables: foo")])
def test_view_refuses_a_file_that_is_not_a_store_before_serving(tmp_path, monkeypatch, name, needle):
    pytest.importorskip("starlette")
    monkeypatch.chdir(tmp_path)
    _foreign(tmp_path)
    before = _digest(tmp_path)
    result = CliRunner().invoke(app, ["view", name, "--no-browser", "--export", "site"])
    _one_line_error(result, name, "not a scijudge run store", needle)
    assert _digest(tmp_path) == before and not (tmp_path / "site").exists()


def _store(path: Path) -> Path:
    from scijudge.records import JudgeResult
    from scijudge.run.store import Run

    with Run(path) as run:
        run.record_many([JudgeResult(item_id="q1", judge="yescieval.qa.correctness", family="likert", spec_hash="h",
                                     model="m", status="ok", score=3.0).model_dump(mode="json")])
    return path


@pytest.mark.parametrize(("picks", "needle"), [("missing.csv", "missing.csv: picks file not found"),
                                               ("picks.csv", "--picks orders the items to label at /label")])
def test_view_never_ignores_its_picks(tmp_path, monkeypatch, picks, needle):
    pytest.importorskip("starlette")
    monkeypatch.chdir(tmp_path)
    _store(tmp_path / "S.sqlite")
    (tmp_path / "picks.csv").write_text("item_id,judge,pi,picked\nq1,yescieval.qa.correctness,1.0,1\n")
    before = _digest(tmp_path)
    result = CliRunner().invoke(app, ["view", "S.sqlite", "--picks", picks, "--export", "site"])
    _one_line_error(result, needle)
    assert _digest(tmp_path) == before and not (tmp_path / "site").exists()


@pytest.mark.parametrize("which", [0, 1])
def test_figure_metric_refuses_a_binary_file_in_one_line(tmp_path, monkeypatch, which):
    monkeypatch.chdir(tmp_path)
    _store(tmp_path / "S.sqlite")
    (tmp_path / "fig.json").write_text('{"series": [{"name": "a", "x": [1, 2], "y": [1, 2]}]}')
    args = ["S.sqlite", "fig.json"] if which == 0 else ["fig.json", "S.sqlite"]
    before = _digest(tmp_path)
    result = CliRunner().invoke(app, ["figure-metric", *args])
    _one_line_error(result, "S.sqlite", "not a UTF-8 text file")
    assert _digest(tmp_path) == before


def test_import_lematerial_refuses_a_folder_without_annotations_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty").mkdir()
    (tmp_path / "labels.jsonl").write_text('{"item_id": "q1", "judge": "j", "score": 3}\n')
    before = _digest(tmp_path)
    result = CliRunner().invoke(app, ["import-lematerial", "empty", "--run", "lemat.sqlite", "--labels",
                                      "labels.jsonl"])
    _one_line_error(result, "empty: no LeMaterial annotations in this folder", "nothing was written")
    assert _digest(tmp_path) == before and not (tmp_path / "lemat.sqlite").exists()


def test_import_lematerial_never_writes_labels_over_a_file_it_reads(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    paper = tmp_path / "annotations" / "paper1"
    paper.mkdir(parents=True)
    (paper / "result_human.json").write_text("[]")
    before = _digest(paper)
    result = CliRunner().invoke(app, ["import-lematerial", "annotations", "--run", "lemat.sqlite", "--labels",
                                      "annotations/paper1/result_human.json"])
    _one_line_error(result, "--labels: the output annotations/paper1/result_human.json is the input")
    assert _digest(paper) == before and not (tmp_path / "lemat.sqlite").exists()


def test_robustness_out_that_is_a_file_is_refused_before_reading(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _store(tmp_path / "S.sqlite")
    before = _digest(tmp_path)
    result = CliRunner().invoke(app, ["robustness", "S.sqlite", "--out", "S.sqlite"])
    _one_line_error(result, "--out: is a folder for robustness.csv and robustness.html, but S.sqlite is a file")
    assert _digest(tmp_path) == before


def test_an_error_about_an_option_written_with_dashes_names_it_as_typed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _store(tmp_path / "S.sqlite")
    result = CliRunner().invoke(app, ["select-labels", "--run", "S.sqlite", "-j", "nope", "--budget", "1", "--out",
                                      "p.csv"])
    _one_line_error(result, "error: --judge: no judgments of judge 'nope'")
    assert "field '" not in result.output and not (tmp_path / "p.csv").exists()


def test_an_output_folder_that_is_a_file_is_named_in_one_line(tmp_path, monkeypatch):
    """calibrate --out report/ (and estimate, robustness ...) where report is a file: it names the file, not
    'report/report.html: cannot write the output (File exists)'."""
    from scijudge._files import write_text
    from scijudge.errors import InputError

    monkeypatch.chdir(tmp_path)
    (tmp_path / "items.jsonl").write_text("{}\n")
    with pytest.raises(InputError) as caught:
        write_text(tmp_path / "items.jsonl" / "sub" / "report.html", "x")
    assert str(caught.value) == (f"{tmp_path / 'items.jsonl'}: cannot write report.html into {tmp_path / 'items.jsonl'}"
                                 ": it is a file, not a folder; choose another output folder")
    assert (tmp_path / "items.jsonl").read_text() == "{}\n" and [p.name for p in tmp_path.iterdir()] == ["items.jsonl"]


def test_view_names_the_damaged_store(tmp_path, monkeypatch):
    pytest.importorskip("starlette")
    monkeypatch.chdir(tmp_path)
    from scijudge.records import JudgeResult
    from scijudge.run.store import Run

    with Run(tmp_path / "S.sqlite") as run:
        run.record_many([JudgeResult(item_id=f"q{k:03d}", judge="yescieval.qa.correctness", family="likert",
                                     spec_hash="h", model="m", status="ok", score=3.0,
                                     rationale="r" * 200).model_dump(mode="json") for k in range(200)])
    _store(tmp_path / "A.sqlite")
    data = bytearray((tmp_path / "S.sqlite").read_bytes())
    data[len(data) // 2:len(data) // 2 + 300] = b"\xff" * 300
    (tmp_path / "S.sqlite").write_bytes(bytes(data))
    before = _digest(tmp_path)
    result = CliRunner().invoke(app, ["view", "A.sqlite", "S.sqlite", "--export", "site"])
    _one_line_error(result, "S.sqlite: damaged run store (", "sqlite3 S.sqlite .recover")
    assert _digest(tmp_path) == before and not (tmp_path / "site").exists()


def test_robustness_without_variants_is_one_line_in_the_users_words(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _store(tmp_path / "S.sqlite")
    result = CliRunner().invoke(app, ["robustness", "S.sqlite"])
    _one_line_error(result, "error: no perturbed answers in these judgments")
    assert "field '" not in result.output


def test_ctrl_c_in_a_command_without_its_own_handling_is_one_line_and_exit_130(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _store(tmp_path / "S.sqlite")
    before = _digest(tmp_path)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("scijudge.metrics.robustness.robustness_table", interrupted)
    result = CliRunner().invoke(app, ["robustness", "S.sqlite", "--out", "rob"])
    assert result.exit_code == 130, result.output
    assert result.output.strip() == "interrupted: scijudge robustness stopped before it finished"
    assert _digest(tmp_path) == before and not (tmp_path / "rob").exists()


def test_import_judgments_of_a_run_store_is_one_line_not_a_bad_row_per_line(tmp_path, monkeypatch):
    """A run store given to import-judgments (it reads JSONL/CSV judgments) is one line; nothing is created."""
    monkeypatch.chdir(tmp_path)
    store = tmp_path / "panel.sqlite"
    db = sqlite3.connect(store)
    db.execute("CREATE TABLE judgments (key TEXT)")
    db.executemany("INSERT INTO judgments VALUES (?)", [(f"k{i}" * 300,) for i in range(200)])
    db.commit()
    db.close()
    before = _digest(tmp_path)
    result = CliRunner().invoke(app, ["import-judgments", str(store), "--run", str(tmp_path / "ij.sqlite")])
    _one_line_error(result, "panel.sqlite", "an SQLite file", "scijudge export")
    assert _digest(tmp_path) == before


def test_demo_refuses_a_run_that_is_not_a_store_before_building_anything(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "items.jsonl").write_text('{"id": "q1", "inputs": {}}\n')
    before = _digest(tmp_path)
    result = CliRunner().invoke(app, ["demo", "--run", "items.jsonl", "--workdir", str(tmp_path / "tiny")])
    _one_line_error(result, "items.jsonl", "not a scijudge run store")
    assert not (tmp_path / "tiny").exists() and _digest(tmp_path) == before
