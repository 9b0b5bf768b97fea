"""MLflow assessments as judgments and labels, and scijudge judgments written to MLflow as assessments.

Layout in MLflow (3.x GenAI traces): one trace per item (name ``scijudge:<item_id>``, tag ``scijudge.item_id``,
``client_request_id`` = item id, tag ``scijudge.run`` naming the exported run store), and on it one ``Feedback``
per judgment: ``name`` = judge, ``value`` = score (or verdict text), ``rationale``, source type ``LLM_JUDGE``
with the model as its ``source_id``, metadata ``scijudge.model`` / ``scijudge.judge`` / ``scijudge.part``. An
abstention is a feedback without value, with an ``AssessmentError`` (code ``ABSTAINED``, the reason as message).

Reading any experiment: ``LLM_JUDGE`` feedback is a judgment, ``CODE`` feedback a deterministic one (kept with
``include_deterministic`` / ``--all-scorers``); a boolean value is a 0/1 score. ``HUMAN`` feedback and numeric
expectations are labels (label ``source`` ``human`` unless told ``expert`` or ``crowd``; one per person, item and
judge: an override wins); other expectations (expected answers, facts) are counted in ``skipped`` as
``expectation:<name>``. The item is the trace's ``scijudge.item_id`` tag, else its ``client_request_id``, else its
trace id. Overridden assessments (``valid`` False) are left out. The ``scijudge.scale`` metadata written by the
export is each judge's scale. MLflow is imported only when one of these functions runs (the ``interop`` extra).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
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
SCALE_KEY = "scijudge.scale"
"""Assessment metadata: the judge's calibration scale (``lo,hi,step[,continuous]``), so that it survives a round
trip (scales are otherwise inferred from the values seen)."""
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


def _client(tracking_uri: str, *, create: bool) -> Any:
    """An MLflow client for ``tracking_uri``; a bad URI, an unreachable server or a refused store is one line.

    Reading (``create`` False) never creates anything: a ``sqlite:///`` URI must name an existing file (MLflow
    would otherwise create an empty database, and its folder, at a mistyped path).
    """
    mlflow = _mlflow()
    if not create:
        missing = _missing_sqlite_file(tracking_uri)
        if missing is not None:
            raise InputError(f"no MLflow database at {missing}: check the --tracking-uri",
                             file=redact_url(tracking_uri), field="tracking-uri")
    try:
        client = mlflow.MlflowClient(tracking_uri)
    except Exception as exc:  # mlflow raises many kinds for a bad URI
        raise InputError(f"cannot open the MLflow tracking store: {_first_line(exc)}", file=redact_url(tracking_uri),
                         field="tracking-uri") from None
    return client


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _missing_sqlite_file(tracking_uri: str) -> str | None:
    """The path of a ``sqlite:///PATH`` tracking URI when no such file exists (None otherwise)."""
    if not tracking_uri.startswith("sqlite:///"):
        return None
    path = tracking_uri[len("sqlite:///"):].split("?", 1)[0]
    if not path or path == ":memory:":
        return None
    return None if Path(path).is_file() else path


def _experiment_id(tracking_uri: str, experiment: str, *, create: bool) -> str:
    client = _client(tracking_uri, create=create)
    try:
        found = client.get_experiment_by_name(experiment)
        if found is not None:
            return str(found.experiment_id)
        if not create:
            raise InputError(f"no MLflow experiment named {experiment!r}", file=redact_url(tracking_uri),
                             field="experiment")
        return str(client.create_experiment(experiment))
    except InputError:
        raise
    except Exception as exc:  # an unreachable server, a store MLflow refuses (its file backend, by default)
        raise InputError(f"cannot open the MLflow tracking store: {_first_line(exc)}", file=redact_url(tracking_uri),
                         field="tracking-uri") from None


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
    """(score, verdict, error) of a feedback or expectation value; a boolean is a 0/1 score (``@scorer -> bool``,
    ``log_feedback(value=True)``)."""
    if value is None:
        return None, None, None
    if isinstance(value, bool):
        return float(value), None, None
    if isinstance(value, (int, float)):
        return (None, None, f"value is not finite: {number_text(value)}") if not is_finite(value) else (float(value), None, None)
    if isinstance(value, str) and value.strip():
        return None, value.strip(), None
    return None, None, f"value of type {type(value).__name__} is not a score or a verdict"


def scale_text(scale: Any) -> str | None:
    """A calibration scale as MLflow metadata text (``lo,hi,step[,continuous]``), None when it is not one."""
    if not isinstance(scale, (list, tuple)) or len(scale) not in (3, 4):
        return None
    try:
        numbers = [format(float(x), "g") for x in scale[:3]]
    except (TypeError, ValueError):
        return None
    return ",".join(numbers + ([str(scale[3])] if len(scale) == 4 else []))


