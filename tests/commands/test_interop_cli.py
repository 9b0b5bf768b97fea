"""CLI: import-judgments recognises other tools' files (or takes --from), export --to mlflow, and back."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from scijudge.cli import app
from scijudge.run.store import Run


def _promptfoo(path, score="0.75"):
    """A one-cell promptfoo output file (OutputFile with an EvaluateSummaryV3) with one llm-rubric assertion."""
    assertion = {"type": "llm-rubric", "value": "correct", "provider": "openai:gpt-4o-mini", "metric": "correctness"}
    cells = [{"promptIdx": 0, "testIdx": i, "provider": {"id": "openai:gpt-4o"}, "vars": {"item_id": f"q{i}"},
              "testCase": {"vars": {"item_id": f"q{i}"}}, "success": True, "failureReason": 0, "score": 1,
              "gradingResult": {"pass": True, "score": 1, "reason": "ok", "componentResults": [
                  {"pass": True, "score": json.loads(score) if i == 0 else 1.0, "reason": "fine", "assertion": assertion}]}}
             for i in range(2)]
    doc = {"evalId": "e", "results": {"version": 3, "results": cells, "prompts": [],
                                      "stats": {"successes": 2, "failures": 0, "errors": 0}}, "config": {}}
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def test_promptfoo_file_is_recognised_by_content_and_imported(tmp_path):
    path, store = _promptfoo(tmp_path / "output.dat"), tmp_path / "pf.sqlite"
    done = CliRunner().invoke(app, ["import-judgments", str(path), "--run", str(store)])
    assert done.exit_code == 0, done.output
    assert "promptfoo: 2 judgments" in done.output and "'successes': 2" in done.output
    with Run(store, create=False) as run:
        results = run.results()
        meta = run.meta()
    assert sorted((r.item_id, r.judge, r.model, r.score) for r in results) == [
        ("q0|openai:gpt-4o", "correctness", "openai:gpt-4o-mini", 0.75),
        ("q1|openai:gpt-4o", "correctness", "openai:gpt-4o-mini", 1.0)]  # the item names the model that answered
    (entry,) = meta["imports"]
    assert entry["format"] == "promptfoo" and entry["file"] == str(path) and len(entry["sha256"]) == 64
    assert meta["scales"]["correctness"] == [0.0, 1.0, 0.1, "continuous"]


def test_bad_row_exits_1_and_bad_options_exit_2(tmp_path):
    runner = CliRunner()
    path = _promptfoo(tmp_path / "results.json", score='"high"')
    done = runner.invoke(app, ["import-judgments", str(path), "--run", str(tmp_path / "a.sqlite"), "--from", "promptfoo"])
    assert done.exit_code == 1
    assert "results.results[0].gradingResult.componentResults[0]" in done.output and "1 judgment ->" in done.output
    strict = runner.invoke(app, ["import-judgments", str(path), "--run", str(tmp_path / "b.sqlite"), "--strict"])
    assert strict.exit_code == 2 and "nothing written" in strict.output
    for args, message in (
        (["--from", "braintrust"], "unknown --from 'braintrust'"),
        (["--from", "mlflow"], "--from mlflow needs --tracking-uri"),
        (["--map", "a=score"], "--map renames columns of generic"),
    ):
        bad = runner.invoke(app, ["import-judgments", str(path), "--run", str(tmp_path / "c.sqlite"), *args])
        assert bad.exit_code == 2 and message in " ".join(bad.output.split()), bad.output
        assert "Traceback" not in bad.output
    assert not (tmp_path / "c.sqlite").exists()
    wrong = runner.invoke(app, ["export", str(tmp_path / "a.sqlite"), "--to", "wandb"])
    assert wrong.exit_code == 2 and "unknown --to 'wandb'" in wrong.output


def test_generic_files_keep_the_generic_path(tmp_path):
    path = tmp_path / "j.jsonl"
    path.write_text(json.dumps({"id": "a", "judge": "j", "model": "m", "score": 3}) + "\n", encoding="utf-8")
    done = CliRunner().invoke(app, ["import-judgments", str(path), "--run", str(tmp_path / "g.sqlite"),
                                    "--map", "id=item_id"])
    assert done.exit_code == 0, done.output
    assert "1 judgment ->" in done.output and "promptfoo" not in done.output


@pytest.mark.slow
@pytest.mark.needs_extra("mlflow")
def test_export_to_mlflow_and_import_back_with_human_labels(tmp_path, monkeypatch):
    import mlflow

    from mlflow.entities import AssessmentSource, AssessmentSourceType

    from scijudge.labels import load_labels

    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    monkeypatch.chdir(tmp_path)  # MLflow puts trace artifacts under ./mlruns of the working directory
    runner = CliRunner()
    source, back, labels = tmp_path / "pf.sqlite", tmp_path / "back.sqlite", tmp_path / "labels.jsonl"
    assert runner.invoke(app, ["import-judgments", str(_promptfoo(tmp_path / "r.json")), "--run", str(source)]).exit_code == 0
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    out = runner.invoke(app, ["export", str(source), "--to", "mlflow", "--tracking-uri", uri, "--experiment", "sci"])
    assert out.exit_code == 0, out.output
    assert "logged 2 judgments" in out.output
    again = runner.invoke(app, ["export", str(source), "--to", "mlflow", "--tracking-uri", uri, "--experiment", "sci"])
    assert again.exit_code == 2 and "already holds this run" in again.output

    client = mlflow.MlflowClient(uri)
    experiment_id = client.get_experiment_by_name("sci").experiment_id
    (trace,) = [t for t in client.search_traces(locations=[experiment_id], include_spans=False)
                if t.info.tags["scijudge.item_id"] == "q1|openai:gpt-4o"]
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(uri)
    try:
        mlflow.log_feedback(trace_id=trace.info.trace_id, name="correctness", value=0.5,
                            source=AssessmentSource(source_type=AssessmentSourceType.HUMAN, source_id="ann1"))
    finally:
        mlflow.set_tracking_uri(previous)

    done = runner.invoke(app, ["import-judgments", "--from", "mlflow", "--tracking-uri", uri, "--experiment", "sci",
                               "--run", str(back), "--labels-out", str(labels)])
    assert done.exit_code == 0, done.output
    assert "1 human labels ->" in done.output and "MLflow source human; label source human" in done.output
    with Run(source, create=False) as a, Run(back, create=False) as b:
        before = {(r.item_id, r.judge, r.model): r.score for r in a.results()}
        after = {(r.item_id, r.judge, r.model): r.score for r in b.results()}
    assert after == before
    (label,) = load_labels(labels)
    assert (label.item_id, label.judge, label.score, label.annotator, label.source) == (
        "q1|openai:gpt-4o", "correctness", 0.5, "ann1", "human")


def test_mlflow_source_names_carry_no_credentials():
    from scijudge.importers.mlflow import run_tag_of, source_name

    name = source_name("https://user:s3cret@mlflow.example.org/", "sci")
    assert "s3cret" not in name and name.endswith("#sci") and name.startswith("mlflow:")
    assert "'" not in run_tag_of("runs/it's.sqlite")  # the tag is quoted in an MLflow filter
