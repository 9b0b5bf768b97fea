"""Every use of MLflow classes outside its documented fluent API, version-checked, with the public path beside it.

The export writes one trace per item with its assessments through
``mlflow.tracing.client.TracingClient.start_trace(TraceInfo(..., assessments=[...]))`` (the SQL store inserts the
assessments in the same session) plus one root span per trace (``Span.from_dict``, logged in batches with
``log_spans``), so the trace can be opened in the UI. Each of those calls would commit on its own: ``_one_transaction``
hands the SQL store one shared session for the whole export (``SqlAlchemyStore.ManagedSessionMaker``, put back
afterwards) and looks the experiment up once, so the export is one commit, whole or nothing. That is many times
faster (``benchmarks/bench_mlflow_export.py``) than the documented path (``start_trace`` / ``end_trace`` per item,
then ``mlflow.log_assessment`` per judgment, one commit each), which also needs the process-wide tracking URI. The
fast path is used on MLflow 3.17 up to 4 (checked on 3.17.2) with a SQL tracking store; any other version or store
(the file store, a tracking server) takes the documented path.
"""

from __future__ import annotations

import base64
import json
import os
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

ITEM_TAG = "scijudge.item_id"
RUN_TAG = "scijudge.run"
FAST_MIN, FAST_BELOW = (3, 17), (4, 0)
_SPAN_BATCH = 500


def _version() -> tuple[int, int]:
    import mlflow

    parts = str(mlflow.__version__).split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return (0, 0)


def fast_path_available(tracking_uri: str | None = None) -> bool:
    """True when this MLflow has the classes the one-transaction writer uses, in a version it was checked on, and
    (given a ``tracking_uri``) the store is a SQL store (its file and REST stores take the documented path)."""
    if not FAST_MIN <= _version() < FAST_BELOW:
        return False
    try:
        from mlflow.entities import Span, TraceInfo, TraceLocation, TraceState  # noqa: F401
        from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
        from mlflow.tracing.client import TracingClient
    except ImportError:
        return False
    if not (hasattr(TracingClient, "start_trace") and hasattr(TracingClient, "log_spans")):
        return False
    if tracking_uri is None:
        return True
    store = TracingClient(tracking_uri).store
    return isinstance(store, SqlAlchemyStore) and hasattr(store, "ManagedSessionMaker") and hasattr(
        store, "get_experiment")


def write_fast(tracking_uri: str, experiment_id: str, by_item: Mapping[str, list[Any]], run_tag: str,
               traces: dict[str, str] | None = None) -> dict[str, str]:
    """One trace per item carrying its assessments, all in ONE store transaction (nothing is written if any
    fails); returns (and fills ``traces`` with) item_id -> trace_id once committed."""
    from mlflow.tracing.client import TracingClient

    from scijudge._bulk import collector_paused

    client = TracingClient(tracking_uri)
    # the collector's passes over the tens of thousands of ORM objects of one export's session cost about a third
    # of its time; the cycles they hold (instance states and their session) are collected once it runs again
    with collector_paused(), _one_transaction(client.store) as session:
        written = _write_fast(client, session, experiment_id, by_item, run_tag)
    if traces is not None:
        traces.update(written)  # committed: only now are they there
    return written


@contextmanager
def _one_transaction(store: Any) -> Iterator[Any]:
    """Every write of the store inside one SQL transaction: its session maker hands out one shared session,
    committed once at the end (rolled back, with nothing written, on any error). ``start_trace`` and
    ``log_spans`` otherwise commit once each, which is most of an export's time."""
    maker = store.ManagedSessionMaker
    with maker(read_only=False) as session:

        @contextmanager
        def shared(read_only: bool = True) -> Iterator[Any]:
            yield session

        lookup = store.get_experiment
        experiments: dict[str, Any] = {}

        def get_experiment(experiment_id: str) -> Any:  # one look-up per experiment, not one per trace
            if experiment_id not in experiments:
                experiments[experiment_id] = lookup(experiment_id)
            return experiments[experiment_id]

        store.ManagedSessionMaker, store.get_experiment = shared, get_experiment
        try:
            yield session
        finally:
            store.ManagedSessionMaker, store.get_experiment = maker, lookup