def _scale_of_text(value: Any) -> list[Any] | None:
    parts = [p.strip() for p in str(value).split(",")] if value else []
    if len(parts) not in (3, 4):
        return None
    try:
        out: list[Any] = [float(p) for p in parts[:3]]
    except ValueError:
        return None
    return out + ([parts[3]] if len(parts) == 4 else [])


def _label(item_id: str, assessment: Any, score: float | None, verdict: str | None, source: str) -> HumanLabel:
    metadata = assessment.metadata or {}
    return HumanLabel(item_id=item_id, judge=assessment.name, part=metadata.get("scijudge.part", ""), score=score,
                      verdict=verdict, annotator=assessment.source.source_id or None, rationale=assessment.rationale,
                      source=source)  # type: ignore[arg-type]  # checked against HUMAN_SOURCES by read_mlflow


def read_mlflow(tracking_uri: str, experiment: str, *, label_source: str = "human",
                include_deterministic: bool = False) -> ForeignImport:
    """Judgments (LLM-judge and code feedback) and human labels of every trace of an MLflow experiment.

    MLflow records that a person gave an assessment (source type ``HUMAN``), not whether an expert or the crowd:
    the labels' ``source`` is ``label_source`` (default ``human``, as MLflow records it; ``expert`` or
    ``crowd`` when you know). ``label_sources`` holds MLflow's own source type per label (``human``);
    ``summary`` counts traces, judgments and labels; each record keeps its trace and assessment ids.
    ``CODE`` feedback is a deterministic scorer: skipped (counted) unless ``include_deterministic``, as
    ``--all-scorers`` does for every tool. A boolean value is a 0/1 score; a ``scijudge.scale`` metadata value
    (written by ``export_to_mlflow``) is the judge's scale, kept in ``scales``. When one person gave two labels
    for one (item, judge, part), the override (``mlflow.override_feedback``) is kept, else the latest.
    """
    if label_source not in HUMAN_SOURCES:
        raise InputError(f"label source {label_source!r} is not a human one: use {', '.join(sorted(HUMAN_SOURCES))}",
                         field="label-source")
    experiment_id = _experiment_id(tracking_uri, experiment, create=False)
    source = source_name(tracking_uri, experiment)
    rows: list[ForeignRow] = []
    labels: dict[tuple[str, str, str, str], tuple[tuple[int, int], HumanLabel]] = {}
    bad_labels: list[InputError] = []
    skipped: dict[str, int] = {}
    declared: dict[str, list[Any]] = {}
    booleans: set[str] = set()
    numbers: set[str] = set()
    n_traces, n_replaced_labels = 0, 0
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
            if expectation is not None and (score is None or isinstance(value, bool)):  # an expected answer
                skipped[f"expectation:{assessment.name}"] = skipped.get(f"expectation:{assessment.name}", 0) + 1
                continue
            metadata = assessment.metadata or {}
            (booleans if isinstance(value, bool) else numbers).add(assessment.name)
            scale = _scale_of_text(metadata.get(SCALE_KEY))
            if scale is not None:
                declared.setdefault(assessment.name, scale)
            if _source_type(assessment) == "HUMAN" or expectation is not None:
                if error or (score is None and verdict is None):
                    bad_labels.append(InputError(error or "a human assessment without a value", file=source,
                                                 field=position))
                    continue
                try:
                    label = _label(item_id, assessment, score, verdict, label_source)
                except ValidationError as exc:
                    bad_labels.append(InputError(str(exc.errors()[0]["msg"]), file=source, field=position))
                    continue
                # one label per (item, judge, part, annotator): an override wins, then the latest
                key = (label.item_id, label.judge, label.part, label.annotator or "")
                rank = (1 if getattr(assessment, "overrides", None) else 0,
                        int(getattr(assessment, "last_update_time_ms", None) or 0))
                if key in labels:
                    n_replaced_labels += 1
                    if labels[key][0] > rank:
                        continue
                labels[key] = (rank, label)
                continue
            failure = getattr(feedback, "error", None)
            rows.append(ForeignRow(
                item_id=item_id, judge=assessment.name,
                model=metadata.get("scijudge.model") or assessment.source.source_id, part=metadata.get("scijudge.part", ""),
                score=score, verdict=verdict, rationale=assessment.rationale,
                reason=(getattr(failure, "error_message", None) or getattr(failure, "error_code", None) or "no value")
                if score is None and verdict is None else None,
                position=position, error=error, llm_judged=_source_type(assessment) != "CODE",
                provenance={"trace_id": info.trace_id, "assessment_id": assessment.assessment_id,
                            "source_type": _source_type(assessment), "experiment_id": experiment_id},
            ))
    kept = [label for _, label in labels.values()]
    out = collect(rows, source=source, sha256="", fmt=FORMAT,
                  summary={"traces": n_traces, "judgments": len(rows), "labels": len(kept),
                           "labels_replaced": n_replaced_labels, "experiment_id": experiment_id},
                  include_deterministic=include_deterministic)
    for name in booleans - numbers:
        out.scales[name] = [0.0, 1.0, 1.0]  # True/False only: a verdict on a 0/1 scale
    out.scales.update({name: scale for name, scale in declared.items() if name in out.scales or
                       any(label.judge == name for label in kept)})  # the scale written with the assessments
    out.errors.extend(bad_labels)
    out.skipped.update(skipped)
    out.labels = kept
    out.label_sources = ["human"] * len(kept)
    return out


