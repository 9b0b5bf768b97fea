"""inspect_ai logs made here by inspect_ai itself (its mock model, offline) are imported and calibrated.

The solver and the graders are ``mockllm`` models with scripted outputs; ``model_graded_qa`` (partial credit,
grader bound to the ``grader`` role) and ``model_graded_fact`` (an explicit grader model) grade the answers. The
expected counts are the log's own ``results`` (written by inspect), the expected agreement figures are computed
here with numpy and scikit-learn from the grades scripted below.
"""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys

import numpy as np
import pytest

pytestmark = pytest.mark.slow  # an inspect eval takes seconds

try:
    import inspect_ai
except ImportError:  # skipped by the mark below (failed where CI requires the extra)
    inspect_ai = None

pytestmark = pytest.mark.needs_extra("inspect_ai")

# id, question, target, the solver's answer, the grader's grade ("GARBAGE": no grade -> unscored)
SAMPLES = [
    ("q1", "What is the boiling point of water at sea level in Celsius?", "100", "100 degrees", "C"),
    ("q2", "What is the chemical symbol of sodium?", "Na", "So", "I"),
    ("q3", "Name two noble gases.", "helium and neon", "helium", "P"),
    ("q4", "What is 2+2?", "4", "four", "C"),
    ("q5", "Speed of light in vacuum (km/s, approx)?", "300000", "I refuse", "GARBAGE"),
]
QA_SCORE = {"C": 1.0, "P": 0.5, "I": 0.0}  # inspect's value_to_float for model_graded_qa(partial_credit=True)
HUMAN = {"q1": 1.0, "q2": 0.0, "q3": 1.0, "q4": 0.5, "q5": 0.0}


@pytest.fixture(scope="module")
def offline_tiktoken():
    """Test-only stand-in for tiktoken's downloaded o200k_base encoding (mockllm counts tokens with it).

    A byte-level Encoding put into tiktoken's registry cache: ``get_encoding`` returns it and never downloads.
    """
    pytest.importorskip("tiktoken")
    import tiktoken.registry

    encoding = tiktoken.Encoding(name="o200k_base", pat_str=r"\S+|\s+",
                                 mergeable_ranks={bytes([i]): i for i in range(256)}, special_tokens={})
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(tiktoken.registry.ENCODINGS, "o200k_base", encoding)
        yield encoding


@pytest.fixture(scope="module")
def inspect_logs(tmp_path_factory, offline_tiktoken):
    """One real .eval and one real .json log of the same task."""
    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ModelOutput, get_model
    from inspect_ai.scorer import model_graded_fact, model_graded_qa
    from inspect_ai.solver import generate

    out = tmp_path_factory.mktemp("inspect")
    by_question = {q: (answer, grade) for _, q, _, answer, grade in SAMPLES}

    def _find(text):
        return next((v for q, v in by_question.items() if q in text), ("?", "I"))

    def solver(input, tools, tool_choice, config):
        return ModelOutput.from_content(model="mockllm/model", content=_find(input[-1].text)[0])

    def grader(input, tools, tool_choice, config):
        grade = _find(input[-1].text)[1]
        body = "The submission was compared with the criterion.\n" + (
            f"GRADE: {grade}" if grade != "GARBAGE" else "I cannot decide.")
        return ModelOutput.from_content(model="mockllm/grader", content=body)

    task = Task(name="sci_qa", dataset=[Sample(id=i, input=q, target=t) for i, q, t, _, _ in SAMPLES],
                solver=generate(),
                scorer=[model_graded_qa(partial_credit=True),
                        model_graded_fact(model=get_model("mockllm/fact-grader", custom_outputs=grader),
                                          model_role=None)])
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_DATA_HOME", str(out / "xdg"))  # inspect keeps traces and buffers under the data dir
        patch.setenv("INSPECT_LOG_DIR", str(out))
        logs = {}
        for fmt in ("eval", "json"):
            (log,) = eval(task, model=get_model("mockllm/model", custom_outputs=solver),
                          model_roles={"grader": get_model("mockllm/grader", custom_outputs=grader)},
                          log_dir=str(out / fmt), log_format=fmt, display="none")
            assert log.status == "success", log.error
            logs[fmt] = next((out / fmt).glob(f"*.{fmt}"))
    return logs


