"""MLflow assessments as judgments and labels, and scijudge judgments written to MLflow as assessments.

Layout in MLflow (3.x GenAI traces): one trace per item (name ``scijudge:<item_id>``, tag ``scijudge.item_id``,
``client_request_id`` = item id, tag ``scijudge.run`` naming the exported run store), and on it one ``Feedback``
per judgment: ``name`` = judge, ``value`` = score (or verdict text), ``rationale``, source type ``LLM_JUDGE``
with the model as its ``source_id``, metadata ``scijudge.model`` / ``scijudge.judge`` / ``scijudge.part``. An
abstention is a feedback without value, with an ``AssessmentError`` (code ``ABSTAINED``, the reason as message).

Reading any experiment: ``LLM_JUDGE`` and ``CODE`` feedback are judgments; ``HUMAN`` feedback and numeric
expectations are labels (label ``source`` ``unknown`` unless told ``expert`` or ``crowd``; MLflow's ``human`` is
kept beside it); other expectations (expected answers, facts) are counted in ``skipped`` as
``expectation:<name>``. The item is the trace's ``scijudge.item_id`` tag, else its
``client_request_id``, else its trace id. Overridden assessments (``valid`` False) are left out. MLflow is
imported only when one of these functions runs (the ``interop`` extra).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from scijudge.errors import InputError, ModelError
from scijudge.importers._interop import INTEROP_EXTRA_HINT, ForeignImport, ForeignRow, collect
from scijudge.importers._mlflow_compat import ITEM_TAG, RUN_TAG, fast_path_available, write_fast, write_public
from scijudge.labels import HUMAN_SOURCES, HumanLabel
from scijudge.records import JudgeResult
from scijudge.redaction import redact_url
from scijudge.vocab import is_finite, number_text

FORMAT = "mlflow"
ABSTAINED = "ABSTAINED"
_PAGE = 500


def _mlflow() -> Any:
    try:
        import mlflow
    except ImportError:
        raise ModelError(f"reading or writing MLflow needs mlflow: {INTEROP_EXTRA_HINT}") from None
    return mlflow


def source_name(tracking_uri: str, experiment: str) -> str:
    """How an MLflow import names its source (credentials removed from the URI)."""
    return f"mlflow:{redact_url(tracking_uri)}#{experiment}"


def run_tag_of(store: str | Path) -> str:
    """The ``scijudge.run`` tag of an exported run store: its file name, safe to quote in a filter."""
    return re.sub(r"[^A-Za-z0-9_.:/-]", "_", str(Path(store).resolve()))


def _experiment_id(tracking_uri: str, experiment: str, *, create: bool) -> str:
    mlflow = _mlflow()
    client = mlflow.MlflowClient(tracking_uri)
    try:
        found = client.get_experiment_by_name(experiment)
    except Exception as exc:  # an unreachable server or a bad URI: mlflow raises many kinds
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise InputError(f"cannot open the MLflow tracking store: {first}", file=redact_url(tracking_uri),
                         field="tracking-uri") from None
    if found is not None:
        return str(found.experiment_id)
    if not create:
        raise InputError(f"no MLflow experiment named {experiment!r}", file=redact_url(tracking_uri),
                         field="experiment")
    return str(client.create_experiment(experiment))


def _traces(tracking_uri: str, experiment_id: str, filter_string: str | None = None,
            limit: int | None = None) -> Iterator[Any]:
    client = _mlflow().MlflowClient(tracking_uri)
    token, seen = None, 0
    while True:
        page = client.search_traces(locations=[experiment_id], filter_string=filter_string,
                                    max_results=min(_PAGE, limit or _PAGE), page_token=token, include_spans=False)
        for trace in page:
            yield trace
            seen += 1
            if limit is not None and seen >= limit:
                return
        token = page.token
        if not token:
            return


def _source_type(assessment: Any) -> str:
    kind = getattr(assessment.source, "source_type", None)
    return str(getattr(kind, "value", kind) or "").upper()


def _value(value: Any) -> tuple[float | None, str | None, str | None]:
    """(score, verdict, error) of a feedback or expectation value."""
    if value is None:
        return None, None, None
    if isinstance(value, bool):
        return None, None, f"value {value!r} is a boolean, not a score or a verdict"
    if isinstance(value, (int, float)):
        return (None, None, f"value is not finite: {number_text(value)}") if not is_finite(value) else (float(value), None, None)
    if isinstance(value, str) and value.strip():
        return None, value.strip(), None
    return None, None, f"value of type {type(value).__name__} is not a score or a verdict"


def _label(item_id: str, assessment: Any, score: float | None, verdict: str | None, source: str) -> HumanLabel:
    metadata = assessment.metadata or {}
    return HumanLabel(item_id=item_id, judge=assessment.name, part=metadata.get("scijudge.part", ""), score=score,
                      verdict=verdict, annotator=assessment.source.source_id or None, rationale=assessment.rationale,
                      source=source)  # type: ignore[arg-type]  # checked against HUMAN_SOURCES by read_mlflow


def read_mlflow(tracking_uri: str, experiment: str, *, label_source: str = "human") -> ForeignImport:
    """Judgments (LLM-judge and code feedback) and human labels of every trace of an MLflow experiment.

    MLflow records that a person gave an assessment (source type ``HUMAN``), not whether an expert or the crowd:
    the labels' ``source`` is ``label_source`` (default ``human``, as MLflow records it; ``expert`` or
    ``crowd`` when you know). ``label_sources`` holds MLflow's own source type per label (``human``);
    ``summary`` counts traces, judgments and labels; each record keeps its trace and assessment ids.
    """
    if label_source not in HUMAN_SOURCES:
        raise InputError(f"label source {label_source!r} is not a human one: use {', '.join(sorted(HUMAN_SOURCES))}",
                         field="label-source")
    experiment_id = _experiment_id(tracking_uri, experiment, create=False)
    source = source_name(tracking_uri, experiment)
    rows: list[ForeignRow] = []
    labels: list[HumanLabel] = []
    bad_labels: list[InputError] = []
    skipped: dict[str, int] = {}
    n_traces = 0
    for trace in _traces(tracking_uri, experiment_id):
        n_traces += 1
        info = trace.info
        item_id = (info.tags or {}).get(ITEM_TAG) or info.client_request_id or info.trace_id
        for assessment in info.assessments or []:
            if getattr(assessment, "valid", True) is False:
                continue
            position = f"trace {info.trace_id} assessment {assessment.assessment_id}"
            feedback, expectation = getattr(assessment, "feedback", None), getattr(assessment, "expectation", None)
            value = feedback.value if feedback is not None else getattr(expectation, "value", None)
            score, verdict, error = _value(value)
            if expectation is not None and score is None:  # an expected answer, not a rating
                skipped[f"expectation:{assessment.name}"] = skipped.get(f"expectation:{assessment.name}", 0) + 1
                continue
            if _source_type(assessment) == "HUMAN" or expectation is not None:
                if error or (score is None and verdict is None):
                    bad_labels.append(InputError(error or "a human assessment without a value", file=source,
                                                 field=position))
                    continue
                try:
                    labels.append(_label(item_id, assessment, score, verdict, label_source))
                except ValidationError as exc:
                    bad_labels.append(InputError(str(exc.errors()[0]["msg"]), file=source, field=position))
                continue
            failure = getattr(feedback, "error", None)
            metadata = assessment.metadata or {}
            rows.append(ForeignRow(
                item_id=item_id, judge=assessment.name,
                model=metadata.get("scijudge.model") or assessment.source.source_id, part=metadata.get("scijudge.part", ""),
                score=score, verdict=verdict, rationale=assessment.rationale,
                reason=(getattr(failure, "error_message", None) or getattr(failure, "error_code", None) or "no value")
                if score is None and verdict is None else None,
                position=position, error=error,
                provenance={"trace_id": info.trace_id, "assessment_id": assessment.assessment_id,
                            "source_type": _source_type(assessment), "experiment_id": experiment_id},
            ))
    out = collect(rows, source=source, sha256="", fmt=FORMAT,
                  summary={"traces": n_traces, "judgments": len(rows), "labels": len(labels),
                           "experiment_id": experiment_id})
    out.errors.extend(bad_labels)
    out.skipped.update(skipped)
    out.labels = labels
    out.label_sources = ["human"] * len(labels)
    return out


def _feedback(result: JudgeResult, run_tag: str) -> Any:
    from mlflow.entities import AssessmentError, AssessmentSource, AssessmentSourceType, Feedback

    value: float | str | None = result.score if result.score is not None else result.verdict
    answered = result.status == "ok" and value is not None
    metadata = {"scijudge.model": result.model, "scijudge.judge": result.judge, "scijudge.part": result.part,
                "scijudge.family": result.family, RUN_TAG: run_tag}
    if result.endpoint:
        metadata["scijudge.endpoint"] = result.endpoint
    return Feedback(
        name=result.judge, value=value if answered else None, rationale=result.rationale,
        error=None if answered else AssessmentError(error_code=ABSTAINED, error_message=result.reason or "abstained"),
        source=AssessmentSource(source_type=AssessmentSourceType.LLM_JUDGE, source_id=result.model),
        metadata=metadata,
    )


def export_to_mlflow(results: Iterable[JudgeResult], tracking_uri: str, experiment: str, *, run_tag: str,
                     fast: bool | None = None) -> dict[str, Any]:
    """Log judgments as MLflow assessments (one trace per item); returns counts and the experiment id.

    ``run_tag`` names the exported run; exporting a run that the experiment already holds is refused (it would
    duplicate every trace). ``fast`` None uses the one-transaction writer when this MLflow supports it.
    """
    results = list(results)
    experiment_id = _experiment_id(tracking_uri, experiment, create=True)
    if any(True for _ in _traces(tracking_uri, experiment_id, f"tag.`{RUN_TAG}` = '{run_tag}'", limit=1)):
        raise InputError(f"experiment {experiment!r} already holds this run ({run_tag}); export into another "
                         "experiment or delete its traces first", file=redact_url(tracking_uri), field="experiment")
    by_item: dict[str, list[Any]] = {}
    for result in results:
        by_item.setdefault(result.item_id, []).append(_feedback(result, run_tag))
    use_fast = fast_path_available() if fast is None else fast
    traces = (write_fast if use_fast else write_public)(tracking_uri, experiment_id, by_item, run_tag)
    return {"experiment_id": experiment_id, "traces": len(traces), "judgments": len(results),
            "abstained": sum(1 for r in results if r.status != "ok"), "writer": "fast" if use_fast else "public"}
