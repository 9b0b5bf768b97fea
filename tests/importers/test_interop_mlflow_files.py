"""MLflow as people use it: ``mlflow.genai.evaluate`` with code scorers, human overrides, round trips, bad URIs.

Every assessment here is written by MLflow's own public API (``genai.evaluate``, ``log_feedback``,
``override_feedback``) or by ``export --to mlflow``; expected values come from the data given to MLflow.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

pytestmark = pytest.mark.slow  # a fresh tracking store migrates its schema (seconds)

mlflow = pytest.importorskip("mlflow", reason="mlflow is not installed: pip install -e '.[interop]'")

from scijudge.cli import app  # noqa: E402
from scijudge.errors import InputError  # noqa: E402
from scijudge.records import JudgeResult  # noqa: E402
from scijudge.run.store import Run  # noqa: E402

ANSWERS = ["100", "x", "100"]  # genai.evaluate data: outputs; the expectation is "100"


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    out = tmp_path_factory.mktemp("mlflow")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(out)  # MLflow puts trace artifacts under ./mlruns of the working directory
        patch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
        patch.setenv("DO_NOT_TRACK", "true")
        yield out


@pytest.fixture(scope="module")
def uri(folder):
    return f"sqlite:///{folder / 'mlflow.db'}"


def _fluent(uri, fn):
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(uri)
    try:
        return fn()
    finally:
        mlflow.set_tracking_uri(previous)


def _import(*args):
    return CliRunner().invoke(app, ["import-judgments", "--from", "mlflow", *map(str, args)])


def test_genai_evaluate_code_scorers_and_booleans(uri, tmp_path):
    from mlflow.genai.scorers import scorer

    @scorer
    def exact(outputs, expectations) -> bool:
        return outputs == expectations["expected"]

    @scorer
    def length(outputs) -> int:
        return len(outputs)

    def run():
        mlflow.set_experiment("genai")
        data = [{"inputs": {"q": f"q{i}"}, "outputs": a, "expectations": {"expected": "100"}}
                for i, a in enumerate(ANSWERS)]
        mlflow.genai.evaluate(data=data, scorers=[exact, length])

    _fluent(uri, run)
    plain = _import("--tracking-uri", uri, "--experiment", "genai", "--run", tmp_path / "a.sqlite")
    assert plain.exit_code == 2 and "'exact': 3" in plain.output and "--all-scorers keeps them" in plain.output
    done = _import("--tracking-uri", uri, "--experiment", "genai", "--run", tmp_path / "b.sqlite", "--all-scorers")
    assert done.exit_code == 0, done.output
    assert "6 judgments" in done.output and "0 bad rows" in done.output
    with Run(tmp_path / "b.sqlite", create=False) as run:
        rows = run.results()
        scales = run.meta()["scales"]
    assert sorted(r.score for r in rows if r.judge == "exact") == sorted(float(a == "100") for a in ANSWERS)
    assert sorted(r.score for r in rows if r.judge == "length") == sorted(float(len(a)) for a in ANSWERS)
    assert scales["exact"] == [0.0, 1.0, 1.0]


def test_round_trip_keeps_the_judges_scale(uri, tmp_path):
    """A 0/0.5/1 judge that gave only 0 and 1 comes back on 0/0.5/1, so calibrate takes a label of 0.5."""
    store, back, labels = tmp_path / "s.sqlite", tmp_path / "back.sqlite", tmp_path / "labels.jsonl"
    with Run(store) as run:
        for i, score in enumerate([0.0, 1.0, 1.0, 0.0]):
            run.record(JudgeResult(item_id=f"i{i}", judge="half", family="imported", spec_hash="imported",
                                   model="m", status="ok", score=score))
        run.set_meta(scales={"half": [0.0, 1.0, 0.5]})
    out = CliRunner().invoke(app, ["export", str(store), "--to", "mlflow", "--tracking-uri", uri,
                                   "--experiment", "scales"])
    assert out.exit_code == 0, out.output
    assert _import("--tracking-uri", uri, "--experiment", "scales", "--run", back).exit_code == 0
    with Run(back, create=False) as run:
        assert run.meta()["scales"]["half"] == [0.0, 1.0, 0.5]
    labels.write_text("".join(json.dumps({"item_id": f"i{i}", "judge": "half", "score": s, "annotator": "a"}) + "\n"
                              for i, s in enumerate([0.5, 1.0, 0.5, 0.0])), encoding="utf-8")
    calibrated = CliRunner().invoke(app, ["calibrate", "--labels", str(labels), "--run", str(back), "--n-boot", "50"])
    assert calibrated.exit_code == 0, calibrated.output


def test_an_override_is_the_one_label_kept(uri, tmp_path):
    from mlflow.entities import AssessmentSource, AssessmentSourceType

    from scijudge.importers.mlflow import export_to_mlflow

    export_to_mlflow([JudgeResult(item_id="q1", judge="correctness", family="imported", spec_hash="imported",
                                  model="judge-model", status="ok", score=1.0)], uri, "override", run_tag="o")
    client = mlflow.MlflowClient(uri)
    experiment_id = client.get_experiment_by_name("override").experiment_id
    (trace,) = client.search_traces(locations=[experiment_id], include_spans=False)
    (judged,) = trace.info.assessments
    person = AssessmentSource(source_type=AssessmentSourceType.HUMAN, source_id="ann1")

    def annotate():
        mlflow.log_feedback(trace_id=trace.info.trace_id, name="correctness", value=0.0, source=person)
        mlflow.override_feedback(trace_id=trace.info.trace_id, assessment_id=judged.assessment_id, value=0.5,
                                 source=person, rationale="half right")

    _fluent(uri, annotate)
    labels = tmp_path / "labels.jsonl"
    done = _import("--tracking-uri", uri, "--experiment", "override", "--run", tmp_path / "r.sqlite",
                   "--labels-out", labels)
    assert done.exit_code == 0, done.output
    (label,) = [json.loads(line) for line in labels.read_text(encoding="utf-8").splitlines()]
    assert (label["item_id"], label["annotator"], label["score"]) == ("q1", "ann1", 0.5)


def test_a_failed_export_leaves_nothing_and_can_be_retried(uri, tmp_path, monkeypatch):
    from mlflow.tracing.client import TracingClient

    from scijudge.importers.mlflow import export_to_mlflow

    results = [JudgeResult(item_id=f"i{i}", judge="j", family="imported", spec_hash="imported", model="m",
                           status="ok", score=1.0) for i in range(5)]
    real, calls = TracingClient.start_trace, []

    def failing(self, trace_info):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("disk I/O error")
        return real(self, trace_info)

    monkeypatch.setattr(TracingClient, "start_trace", failing)
    with pytest.raises(InputError, match="failed after 0 of 5 traces: disk I/O error; none of this run's traces"):
        export_to_mlflow(results, uri, "retry", run_tag="r")
    monkeypatch.setattr(TracingClient, "start_trace", real)
    done = export_to_mlflow(results, uri, "retry", run_tag="r")  # not "already holds this run"
    assert done["traces"] == 5


def test_bad_tracking_uris_are_one_line_and_create_nothing(folder, tmp_path, monkeypatch):
    store = tmp_path / "s.sqlite"
    with Run(store) as run:
        run.record(JudgeResult(item_id="a", judge="j", family="imported", spec_hash="imported", model="m",
                               status="ok", score=1.0))
    runner = CliRunner()
    for uri in ("bogus://x", f"file://{tmp_path / 'mlruns'}"):
        out = runner.invoke(app, ["export", str(store), "--to", "mlflow", "--tracking-uri", uri, "--experiment", "e"])
        assert out.exit_code == 2 and "Traceback" not in out.output, out.output
        assert "cannot open the MLflow tracking store" in out.output and len(out.output.strip().splitlines()) <= 3
    typo = tmp_path / "no-such-folder" / "mlfow.db"
    read = _import("--tracking-uri", f"sqlite:///{typo}", "--experiment", "e", "--run", tmp_path / "r.sqlite")
    assert read.exit_code == 2 and "no MLflow database at" in read.output
    assert not typo.parent.exists() and not (tmp_path / "r.sqlite").exists()


def test_a_file_store_takes_the_documented_path(tmp_path, monkeypatch):
    from scijudge.importers.mlflow import export_to_mlflow, read_mlflow

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    uri = f"file://{tmp_path / 'mlruns'}"
    results = [JudgeResult(item_id=f"i{i}", judge="j", family="imported", spec_hash="imported", model="m",
                           status="ok", score=float(i)) for i in range(3)]
    done = export_to_mlflow(results, uri, "files", run_tag="f")
    assert done["writer"] == "public" and done["traces"] == 3
    back = read_mlflow(uri, "files")
    assert sorted((r.item_id, r.score) for r in back.results) == [(r.item_id, r.score) for r in results]


def test_a_judge_without_a_recorded_scale_exports_its_family_scale(uri, tmp_path):
    store, back = tmp_path / "s.sqlite", tmp_path / "back.sqlite"
    with Run(store) as run:
        for i, score in enumerate([1.0, 5.0]):  # only the ends of 1..5 were used: inference would say 0..5
            run.record(JudgeResult(item_id=f"i{i}", judge="lik", family="likert", spec_hash="unknown-spec",
                                   model="m", status="ok", score=score))
    out = CliRunner().invoke(app, ["export", str(store), "--to", "mlflow", "--tracking-uri", uri,
                                   "--experiment", "family"])
    assert out.exit_code == 0, out.output
    assert _import("--tracking-uri", uri, "--experiment", "family", "--run", back).exit_code == 0
    with Run(back, create=False) as run:
        assert run.meta()["scales"]["lik"] == [1.0, 5.0, 1.0]