def _feedback(result: JudgeResult, run_tag: str, scale: str | None = None) -> Any:
    from mlflow.entities import AssessmentError, AssessmentSource, AssessmentSourceType, Feedback

    value: float | str | None = result.score if result.score is not None else result.verdict
    answered = result.status == "ok" and value is not None
    metadata = {"scijudge.model": result.model, "scijudge.judge": result.judge, "scijudge.part": result.part,
                "scijudge.family": result.family, RUN_TAG: run_tag}
    if result.endpoint:
        metadata["scijudge.endpoint"] = result.endpoint
    if scale:
        metadata[SCALE_KEY] = scale
    return Feedback(
        name=result.judge, value=value if answered else None, rationale=result.rationale,
        error=None if answered else AssessmentError(error_code=ABSTAINED, error_message=result.reason or "abstained"),
        source=AssessmentSource(source_type=AssessmentSourceType.LLM_JUDGE, source_id=result.model),
        metadata=metadata,
    )


def export_to_mlflow(results: Iterable[JudgeResult], tracking_uri: str, experiment: str, *, run_tag: str,
                     fast: bool | None = None, scales: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Log judgments as MLflow assessments (one trace per item); returns counts and the experiment id.

    ``run_tag`` names the exported run; exporting a run that the experiment already holds is refused (it would
    duplicate every trace). ``fast`` None uses the one-transaction writer when this MLflow and this tracking store
    support it (a SQL store). ``scales`` (judge -> scale) is written with each assessment (``scijudge.scale``),
    so that an import gives the judge its scale back. A write that fails leaves none of this run's traces.
    """
    results = list(results)
    experiment_id = _experiment_id(tracking_uri, experiment, create=True)
    if any(True for _ in _traces(tracking_uri, experiment_id, f"tag.`{RUN_TAG}` = '{run_tag}'", limit=1)):
        raise InputError(f"experiment {experiment!r} already holds this run ({run_tag}); export into another "
                         "experiment or delete its traces first", file=redact_url(tracking_uri), field="experiment")
    texts = {judge: scale_text(scale) for judge, scale in (scales or {}).items()}
    by_item: dict[str, list[Any]] = {}
    for result in results:
        by_item.setdefault(result.item_id, []).append(_feedback(result, run_tag, texts.get(result.judge)))
    use_fast = fast_path_available(tracking_uri) if fast is None else fast
    written: dict[str, str] = {}
    try:
        (write_fast if use_fast else write_public)(tracking_uri, experiment_id, by_item, run_tag, written)
    except Exception as exc:  # a store that fails midway: take back what was written, then one line
        kept = _delete_traces(tracking_uri, experiment_id, list(written.values()))
        raise InputError(f"writing to MLflow failed after {len(written)} of {len(by_item)} traces: {_first_line(exc)}"
                         + ("; none of this run's traces were kept" if not kept else
                            f"; {kept} traces could not be removed (tag {RUN_TAG} = {run_tag})"),
                         file=redact_url(tracking_uri), field="tracking-uri") from None
    return {"experiment_id": experiment_id, "traces": len(written), "judgments": len(results),
            "abstained": sum(1 for r in results if r.status != "ok"), "writer": "fast" if use_fast else "public"}


def _delete_traces(tracking_uri: str, experiment_id: str, trace_ids: list[str]) -> int:
    """Delete these traces (a failed export's); returns how many could not be deleted."""
    if not trace_ids:
        return 0
    try:
        client = _mlflow().MlflowClient(tracking_uri)
        for start in range(0, len(trace_ids), 100):
            client.delete_traces(experiment_id, trace_ids=trace_ids[start:start + 100])
    except Exception:  # the store that just failed may refuse this too: say how many remain
        return len(trace_ids)
    return 0
