"""MLflow round trip on a local SQLite tracking store: judgments out as assessments and back, human ones as labels.

Expected values are the judgments written here; human and foreign assessments are logged with MLflow's own public
API (``mlflow.log_feedback`` / ``MlflowClient.start_trace``), as a person or another tool would.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow  # a fresh tracking store migrates its schema (seconds)

try:
    import mlflow
except ImportError:  # skipped by the mark below (failed where CI requires the extra)
    mlflow = None

pytestmark = pytest.mark.needs_extra("mlflow")

from scijudge.errors import InputError  # noqa: E402
from scijudge.records import JudgeResult  # noqa: E402


def judgments() -> list[JudgeResult]:
    common = {"family": "likert", "spec_hash": "abc123", "judge": "yescieval.qa.correctness"}
    out = [JudgeResult(item_id=f"i{i}", model="openai/gpt-4o-mini", status="ok", score=float(i % 5 + 1),
                       rationale=f"because {i}", **common) for i in range(6)]
    out.append(JudgeResult(item_id="i6", model="openai/gpt-4o-mini", status="abstained", reason="content filter",
                           **common))
    out.append(JudgeResult(item_id="i1", model="anthropic/claude", status="ok", score=2.0, rationale="other model",
                           **common))
    out.append(JudgeResult(item_id="i2", judge="researchrubrics.checklist", part="c0a1b2c3d4", family="checklist",
                           spec_hash="def", model="openai/gpt-4o-mini", status="ok", verdict="Satisfied",
                           rationale="covers it"))
    return out


def _key(r):
    return (r.item_id, r.judge, r.part, r.model)


@pytest.fixture(scope="module")
def tracking_uri(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mlflow")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)  # MLflow puts trace artifacts under ./mlruns of the working directory
        patch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
        patch.setenv("DO_NOT_TRACK", "true")
        yield f"sqlite:///{folder / 'mlflow.db'}"


@pytest.mark.parametrize("fast", [True, False])
def test_round_trip_gives_identical_judgments(tracking_uri, fast):
    from scijudge.importers.mlflow import export_to_mlflow, read_mlflow

    sent = judgments()
    experiment = f"round-trip-{fast}"
    done = export_to_mlflow(sent, tracking_uri, experiment, run_tag="runs/qa.sqlite", fast=fast)
    assert (done["judgments"], done["traces"], done["abstained"]) == (9, 7, 1)
    back = read_mlflow(tracking_uri, experiment)
    assert not back.errors and not back.labels
    assert {_key(r): (r.status, r.score, r.verdict, r.rationale) for r in back.results} == {
        _key(r): (r.status, r.score, r.verdict, r.rationale) for r in sent}
    abstained = next(r for r in back.results if r.status == "abstained")
    assert abstained.reason == "content filter"
    assert back.summary["traces"] == 7
    first = back.results[0].result
    assert first["imported_from"] == f"mlflow:{tracking_uri}#{experiment}" and first["trace_id"].startswith("tr-")
    with pytest.raises(InputError, match="already holds this run"):
        export_to_mlflow(sent, tracking_uri, experiment, run_tag="runs/qa.sqlite", fast=fast)


def test_human_assessments_arrive_as_labels_and_foreign_traces_are_read(tracking_uri):
    from mlflow.entities import AssessmentSource, AssessmentSourceType

    from scijudge.importers.mlflow import export_to_mlflow, read_mlflow

    experiment = "with-humans"
    export_to_mlflow(judgments()[:3], tracking_uri, experiment, run_tag="r")
    client = mlflow.MlflowClient(tracking_uri)
    experiment_id = client.get_experiment_by_name(experiment).experiment_id
    traces = {t.info.tags["scijudge.item_id"]: t.info.trace_id
              for t in client.search_traces(locations=[experiment_id], include_spans=False)}
    human = AssessmentSource(source_type=AssessmentSourceType.HUMAN, source_id="ann1")
    judge = AssessmentSource(source_type=AssessmentSourceType.LLM_JUDGE, source_id="openai/gpt-4o")
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(tracking_uri)  # MLflow's fluent logging API writes to the process-wide URI
    try:
        mlflow.log_feedback(trace_id=traces["i0"], name="yescieval.qa.correctness", value=4, source=human,
                            rationale="solid")
        mlflow.log_feedback(trace_id=traces["i1"], name="yescieval.qa.correctness", value=2, source=human)
        mlflow.log_feedback(trace_id=traces["i2"], name="is_correct", value=True, source=judge)  # @scorer -> bool
        mlflow.log_expectation(trace_id=traces["i0"], name="yescieval.qa.coherence", value=3, source=human)
        mlflow.log_expectation(trace_id=traces["i1"], name="expected_response", value="Na", source=human)
        foreign = client.start_trace(name="app", inputs={"q": "?"}, experiment_id=experiment_id)
        client.end_trace(foreign.trace_id)
        mlflow.flush_trace_async_logging()
        mlflow.log_feedback(trace_id=foreign.trace_id, name="relevance", value=0.75, source=judge, rationale="ok")
    finally:
        mlflow.set_tracking_uri(previous)
    back = read_mlflow(tracking_uri, experiment, label_source="expert")
    assert sorted((lab.item_id, lab.judge, lab.score, lab.annotator) for lab in back.labels) == [
        ("i0", "yescieval.qa.coherence", 3.0, "ann1"), ("i0", "yescieval.qa.correctness", 4.0, "ann1"),
        ("i1", "yescieval.qa.correctness", 2.0, "ann1")]
    assert back.label_sources == ["human"] * 3
    assert back.skipped == {"expectation:expected_response": 1}  # an expected answer is not a rating
    assert {lab.source for lab in back.labels} == {"expert"}
    assert {lab.source for lab in read_mlflow(tracking_uri, experiment).labels} == {"human"}
    with pytest.raises(InputError, match="not a human one"):
        read_mlflow(tracking_uri, experiment, label_source="llm")
    assert not back.errors
    boolean = next(r for r in back.results if r.judge == "is_correct")  # a verdict on a 0/1 scale
    assert (boolean.item_id, boolean.score, back.scales["is_correct"]) == ("i2", 1.0, [0.0, 1.0, 1.0])
    relevance = next(r for r in back.results if r.judge == "relevance")
    assert (relevance.item_id, relevance.model, relevance.score) == (foreign.trace_id, "openai/gpt-4o", 0.75)
    assert len(back.results) == 5  # three exported judgments, the boolean one and the foreign one


def test_missing_experiment_is_one_clear_error(tracking_uri):
    from scijudge.importers.mlflow import read_mlflow

    with pytest.raises(InputError, match="no MLflow experiment named 'nope'"):
        read_mlflow(tracking_uri, "nope")


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 10**400, -(10**5000)],
                         ids=["nan", "inf", "10**400", "-10**5000"])  # pytest cannot show -10**5000 itself
def test_a_value_beyond_any_float_is_an_error_not_a_crash(value) -> None:
    """An assessment value of NaN, infinity or an integer no float holds is one error for that assessment (an
    integer of 10**400 made math.isfinite raise OverflowError, and the digits of 10**5000 cannot even be shown)."""
    from scijudge.importers.mlflow import _value

    score, verdict, error = _value(value)
    assert score is None and verdict is None and error is not None and error.startswith("value is not finite: ")
    assert len(error) < 80
