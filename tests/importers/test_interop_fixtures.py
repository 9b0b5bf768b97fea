"""Other tools' files exactly as the tools wrote them (tests/importers/fixtures/, with the scripts that made them).

Expected values come from the generator scripts' plans (the grades scripted there) and from the files read with the
standard library's json or the tool's own reader, never from the importer under test.
"""

from __future__ import annotations

import importlib.util

import json
import shutil
import sqlite3
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scijudge.cli import app
from scijudge.errors import InputError
from scijudge.importers.foreign import read_foreign
from scijudge.importers.sniff import sniff_format
from scijudge.run.store import Run

FIXTURES = Path(__file__).parent / "fixtures"
INSPECT, PROMPTFOO, DEEPEVAL = FIXTURES / "inspect", FIXTURES / "promptfoo", FIXTURES / "deepeval"
GRADE = {"C": 1.0, "I": 0.0}
INSPECT_GRADES = {"solver-a": ["C", "I", "C"], "solver-b": ["C", "C", "I"]}  # make_inspect.py's GRADES


def _import(*args: object) -> object:
    return CliRunner().invoke(app, ["import-judgments", *map(str, args)])


def _current(store: Path, history: bool = False) -> list[tuple]:
    with Run(store, create=False) as run:
        return sorted((r["item_id"], r["judge"], r["model"], r["score"], bool(r["current"]))
                      for r in run.rows(history=history))


# --- 1. the model that answered is part of the judgment's identity ------------------------------------------------
@pytest.mark.slow  # seconds: the fast subset stays under a minute
def test_two_inspect_logs_of_two_solvers_keep_both(tmp_path):
    pytest.importorskip("inspect_ai")
    store = tmp_path / "r.sqlite"
    for solver in INSPECT_GRADES:
        done = _import(INSPECT / f"inspect-0.3.285-{solver}.eval", "--run", store)
        assert done.exit_code == 0, done.output
    expected = sorted((f"q{i + 1}|mockllm/{solver}", "model_graded_fact", "mockllm/grader", GRADE[g], True)
                      for solver, grades in INSPECT_GRADES.items() for i, g in enumerate(grades))
    assert _current(store) == expected  # 6 current judgments, 3 per solver, none replaced


@pytest.mark.parametrize("files", [("solver-a.json", "solver-b.json"), ("two-providers.jsonl",)])
def test_promptfoo_providers_are_separate_judgments(tmp_path, files):
    store = tmp_path / "r.sqlite"
    cells = []
    for name in files:
        path = PROMPTFOO / f"promptfoo-0.120.0-{name}"
        done = _import(path, "--run", store)
        assert done.exit_code == 0, done.output
        text = path.read_text(encoding="utf-8")
        cells += ([json.loads(line) for line in text.splitlines() if line.strip()] if name.endswith(".jsonl")
                  else json.loads(text)["results"]["results"])
    rows = _current(store)
    assert len(rows) == len(cells) == 6
    assert {r[0] for r in rows} == {f"{c['vars']['item_id']}|{c['provider']['id']}" for c in cells}


def test_deepeval_runs_of_two_models_are_separate_judgments(tmp_path):
    store = tmp_path / "r.sqlite"
    for solver in ("solver-a", "solver-b"):
        assert _import(DEEPEVAL / f"deepeval-4.3.1-{solver}.json", "--run", store).exit_code == 0
    assert {r[0] for r in _current(store)} == {f"q{i}|solver-{s}" for i in (1, 2, 3) for s in "ab"}