@pytest.mark.parametrize("fmt", ["eval", "json"])
def test_counts_and_means_equal_the_logs_own_results(inspect_logs, fmt):
    from scijudge.importers.inspect_ai import read_inspect
    from scijudge.importers.sniff import sniff_format

    path = inspect_logs[fmt]
    assert sniff_format(path) == "inspect"
    imported = read_inspect(path)
    assert imported.summary["reader"] == "inspect_ai" and not imported.errors
    assert {r.model for r in imported.results if r.judge == "model_graded_qa"} == {"mockllm/grader"}
    assert {r.model for r in imported.results if r.judge == "model_graded_fact"} == {"mockllm/fact-grader"}
    for name, own in imported.summary["scorers"].items():
        mine = [r for r in imported.results if r.judge == name]
        scored = [r.score for r in mine if r.status == "ok"]
        assert (len(scored), len(mine) - len(scored)) == (own["scored"], own["unscored"])
        assert math.isclose(statistics.fmean(scored), own["metrics"]["accuracy"])
    assert {r.item_id.split("|")[1] for r in imported.results} == {"mockllm/model"}  # the solver answered
    qa = {r.result["sample_id"]: r for r in imported.results if r.judge == "model_graded_qa"}
    assert {i: r.score for i, r in qa.items() if r.score is not None} == {
        i: QA_SCORE[g] for i, *_, g in SAMPLES if g in QA_SCORE}
    assert qa["q5"].status == "abstained" and "Grade not found" in qa["q5"].reason
    assert "GRADE: C" in qa["q1"].rationale
    assert qa["q1"].result["imported_from"] == str(path) and len(qa["q1"].result["sha256"]) == 64
    assert imported.scales["model_graded_qa"] == [0.0, 1.0, 0.5]


def test_imported_log_is_calibrated_against_labels(inspect_logs, tmp_path):
    """import-judgments (content recognised) then scijudge.calibrate and the calibrate command."""
    from sklearn.metrics import cohen_kappa_score
    from typer.testing import CliRunner

    import scijudge
    from scijudge.cli import app
    from scijudge.labels import labels_to_frame, load_labels
    from scijudge.run.store import Run

    store, labels_path = tmp_path / "inspect.sqlite", tmp_path / "labels.jsonl"
    labels_path.write_text("".join(json.dumps({"item_id": f"{i}|mockllm/model", "judge": "model_graded_qa", "score": s,
                                               "annotator": "a1"}) + "\n" for i, s in HUMAN.items()), encoding="utf-8")
    done = CliRunner().invoke(app, ["import-judgments", str(inspect_logs["eval"]), "--run", str(store)])
    assert done.exit_code == 0, done.output
    assert "inspect: 10 judgments" in done.output and "model_graded_qa: 4 scored, 1 unscored" in done.output
    with Run(store, create=False) as run:
        frame = run.to_pandas()
        scale = run.meta()["scales"]["model_graded_qa"]
    frame = frame[frame["judge"] == "model_graded_qa"]
    result = scijudge.calibrate(frame, labels_to_frame(load_labels(labels_path)), scale=tuple(scale), n_boot=200)
    row = result.per_rubric.set_index("judge").loc["model_graded_qa"]
    pairs = [(QA_SCORE[g], HUMAN[i]) for i, *_, g in SAMPLES if g in QA_SCORE]
    judge, human = np.array(pairs).T
    assert row["n"] == len(pairs) == 4
    assert row["exact"] == pytest.approx(np.mean(judge == human))
    assert row["mae"] == pytest.approx(np.mean(np.abs(judge - human)))
    assert row["kappa_w"] == pytest.approx(cohen_kappa_score((human * 2).astype(int), (judge * 2).astype(int),
                                                             labels=[0, 1, 2], weights="quadratic"))
    cli = CliRunner().invoke(app, ["calibrate", "--labels", str(labels_path), "--run", str(store), "--n-boot", "100"])
    assert cli.exit_code == 0, cli.output
    assert "model_graded_qa" in cli.output


def test_bad_score_value_is_named_by_position(inspect_logs, tmp_path):
    from scijudge.importers.inspect_ai import read_inspect

    doc = json.loads(inspect_logs["json"].read_text(encoding="utf-8"))
    doc["samples"][1]["scores"]["model_graded_qa"]["value"] = True
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    imported = read_inspect(path)
    (error,) = imported.errors
    assert error.field == "samples[1].scores.model_graded_qa" and "boolean" in str(error)
    assert len(imported.results) == 9


def test_json_log_reads_without_inspect_ai(inspect_logs):
    """A .json log needs only the standard library: same judgments with inspect_ai blocked from importing."""
    code = ("import sys; sys.modules['inspect_ai'] = None; sys.modules['inspect_ai.log'] = None\n"
            "from scijudge.importers.inspect_ai import read_inspect\n"
            f"out = read_inspect({str(inspect_logs['json'])!r})\n"
            "print(out.summary['reader'], len(out.results), out.n_abstained, "
            "sorted((r.item_id, r.judge, r.score) for r in out.results if r.score is not None))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    reader, rest = done.stdout.split(" ", 1)
    from scijudge.importers.inspect_ai import read_inspect

    full = read_inspect(inspect_logs["json"])
    expected = sorted((r.item_id, r.judge, r.score) for r in full.results if r.score is not None)
    assert reader == "json" and rest.strip() == f"{len(full.results)} {full.n_abstained} {expected}"
