"""Issue 45, item 5: what a new user met on the command line, each checked as the user would meet it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scijudge.cli import app
from scijudge.records import JudgeResult
from scijudge.run.store import Run

JUDGE = "yescieval.qa.correctness"
DATA = Path(__file__).resolve().parents[2] / "datasets"


def _run(*args: str):
    return CliRunner().invoke(app, [str(a) for a in args])


def _line(done) -> str:
    return " ".join(done.output.split())


def _store(path: Path, scores: dict[str, float], judge: str = JUDGE) -> Path:
    with Run(path) as run:
        for item, score in scores.items():
            run.record(JudgeResult(item_id=item, judge=judge, family="likert", spec_hash="h", model="m", status="ok",
                                   score=score, created_at="2026-12-01T10:00:00+00:00"))
    return path


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _store(tmp_path / "S.sqlite", {f"q{k}": float(k % 5 + 1) for k in range(8)})
    (tmp_path / "labels.jsonl").write_text("".join(json.dumps({"item_id": f"q{k}", "judge": JUDGE, "score": k % 5 + 1})
                                                   + "\n" for k in range(8)))
    return tmp_path


def test_a_negative_n_boot_is_refused_by_every_command_that_takes_it(folder):
    for args in (["calibrate", "--run", "S.sqlite", "--labels", "labels.jsonl", "--n-boot", "-5"],
                 ["robustness", "S.sqlite", "--n-boot", "-5"]):
        done = _run(*args)
        assert done.exit_code == 2 and "--n-boot must be 0 (no intervals) or more, got -5" in _line(done), done.output


def test_export_refuses_mlflow_options_without_to_mlflow(folder):
    done = _run("export", "S.sqlite", "--tracking-uri", "http://127.0.0.1:9", "--out", "o.jsonl")
    assert done.exit_code == 2 and "--tracking-uri is for an export to MLflow: add --to mlflow" in _line(done)
    assert not (folder / "o.jsonl").exists()


def test_an_out_folder_that_is_a_file_is_refused_before_anything_is_computed(folder, monkeypatch):
    import scijudge.metrics.calibration as calibration

    def never(*a, **k):
        raise AssertionError("computed before the output folder was checked")

    monkeypatch.setattr(calibration, "calibrate", never)
    monkeypatch.setattr("scijudge.estimation.match_units", never)
    (folder / "afile").write_text("")
    for command in ("calibrate", "estimate"):
        done = _run(command, "--run", "S.sqlite", "--labels", "labels.jsonl", "--out", "afile/report")
        assert done.exit_code == 2 and "afile is a file, not a folder" in _line(done), (command, done.output)


def test_judge_refuses_an_empty_file_and_a_damaged_store_before_any_model_loads(folder):
    (folder / "items.jsonl").write_text(json.dumps({"id": "a", "question": "q", "answer": "b"}) + "\n")
    (folder / "empty.sqlite").touch()
    done = _run("judge", "items.jsonl", "-j", JUDGE, "-m", "hf:/no/such/model", "--run", "empty.sqlite")
    assert done.exit_code == 2 and "an empty file, not a run store" in _line(done), done.output
    assert (folder / "empty.sqlite").read_bytes() == b"" and sorted(p.name for p in folder.glob("empty*")) == [
        "empty.sqlite"]
    data = (folder / "S.sqlite").read_bytes()
    (folder / "cut.sqlite").write_bytes(data[: len(data) // 2])
    done = _run("judge", "items.jsonl", "-j", JUDGE, "-m", "hf:/no/such/model", "--run", "cut.sqlite")
    text = _line(done)
    assert done.exit_code == 2 and "cut.sqlite: damaged run store" in text, text  # not the model's error
    assert "sqlite3 cut.sqlite .recover" in text and "not a scijudge run store" not in text, text


def test_a_mistyped_judge_gets_a_did_you_mean(folder):
    done = _run("judge", "labels.jsonl", "-j", "yescieval.qa.corectness", "-m", "openai/x", "--run", "x.sqlite")
    assert done.exit_code == 2 and "did you mean yescieval.qa.correctness" in _line(done), done.output


def test_robustness_says_what_off_target_means(folder):
    _store(folder / "R.sqlite", {"q1": 4.0, "q1::coherence::extreme": 2.0, "q1::correctness::extreme": 2.0})
    done = _run("robustness", "R.sqlite", "--n-boot", "0")
    text = _line(done)
    assert done.exit_code == 0, text
    assert "1 judgment of variants made for another judge's rubric (off target" in text, text


@pytest.mark.slow  # seconds: the fast subset stays under a minute
def test_cli_errors_use_no_python_or_pandas_names(folder):
    (folder / "extra.jsonl").write_text(json.dumps({"item_id": "zzz", "judge": JUDGE, "score": 3}) + "\n")
    done = _run("calibrate", "--run", "S.sqlite", "--labels", "extra.jsonl", "--n-boot", "0")
    text = _line(done)
    assert done.exit_code == 2 and "pass --allow-extra-labels" in text and "allow_extra_labels" not in text, text
    assert "labels for 1 item that no run judged" in text, text
    (folder / "picks.csv").write_text("item_id,pi,picked\nq1,0.5,true\nq2,0.5,true,9,9\n")
    done = _run("estimate", "--run", "S.sqlite", "--labels", "labels.jsonl", "--picks", "picks.csv")
    text = _line(done)
    assert done.exit_code == 2 and "picks.csv:3: expected 3 cells, found 5" in text, text
    assert "tokenizing" not in text and "C error" not in text, text
    (folder / "results.json").write_text("{}")
    done = _run("import-judgments", "results.json", "--from", "inspect", "--run", "x.sqlite")
    assert done.exit_code == 2 and "field 'from'" not in done.output and "--from inspect" in _line(done), done.output


def test_a_store_is_named_by_its_path_in_errors_about_its_rows(folder):
    (folder / "runs").mkdir()
    _store(folder / "runs" / "bad.sqlite", {f"q{k}": 7.0 for k in range(8)})
    done = _run("calibrate", "--run", "runs/bad.sqlite", "--labels", "labels.jsonl", "--n-boot", "0")
    text = _line(done)
    assert done.exit_code == 2 and "error: runs/bad.sqlite" in text, text


def test_an_interrupted_import_into_a_new_store_leaves_no_store_and_says_so(folder, monkeypatch):
    def interrupted(self, chunks):
        for _ in chunks:
            raise KeyboardInterrupt

    monkeypatch.setattr(Run, "record_columns", interrupted)
    done = _run("import-judgments", DATA / "jury_example" / "panel.jsonl", "--run", "new.sqlite")
    assert done.exit_code == 130 and "nothing was written to new.sqlite" in _line(done), done.output
    assert not list(folder.glob("new.sqlite*")), "no empty store, WAL or lock file left behind"
    done = _run("import-judgments", DATA / "jury_example" / "panel.jsonl", "--run", "S.sqlite")
    assert done.exit_code == 130 and (folder / "S.sqlite").exists()
    with Run(folder / "S.sqlite", create=False) as run:
        assert len(run) == 8, "an existing store keeps every row"


@pytest.mark.slow  # a subprocess: seconds
def test_calibrate_into_a_pipe_closed_after_the_first_line_exits_0_quietly(folder):
    import subprocess
    import sys

    code = "import sys; from scijudge.cli import main; sys.argv = ['scijudge'] + sys.argv[1:]; main()"
    command = [sys.executable, "-c", code, "calibrate", "--run", "S.sqlite", "--labels", "labels.jsonl", "--n-boot",
               "0", "--scale", "1,5,1"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=folder) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        first = proc.stdout.readline()
        proc.stdout.close()  # what `| head -1` does
        code_ = proc.wait(timeout=300)
        errors = proc.stderr.read().decode()
    assert first and code_ == 0, (code_, errors)
    assert "Traceback" not in errors and "Broken pipe" not in errors and "Exception ignored" not in errors, errors


def test_the_judges_table_fits_the_terminal_width():
    from scijudge.commands._console import out

    done = _run("judges", "--family", "likert")
    assert done.exit_code == 0 and "yescieval.qa.correctness" in done.output, done.output
    widest = max(len(line) for line in done.output.splitlines())
    assert widest <= out.width, (widest, out.width)


def test_piped_tables_carry_no_float_noise():
    import io

    import pandas as pd
    from rich.console import Console

    from scijudge.report.text import print_frame

    buffer = io.StringIO()
    print_frame(pd.DataFrame({"judge": ["j"], "mae": [0.52 / 3], "n": [3]}), "t", Console(file=buffer), piped=True)
    text = buffer.getvalue()
    assert 0.52 / 3 == 0.17333333333333334 and "0.17333333333333334" not in text and "0.173333333333" in text, text


def test_optimize_says_a_candidate_worse_than_its_base_is_not_the_judge_to_use(capsys):
    from types import SimpleNamespace

    from scijudge.commands.optimize import _print_result

    def result(after: float) -> SimpleNamespace:
        return SimpleNamespace(
            spec=SimpleNamespace(provenance={}, name="t.cand"), base_spec=SimpleNamespace(name="t.base"),
            recipe=SimpleNamespace(name="mipro"), before={"score": 0.6, "n_units": 30},
            after={"score": after, "n_units": 30}, notes=[], interrupted=False, unchanged=False,
            spec_path=Path("optimized/t.toml"), budget={"lm_calls": 1, "optimization_lm_calls": 1,
                                                        "evaluation_lm_calls": 0, "cached_calls": 0, "cost_usd": None})

    _print_result(result(0.4), None)
    text = " ".join(capsys.readouterr().out.split())
    assert "scored worse than the base judge on the test split (0.400 against 0.600): keep the base judge " \
           "(t.base)" in text and "optimized judge:" not in text, text
    _print_result(result(0.7), None)
    assert "optimized judge: optimized/t.toml" in " ".join(capsys.readouterr().out.split())