def test_reimport_into_a_store_of_the_old_item_naming_does_not_duplicate(tmp_path):
    """A store written by scijudge at 30e451f (items q1..q3, no solver) stays readable; re-importing the same log
    makes its old rows history (same file hash) and says so, instead of adding a second current copy."""
    pytest.importorskip("inspect_ai")
    store = tmp_path / "old.sqlite"
    shutil.copy(FIXTURES / "stores" / "inspect-solver-a-imported-at-30e451f.sqlite", store)
    before = _current(store)
    assert [r[0] for r in before] == ["q1", "q2", "q3"]  # readable as it was
    log = tmp_path / "a.eval"
    shutil.copy(INSPECT / "inspect-0.3.285-solver-a.eval", log)
    done = _import(log, "--run", store)
    assert done.exit_code == 0, done.output
    assert "3 rows of the earlier import under older item names are now history" in " ".join(done.output.split())
    rows = _current(store, history=True)
    assert [r for r in rows if r[4]] == [(f"q{i}|mockllm/solver-a", *r[1:4], True) for i, r in enumerate(before, 1)]
    assert [r for r in rows if not r[4]] == [(*r[:4], False) for r in before]
    with Run(store, create=False) as run:
        entry = run.meta()["imports"][-1]
    assert entry["reimport_of"] == ["a.eval"] and entry["retired"] == 3


def test_reimport_of_the_same_file_by_another_path_replaces_and_says_so(tmp_path, monkeypatch):
    store = tmp_path / "r.sqlite"
    shutil.copy(PROMPTFOO / "promptfoo-0.120.0-solver-a.json", tmp_path / "pf.json")
    monkeypatch.chdir(tmp_path)
    assert _import("pf.json", "--run", store).exit_code == 0
    (tmp_path / "sub").mkdir()
    again = _import(Path("sub") / ".." / "pf.json", "--run", store)
    assert again.exit_code == 0
    assert "re-import of" in again.output and "3 rows replaced" in " ".join(again.output.split())
    with Run(store, create=False) as run:
        imports = run.meta()["imports"]
        sources = {r.result["imported_from"] for r in run.results()}
    assert sources == {str(tmp_path / "pf.json")}  # one absolute path, however it was typed
    assert [i["file"] for i in imports] == [str(tmp_path / "pf.json")] * 2 and imports[1]["replaced"] == 3
    assert len(_current(store, history=True)) == 3


# --- 2. DeepEval span-level metrics --------------------------------------------------------------------------------
def test_deepeval_span_metrics_are_imported_per_span():
    path = DEEPEVAL / "deepeval-4.3.1-spans.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    expected = sorted((case["name"], m["name"], f"span:{span['name']}", m["evaluationModel"], m["score"])
                      for case in doc["testCases"] for span in case["trace"]["llmSpans"] for m in span["metricsData"])
    assert len(expected) == sum(len(e["scores"]) for e in doc["metricsScores"]) == 3
    imported = read_foreign(path)
    assert sorted((r.item_id, r.judge, r.part, r.model, r.score) for r in imported.results) == expected


def test_deepeval_error_is_an_abstention_and_counts_match():
    imported = read_foreign(DEEPEVAL / "deepeval-4.3.1-solver-b.json")
    (failed,) = [r for r in imported.results if r.status == "abstained"]
    assert failed.item_id == "q3|solver-b" and "HTTP 500" in failed.reason
    own = imported.summary["metricsScores"]["Correctness [GEval]"]
    assert (own["scores"], own["errors"]) == (2, 1) == (len(imported.results) - 1, imported.n_abstained)


# --- 3. inspect_ai logs of 0.3.58 and before -----------------------------------------------------------------------
@pytest.mark.parametrize("name", ["inspect-0.3.58-solver-a.json", "inspect-0.3.58-solver-a.eval"])
def test_old_inspect_logs_are_recognised_and_their_grader_found(name, tmp_path):
    if name.endswith(".eval"):
        pytest.importorskip("inspect_ai")
    path = INSPECT / name
    assert sniff_format(path) == "inspect"
    store = tmp_path / "r.sqlite"
    done = _import(path, "--run", store)
    assert done.exit_code == 0, done.output
    assert _current(store) == [(f"q{i + 1}|mockllm/solver-a", "model_graded_fact", "mockllm/grader", GRADE[g], True)
                               for i, g in enumerate(INSPECT_GRADES["solver-a"])]


def test_old_inspect_json_log_is_read_without_inspect_ai(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "inspect_ai", None)
    monkeypatch.setitem(sys.modules, "inspect_ai.log", None)
    from scijudge.importers.inspect_ai import read_inspect

    imported = read_inspect(INSPECT / "inspect-0.3.58-solver-b.json")
    assert imported.summary["reader"] == "json" and imported.skipped == {"match": 3}
    assert [(r.model, r.score) for r in imported.results] == [
        ("mockllm/grader", GRADE[g]) for g in INSPECT_GRADES["solver-b"]]