@contextmanager
def _one_flush(session: Any) -> Iterator[None]:
    """``session.flush()`` deferred to the end: ``start_trace`` flushes each new trace at once (to catch a trace
    that ``log_spans`` created first, which a fresh trace id cannot be); one flush inserts all of them together,
    table by table, instead of a few rows at a time."""
    flush, autoflush = session.flush, session.autoflush
    session.flush, session.autoflush = (lambda *args, **kwargs: None), False
    try:
        yield
    finally:
        session.flush, session.autoflush = flush, autoflush
    session.flush()


def _write_fast(client: Any, session: Any, experiment_id: str, by_item: Mapping[str, list[Any]],
                run_tag: str) -> dict[str, str]:
    now = int(time.time() * 1000)
    spans: list[Any] = []
    traces: dict[str, str] = {}
    with _one_flush(session):
        for item_id, assessments in by_item.items():
            traces[item_id] = _start(client, experiment_id, item_id, assessments, run_tag, now, spans)
    for start in range(0, len(spans), _SPAN_BATCH):
        client.log_spans(experiment_id, spans[start:start + _SPAN_BATCH])
    return traces


def _start(client: Any, experiment_id: str, item_id: str, assessments: list[Any], run_tag: str, now: int,
           spans: list[Any]) -> str:
    """Start one item's trace with its assessments; its root span is added to ``spans``; returns the trace id."""
    from mlflow.entities import Span, TraceInfo, TraceLocation, TraceState

    hex_id = uuid.uuid4().hex
    trace_id = "tr-" + hex_id
    name = f"scijudge:{item_id}"
    spans.append(Span.from_dict({
        "trace_id": base64.b64encode(bytes.fromhex(hex_id)).decode(),
        "span_id": base64.b64encode(os.urandom(8)).decode(), "parent_span_id": None, "name": name,
        "start_time_unix_nano": now * 1_000_000, "end_time_unix_nano": now * 1_000_000,
        "events": [], "links": [], "status": {"code": "STATUS_CODE_OK", "message": ""},
        "attributes": {"mlflow.experimentId": json.dumps(experiment_id), "mlflow.traceRequestId": json.dumps(trace_id),
                       "mlflow.spanType": json.dumps("EVALUATOR"),
                       "mlflow.spanInputs": json.dumps({"item_id": item_id})},
    }))
    client.start_trace(TraceInfo(
        trace_id=trace_id, trace_location=TraceLocation.from_experiment_id(experiment_id), request_time=now,
        state=TraceState.OK, execution_duration=0, client_request_id=item_id, request_preview=item_id,
        tags={ITEM_TAG: item_id, RUN_TAG: run_tag, "mlflow.traceName": name}, assessments=list(assessments),
    ))
    return trace_id


def write_public(tracking_uri: str, experiment_id: str, by_item: Mapping[str, list[Any]], run_tag: str,
                 traces: dict[str, str] | None = None) -> dict[str, str]:
    """The documented path: ``start_trace``/``end_trace`` per item, then ``mlflow.log_assessment`` per judgment;
    ``traces`` (item_id -> trace_id) is filled as they are written, so a caller can remove them after a failure.

    The fluent calls use the process-wide tracking URI: it is set for the call and put back afterwards.
    """
    import mlflow

    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(tracking_uri)
    try:
        client = mlflow.MlflowClient(tracking_uri)
        traces = {} if traces is None else traces
        for item_id in by_item:
            root = client.start_trace(name=f"scijudge:{item_id}", inputs={"item_id": item_id},
                                      tags={ITEM_TAG: item_id, RUN_TAG: run_tag}, experiment_id=experiment_id)
            client.end_trace(root.trace_id, outputs=None)
            traces[item_id] = root.trace_id
        mlflow.flush_trace_async_logging()  # spans are exported by a background queue; assessments need the trace
        for item_id, assessments in by_item.items():
            for assessment in assessments:
                mlflow.log_assessment(trace_id=traces[item_id], assessment=assessment)
    finally:
        mlflow.set_tracking_uri(previous)
    return traces
