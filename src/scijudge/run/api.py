"""The one run API: ``judge_items(items, judges, store, executor=...)``.

Whatever makes the judgments — threads of this process (default), worker processes, provider batch APIs or
Ray actors — a run goes through one lifecycle (``scijudge.run.lifecycle``): judges are checked by the executor
before anything is sent or loaded; the pending judgments are planned from their identities (completed ones
skipped, so every run resumes); each result is stored the moment it arrives; run-level faults stop the run
and carry the summary of what was stored; a stop request gets ``grace`` seconds for answers in flight.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Literal, Protocol

from scijudge.data import Item
from scijudge.errors import InputError, ModelError
from scijudge.judges.recipe import JudgeRecipe
from scijudge.run.lifecycle import Lifecycle
from scijudge.run.plan import Select, Task, pending
from scijudge.run.store import Run
from scijudge.run.summary import DEFAULT_BREAKER, DEFAULT_GRACE, Progress, RunSummary

ExecutorName = Literal["threads", "async", "processes", "batch", "ray"]
EXECUTORS: tuple[str, ...] = ("threads", "async", "processes", "batch", "ray")


class Executor(Protocol):
    """How judgments are made. ``plans_locally``: this process builds the judges and plans the tasks (every
    executor but Ray, whose actors load the models and plan their own chunks)."""

    name: str
    plans_locally: bool

    def check(self, judges: Sequence[Any]) -> None:
        """Refuse judges this executor cannot serve, before anything is sent or loaded."""
        ...

    def execute(self, tasks: list[Task], life: Lifecycle) -> int:
        """Make the tasks' judgments through ``life``; returns how many were left unanswered."""
        ...


def make_executor(name: str, *, concurrency: int = 8, **options: Any) -> Any:
    """The executor called ``name`` with its options (``processes``, ``use_cache``; ``batch_size``, ``poll``,
    ``fallback``, ``completion_window``, ``on_batch``; ``address``, ``workers``, ``chunk_items``)."""
    if name == "threads":
        from scijudge.run.threads import ThreadExecutor

        _no_options(name, options)
        return ThreadExecutor(concurrency=concurrency)
    if name == "async":
        from scijudge.run.aio import AsyncExecutor

        _no_options(name, options)
        return AsyncExecutor(concurrency=concurrency)
    if name == "processes":
        from scijudge.run.processes import ProcessExecutor

        return ProcessExecutor(concurrency=concurrency, **options)
    if name == "batch":
        from scijudge.run.batch.executor import BatchExecutor

        return BatchExecutor(**options)
    if name == "ray":
        from scijudge.run.ray import RayExecutor

        return RayExecutor(concurrency=concurrency, **options)
    raise InputError(f"unknown executor {name!r}; choose one of {', '.join(EXECUTORS)}", field="executor")


def _no_options(name: str, options: dict[str, Any]) -> None:
    if options:
        raise InputError(f"the {name} executor takes no options {sorted(options)}", field=sorted(options)[0])


def _refuse_batched(store: Run, tasks: list[Task]) -> None:
    """A run that is not a batch run refuses judgments a recorded batch holds (still billed at the provider) or
    that have a kept batch answer: buying them again by direct calls would pay twice (issue 35)."""
    from scijudge.run.batch.store import batches_table_exists, uncollected

    if not tasks or not batches_table_exists(store.path):
        return  # never judged with --batch: nothing to compute
    keys = {judge.identity(item, part)[0].key for item, judge, part in tasks}
    batches, kept = uncollected(store.path, keys) if keys else ([], 0)
    if batches:
        record, n = batches[0]
        name = record.remote_id or record.client_id
        more = f" (and {len(batches) - 1} more batches)" if len(batches) > 1 else ""
        raise ModelError(f"{store.path}: batch {name}{more} holds {n} of these judgments, not collected yet "
                         f"(last seen {record.status}; billed at the provider): re-run with --batch to collect it, or "
                         f"give it up first: scijudge batches {store.path} --abandon {name}")
    if kept:
        raise ModelError(f"{store.path}: {kept} of these judgments have an answer a batch already collected: re-run "
                         "with --batch to store them without a new request")


