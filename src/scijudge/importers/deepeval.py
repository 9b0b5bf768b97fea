"""DeepEval test-run files as judgments: one per test case and metric.

DeepEval writes its ``TestRun`` (``test_run_<timestamp>.json`` in a results folder, ``.deepeval/.latest_run_full.json``)
or wraps it as ``{"testRunData": TestRun}`` (``.deepeval/.latest_test_run.json``). ``testCases[i].metricsData[j]`` is
a ``MetricData`` (``name``, ``score``, ``reason``, ``success``, ``threshold``, ``evaluationModel``, ``error``);
``metricsScores`` is the run's own summary per metric (``scores``, ``passes``, ``fails``, ``errors``). The item is
``metadata.item_id`` or the test case's ``name``; the judge is the metric's name; the model its
``evaluationModel`` (a metric without one is computed, not LLM-judged, and skipped unless asked); an ``error``
is an abstention with that reason. Metrics of the test case's trace (``trace.metricsData``) and of its spans
(``trace.<kind>Spans[k].metricsData``, as ``@observe(metrics=...)`` writes them) are judgments of the same item,
part ``trace`` or ``span:<span name>``. The model that answered (``hyperparameters["model"]``) is part of the
judgment's identity: the item is ``<item>|<model>`` when the run names it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from scijudge.errors import InputError
from scijudge.importers._interop import (
    ForeignImport,
    ForeignRow,
    collect,
    expect_object,
    file_bytes,
    load_json,
    number,
    obj,
    text,
)

FORMAT = "deepeval"
CASE_LISTS = ("testCases", "conversationalTestCases")


def test_run_of(doc: Any) -> dict[str, Any] | None:
    """The ``TestRun`` object of a DeepEval file (itself, or under ``testRunData``), or None."""
    run = doc.get("testRunData", doc) if isinstance(doc, dict) else None
    if isinstance(run, dict) and "testCases" in run and ("metricsScores" in run or "testPassed" in run):
        return run
    return None


SPAN_LISTS = ("baseSpans", "agentSpans", "llmSpans", "retrieverSpans", "toolSpans")
"""The span lists of a test case's ``trace`` (``deepeval/tracing/api.py``: ``TraceApi``), each span with its own
``metricsData``."""


def answer_model(run: dict[str, Any]) -> str | None:
    """The model that answered, as DeepEval records it: ``hyperparameters["model"]`` (``evaluate(hyperparameters=
    {"model": ...})`` / ``log_hyperparameters``), any case."""
    found = next((v for k, v in obj(run.get("hyperparameters")).items() if str(k).strip().lower() == "model"), None)
    return str(found).strip() or None if found is not None else None


def _metric_rows(metrics: Any, item_id: Any, where: str, part: str, answered_by: str | None) -> Iterator[ForeignRow]:
    for j, metric in enumerate(metrics if isinstance(metrics, list) else []):
        position = f"{where}.metricsData[{j}]"
        if not isinstance(metric, dict):
            yield ForeignRow(item_id=item_id, judge=None, model=None, position=position,
                             error=f"expected a JSON object, got {type(metric).__name__}")
            continue
        model = metric.get("evaluationModel")
        failed = text(metric.get("error"))
        score, error = number(metric.get("score"))
        yield ForeignRow(
            item_id=item_id, judge=metric.get("name"), model=model or "deepeval:computed", part=part,
            llm_judged=bool(model), score=None if failed else score, rationale=text(metric.get("reason")),
            reason=f"metric error: {failed}" if failed else None, position=position,
            error=None if failed else error, answered_by=answered_by,
            provenance={"pass": metric.get("success"), "threshold": metric.get("threshold")},
        )


def _span_part(span: dict[str, Any], kind: str, k: int) -> str:
    """A span's part name: ``span:<name>`` (``#<k>`` added when the name is missing)."""
    name = span.get("name")
    return f"span:{name}" if isinstance(name, str) and name.strip() else f"span:{kind}[{k}]"


def _rows(run: dict[str, Any]) -> Iterator[ForeignRow]:
    answered_by = answer_model(run)
    for kind in CASE_LISTS:
        cases = run.get(kind) or []
        for i, case in enumerate(cases if isinstance(cases, list) else []):
            where = f"{kind}[{i}]"
            if not isinstance(case, dict):
                yield ForeignRow(item_id=None, judge=None, model=None, position=where,
                                 error=f"expected a JSON object, got {type(case).__name__}")
                continue
            metadata = obj(case.get("metadata"))
            item_id = metadata.get("item_id") or case.get("name") or f"test_case_{case.get('order', i)}"
            yield from _metric_rows(case.get("metricsData") or [], item_id, where, "", answered_by)
            trace = obj(case.get("trace"))
            yield from _metric_rows(trace.get("metricsData") or [], item_id, f"{where}.trace", "trace", answered_by)
            for span_kind in SPAN_LISTS:
                spans = trace.get(span_kind) or []
                for k, span in enumerate(spans if isinstance(spans, list) else []):
                    if isinstance(span, dict) and span.get("metricsData"):
                        yield from _metric_rows(span["metricsData"], item_id, f"{where}.trace.{span_kind}[{k}]",
                                                _span_part(span, span_kind, k), answered_by)


def read_deepeval(path: str | Path, *, include_deterministic: bool = False) -> ForeignImport:
    """Judgments of a DeepEval test run, with its own ``metricsScores`` and ``testPassed``/``testFailed``."""
    path, data, sha = file_bytes(path)
    run = test_run_of(expect_object(load_json(data, path), path, "(document)"))
    if run is None:
        raise InputError("not a DeepEval test run: expected 'testCases' with 'metricsScores' or 'testPassed'",
                         file=path, field="testCases")
    metrics = {}
    for entry in run.get("metricsScores") or []:
        if isinstance(entry, dict) and entry.get("metric"):
            metrics[str(entry["metric"])] = {"scores": len(entry.get("scores") or []), "passes": entry.get("passes"),
                                             "fails": entry.get("fails"), "errors": entry.get("errors")}
    summary = {"testPassed": run.get("testPassed"), "testFailed": run.get("testFailed"), "metricsScores": metrics,
               "test_cases": sum(len(run.get(k) or []) for k in CASE_LISTS)}
    return collect(_rows(run), source=str(path), sha256=sha, fmt=FORMAT, summary=summary,
                   include_deterministic=include_deterministic)