# --- 4. promptfoo failed gradings, per-test graders, JSONL output ----------------------------------------------------
def test_promptfoo_failed_grading_is_an_abstention_with_the_assertion_type(tmp_path):
    path = PROMPTFOO / "promptfoo-0.120.0-solver-b.json"
    cell = json.loads(path.read_text(encoding="utf-8"))["results"]["results"][1]
    component = cell["gradingResult"]["componentResults"][0]
    assert component.get("assertion") is None and component["score"] == 0 and "graderError" not in component["metadata"]
    for extra in ([], ["--all-scorers"]):
        imported = read_foreign(path, include_deterministic=bool(extra))
        (failed,) = [r for r in imported.results if r.status == "abstained"]
        assert (failed.item_id, failed.judge, failed.score) == ("q2|openai:chat:solver-b", "correctness", None)
        assert failed.result["assertion_type"] == "llm-rubric" and "Could not extract JSON" in failed.reason
        assert not [r for r in imported.results if r.judge == "assertion"]


def test_promptfoo_grader_set_on_one_test_is_named():
    imported = read_foreign(PROMPTFOO / "promptfoo-0.120.0-solver-a.json")
    graders = {r.item_id.split("|")[0]: r.model for r in imported.results}
    assert graders == {"q1": "openai:chat:grader", "q2": "openai:chat:grader", "q3": "openai:chat:grader-2"}


def test_promptfoo_jsonl_output_reads_like_the_json_output():
    lines = PROMPTFOO / "promptfoo-0.120.0-two-providers.jsonl"
    assert sniff_format(lines) == "promptfoo"
    from_lines = read_foreign(lines)
    from_files = [read_foreign(PROMPTFOO / f"promptfoo-0.120.0-{s}.json") for s in ("solver-a", "solver-b")]
    assert not from_lines.errors
    assert sorted((r.item_id, r.judge, r.model, r.score, r.status) for r in from_lines.results) == sorted(
        (r.item_id, r.judge, r.model, r.score, r.status) for f in from_files for r in f.results)
    assert [r.result["line"] for r in from_lines.results] == [1, 2, 3, 4, 5, 6]