def judge_items(items: Sequence[Item], judges: Sequence[Any], store: Run | None = None, *,
                executor: ExecutorName | Executor | str = "threads", concurrency: int = 8, limit: int | None = None,
                retry_abstained: bool = False, stop: threading.Event | None = None, grace: float = DEFAULT_GRACE,
                on_result: Progress | None = None, breaker: int = DEFAULT_BREAKER, run: Run | None = None,
                select: Select | None = None) -> RunSummary:
    """Judge every item with every judge; every result is written to ``store`` as soon as it completes.

    Args:
        judges: judges (``JudgeProtocol``), or ``JudgeRecipe``s (built here, or in each worker and actor).
        store: the run store (``run=`` is the older name); re-running with the same store resumes.
        executor: ``"threads"`` (default), ``"async"`` (one event loop: hundreds to thousands of API judgments in
            flight), ``"processes"``, ``"batch"``, ``"ray"``, or an executor object
            (``scijudge.run.api.make_executor(name, **options)`` builds one with options).
        concurrency: judgments in flight (threads or async tasks; per worker process in all; per Ray actor).
        limit: judge at most this many of the pending judgments (after skipping completed ones).
        stop: when set (e.g. by a Ctrl-C handler), no new request is sent; requests in flight get ``grace``
            seconds and their answers are stored; the summary says ``interrupted``.
        on_result: called after each stored result (progress bars, logging).
        breaker: stop the run (``EndpointError``) after this many judgments in a row got no answer.
        select: a policy ``(item, judge, part) -> bool`` consulted when planning: only the units it keeps are
            judged (a cascade's later members, ``scijudge.run.cascade``); the others are neither judged nor counted.
    Raises:
        EndpointError: a run-level fault (unreachable endpoint, auth, model not found, rate limit over the
            cap, the breaker); what completed before is stored, and the error's ``summary`` says so.
        ModelError: the executor cannot serve these judges (said before anything is sent).
    """
    if store is not None and run is not None and store is not run:
        raise InputError("pass the run store once (store= or run=)", field="store")
    store = store if store is not None else run
    chosen = make_executor(executor, concurrency=concurrency) if isinstance(executor, str) else executor
    chosen.check(list(judges))
    claimed = store is not None and not store.writing
    if store is not None:
        store.claim_writer()
    try:
        if not chosen.plans_locally:
            if select is not None:
                raise ModelError(f"a cascade is not supported with the {chosen.name} executor (its workers plan "
                                 "their own items)")
            if limit is not None:
                raise ModelError(f"--limit is not supported with the {chosen.name} executor (its workers plan "
                                 "their own items)")
            life = Lifecycle(store, RunSummary(), stop=stop, grace=grace, breaker=breaker, on_result=on_result)
            remote: Any = chosen  # an executor that plans remotely offers execute_remote (scijudge.run.ray)
            left = remote.execute_remote(items, judges, life, retry_abstained=retry_abstained)
            return life.finish(abandoned=left)
        built = [j.build() if isinstance(j, JudgeRecipe) else j for j in judges]
        tasks, summary = pending(items, built, store, retry_abstained=retry_abstained, limit=limit, select=select)
        if store is not None and chosen.name != "batch":
            _refuse_batched(store, tasks)
        from scijudge.lm.dspy_compat import cache_opened

        cache_opened()  # set-up, as loading the judges is: the cache is not opened at the first answer
        life = Lifecycle(store, summary, stop=stop, grace=grace, breaker=breaker, on_result=on_result)
        left = chosen.execute(tasks, life)
        from scijudge.chain.cache import flush

        flush(timeout=grace)  # the run's time (summary.seconds) includes writing its response-cache entries
        return life.finish(abandoned=left)
    finally:
        from scijudge.chain.cache import flush

        flush(timeout=grace)  # response-cache entries queued by this run reach the disk (Ctrl-C and faults too)
        if claimed and store is not None:
            store.release_writer()