# --- 8. damaged and unknown files: one line each --------------------------------------------------------------------
def _damaged_files(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    log = (INSPECT / "inspect-0.3.58-solver-a.json").read_bytes()
    out = {"truncated eval": (tmp_path / "cut.eval", "zip archive that cannot be opened"),
           "other zip": (tmp_path / "other.zip", "not an inspect_ai .eval log"),
           # inspect_ai's own reader names the log; without the interop extra it is read as plain JSON (one line
           # naming the file's line either way)
           "truncated json": (tmp_path / "cut.json",
                              "cannot be read" if importlib.util.find_spec("inspect_ai") else "not valid JSON"),
           "empty": (tmp_path / "empty.json", "empty file")}
    out["truncated eval"][0].write_bytes((INSPECT / "inspect-0.3.58-solver-a.eval").read_bytes()[:3000])
    with zipfile.ZipFile(out["other zip"][0], "w") as archive:
        archive.writestr("data.csv", "a,b\n")
    out["truncated json"][0].write_bytes(log[: len(log) // 2])
    out["empty"][0].write_bytes(b"")
    return out


def test_damaged_files_are_one_line_not_a_bad_row_per_line(tmp_path):
    for name, (path, message) in _damaged_files(tmp_path).items():
        done = _import(path, "--run", tmp_path / f"{path.stem}.sqlite")
        out = " ".join(done.output.split())
        assert done.exit_code == 2 and message in out and "bad row" not in out, (name, done.output)
        assert len(done.output.strip().splitlines()) <= 3 and "Traceback" not in done.output
        assert not (tmp_path / f"{path.stem}.sqlite").exists()


def test_unknown_versions_are_refused(tmp_path):
    pytest.importorskip("inspect_ai")
    source = INSPECT / "inspect-0.3.285-solver-a.eval"
    future = tmp_path / "future.eval"
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(future, "w") as new:
        for member in old.namelist():
            data = old.read(member)
            if member == "header.json":
                data = json.dumps({**json.loads(data), "version": 99}).encode()
            new.writestr(member, data)
    with pytest.raises(InputError, match="inspect_ai log version 99"):
        read_foreign(future)
    doc = json.loads((PROMPTFOO / "promptfoo-0.120.0-solver-a.json").read_text(encoding="utf-8"))
    doc["results"]["version"] = 99
    (tmp_path / "pf.json").write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(InputError, match="promptfoo results version 99"):
        read_foreign(tmp_path / "pf.json")


def test_from_names_the_format_expected_and_what_was_found(tmp_path):
    """35.15: ``--from inspect`` on a JSONL file said 'Extra data'."""
    lines = tmp_path / "x.jsonl"
    lines.write_text('{"item_id": "a", "judge": "j", "model": "m", "score": 3}\n' * 2, encoding="utf-8")
    done = _import(lines, "--run", tmp_path / "r.sqlite", "--from", "inspect")
    out = " ".join(done.output.split())
    assert done.exit_code == 2 and "Extra data" not in out
    assert "--from inspect expects an inspect_ai log" in out and "found JSON Lines" in out
    pf = _import(PROMPTFOO / "promptfoo-0.120.0-solver-a.json", "--run", tmp_path / "r.sqlite", "--from", "deepeval")
    assert pf.exit_code == 2 and "found a promptfoo output file" in " ".join(pf.output.split())


def test_bad_rows_name_the_file_line(tmp_path):
    text = (PROMPTFOO / "promptfoo-0.120.0-two-providers.jsonl").read_text(encoding="utf-8").splitlines()
    text.insert(2, "")
    text.insert(5, "{not json")
    path = tmp_path / "pf.jsonl"
    path.write_text("\n".join(text) + "\n", encoding="utf-8")
    imported = read_foreign(path)
    assert [(e.line, "not valid JSON" in str(e)) for e in imported.errors] == [(6, True)]
    lines = {r.result["line"] for r in imported.results}
    assert lines == {1, 2, 4, 5, 7, 8}  # file lines: the blank line 3 and the bad line 6 counted


def test_store_files_stay_untouched_by_reading(tmp_path):
    store = tmp_path / "old.sqlite"
    shutil.copy(FIXTURES / "stores" / "inspect-solver-a-imported-at-30e451f.sqlite", store)
    data = store.read_bytes()
    with Run(store, create=False) as run:
        assert len(run.results()) == 3
    assert store.read_bytes() == data and sqlite3.connect(store).execute("PRAGMA quick_check").fetchone() == ("ok",)


# --- issue 35.11: a score off its judge's scale is refused at import, by line ----------------------------------------
def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_a_score_off_the_judges_scale_is_a_bad_row_with_its_line(tmp_path):
    rows = [{"item_id": "a", "judge": "coh", "model": "m", "score": 3, "family": "likert"},
            {"item_id": "b", "judge": "coh", "model": "m", "score": 7, "family": "likert"},
            {"item_id": "c", "judge": "frac", "model": "m", "score": 0.25},
            {"item_id": "d", "judge": "frac", "model": "m", "score": 0.5}]
    path, store = _jsonl(tmp_path / "j.jsonl", rows), tmp_path / "r.sqlite"
    done = CliRunner().invoke(app, ["import-judgments", str(path), "--run", str(store), "--scale", "frac=0,1,0.5"])
    out = " ".join(done.output.split())
    assert done.exit_code == 1
    assert f"{path}:2, field 'score': score 7 is outside the scale 1..5 step 1 of judge 'coh' (family 'likert')" in out
    assert f"{path}:3, field 'score': score 0.25 is outside the scale 0..1 step 0.5 of judge 'frac'" in out
    with Run(store, create=False) as run:
        assert sorted(r.item_id for r in run.results()) == ["a", "d"]
        assert run.meta()["scales"] == {"frac": [0.0, 1.0, 0.5]}  # recorded: the next import is checked too
    again = CliRunner().invoke(app, ["import-judgments", str(_jsonl(tmp_path / "k.jsonl", [
        {"item_id": "e", "judge": "frac", "model": "m", "score": 2}])), "--run", str(store)])
    assert again.exit_code == 2 and "the run store's recorded scale" in " ".join(again.output.split())


def test_a_judge_without_a_declared_scale_gets_a_note_not_a_refusal(tmp_path):
    path = _jsonl(tmp_path / "j.jsonl", [{"item_id": "a", "judge": "coh", "model": "m", "score": 3},
                                         {"item_id": "b", "judge": "coh", "model": "m", "score": 7}])
    done = CliRunner().invoke(app, ["import-judgments", str(path), "--run", str(tmp_path / "r.sqlite")])
    out = " ".join(done.output.split())
    assert done.exit_code == 0 and "2 judgments" in out
    assert "no declared scale for 'coh' (1 scores, first on line 2: 7)" in out and "--scale" in out


# --- 6 and 9. lm-eval corpus-level metrics; the results file is recorded with its hash --------------------------
LM_EVAL = FIXTURES / "lm_eval"


def test_lm_eval_corpus_level_metrics_are_skipped_with_a_count(tmp_path):
    import hashlib

    (gen,) = LM_EVAL.glob("samples_sci_gen_*.jsonl")
    (results,) = LM_EVAL.glob("results_*.json")
    lines = [json.loads(line) for line in gen.read_text(encoding="utf-8").splitlines()]
    assert all(isinstance(line["bleu"], list) for line in lines)  # lm-eval stores (reference, prediction) pairs
    store = tmp_path / "r.sqlite"
    done = _import(gen, "--run", store)
    assert done.exit_code == 0, done.output
    assert "'sci_gen/bleu (corpus-level)': 3" in done.output and "bad rows" in done.output
    model = json.loads(results.read_text(encoding="utf-8"))["model_name"]
    assert _current(store) == sorted((f"sci_gen:{line['doc_id']}", "sci_gen/exact_match", model,
                                      float(line["exact_match"]), True) for line in lines)
    with Run(store, create=False) as run:
        (entry,) = run.meta()["imports"]
    assert entry["companions"] == [{"file": str(results.resolve()), "role": "model name",
                                    "sha256": hashlib.sha256(results.read_bytes()).hexdigest()}]
    (ppl,) = LM_EVAL.glob("samples_sci_ppl_*.jsonl")
    only_corpus = _import(ppl, "--run", tmp_path / "p.sqlite")
    out = " ".join(only_corpus.output.split())
    assert only_corpus.exit_code == 2 and "'sci_ppl/bits_per_byte (corpus-level)': 3" in out and "not a number" not in out


def test_an_abstention_reason_names_the_file_line_not_the_ordinal(tmp_path):
    text = (PROMPTFOO / "promptfoo-0.120.0-two-providers.jsonl").read_text(encoding="utf-8").splitlines()
    cell = json.loads(text[0])
    cell["gradingResult"]["componentResults"][0].update(score=None, metadata={})
    text[0] = json.dumps(cell)
    path = tmp_path / "pf.jsonl"
    path.write_text("\n\n" + "\n".join(text) + "\n", encoding="utf-8")  # the first result is on file line 3
    (abstained,) = [r for r in read_foreign(path).results if r.status == "abstained" and r.result["line"] == 3]
    assert f"{path} line 3 (line 3.gradingResult.componentResults[0])" in abstained.reason


@pytest.mark.slow  # a fresh interpreter imports inspect_ai (seconds)
def test_a_current_eval_log_imports_in_a_fresh_process(tmp_path):
    """The .eval members of inspect_ai 0.3.285 are zstd-compressed, which the standard zipfile opens only after
    inspect_ai is imported: in a fresh process (the CLI) the version check must not need it."""
    import subprocess
    import sys

    pytest.importorskip("inspect_ai")
    done = subprocess.run([sys.executable, "-m", "scijudge", "import-judgments",
                           str(INSPECT / "inspect-0.3.285-solver-a.eval"), "--run", str(tmp_path / "r.sqlite")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "inspect: 3 judgments" in done.stdout, done.stderr[-2000:]
