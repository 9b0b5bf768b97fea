"""Judge many items with many judges through one bounded pool, persisting each judgment as it completes.

All (item, judge, part) tasks share one pool — no per-item or per-judge barrier — so a slow item never
idles the workers. Completed keys in the run store are skipped, which makes every run resumable.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from concurrent.futures import as_completed as futures_as_completed
from dataclasses import dataclass, field
from typing import Any

from scijudge.data import Item
from scijudge.judges.base import Judge, JudgeResult, judgment_key, model_name
from scijudge.runs import Run


@dataclass
class RunSummary:
    """What one invocation did: counts, tokens and cost of the judgments made now."""

    planned: int = 0
    skipped_done: int = 0
    not_applicable: int = 0
    judged: int = 0
    ok: int = 0
    abstained: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost: float = 0.0
    seconds: float = 0.0
    abstention_reasons: dict[str, int] = field(default_factory=dict)

    def add(self, result: JudgeResult) -> None:
        self.judged += 1
        self.tokens_in += result.tokens_in
        self.tokens_out += result.tokens_out
        self.cost += result.cost or 0.0
        if result.ok:
            self.ok += 1
        else:
            self.abstained += 1
            reason = _reason_class(result.reason or "unknown")
            self.abstention_reasons[reason] = self.abstention_reasons.get(reason, 0) + 1


def _reason_class(reason: str) -> str:
    """A short class of an abstention reason for summaries ("all strategies failed: validation_error")."""
    head, _, rest = reason.partition(":")
    if "last problem" in head and rest:
        return f"all strategies failed: {rest.strip().split(':')[0][:60]}"
    return head[:80]


Task = tuple[Item, Judge, str]
Progress = Callable[[JudgeResult, RunSummary], None]


def plan(items: Sequence[Item], judges: Sequence[Judge], run: Run | None, *,
         retry_abstained: bool = False, not_applicable: list[tuple[str, str]] | None = None) -> tuple[list[Task], int]:
    """Every (item, judge, part) not yet in the run store, in item-major order, and how many were done.

    (item, judge) pairs with nothing to judge (a pairwise judge and an item with one answer) are
    appended to ``not_applicable`` when a list is given.
    """
    done = run.completed_keys(include_abstained=not retry_abstained) if run is not None else set()
    tasks: list[Task] = []
    skipped = 0
    for item in items:
        for judge in judges:
            parts = judge.parts(item)
            if not parts:
                if not_applicable is not None:
                    not_applicable.append((item.id, judge.name))
                continue
            judge.inputs_for(item, parts[0])  # fail early, before any LM call
            for part in parts:
                if hasattr(judge, "result_keys"):  # a fused judge: one call, one stored judgment per rubric
                    keys = judge.result_keys(item.id, part, model_name(judge._lm()))
                else:
                    keys = [judgment_key(item.id, judge.name, part, judge.spec_hash, model_name(judge._lm()))]
                if all(key in done for key in keys):
                    skipped += 1
                else:
                    tasks.append((item, judge, part))
    return tasks, skipped


def _pending(items: Sequence[Item], judges: Sequence[Judge], run: Run | None, retry_abstained: bool,
             limit: int | None) -> tuple[list[Task], RunSummary]:
    """The tasks to run now (at most ``limit``) and a summary that already counts what is skipped."""
    missing: list[tuple[str, str]] = []
    tasks, skipped = plan(items, judges, run, retry_abstained=retry_abstained, not_applicable=missing)
    if limit is not None:
        tasks = tasks[:limit]
    return tasks, RunSummary(planned=len(tasks), skipped_done=skipped, not_applicable=len(missing))


def judge_items(items: Sequence[Item], judges: Sequence[Judge], *, run: Run | None = None,
                concurrency: int = 8, limit: int | None = None, retry_abstained: bool = False,
                on_result: Progress | None = None) -> RunSummary:
    """Judge items concurrently; every result is written to ``run`` as soon as it completes.

    Args:
        limit: judge at most this many of the pending tasks (after skipping completed ones).
        on_result: called after each persisted result (progress bars, logging).
    """
    tasks, summary = _pending(items, judges, run, retry_abstained, limit)
    started = time.perf_counter()
    lock = threading.Lock()

    def finish(result: JudgeResult) -> None:
        if run is not None:
            run.record(result)
        with lock:
            summary.add(result)
            if on_result is not None:
                on_result(result, summary)

    pending_tasks = iter(tasks)
    with ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="scijudge") as pool:
        in_flight: set[Future[JudgeResult]] = set()

        def submit_next() -> bool:
            task = next(pending_tasks, None)
            if task is None:
                return False
            item, judge, part = task
            in_flight.add(pool.submit(judge.judge_item, item, part))
            return True

        # Bounded submission keeps memory flat for very large item files.
        for _ in range(max(1, concurrency) * 2):
            if not submit_next():
                break
        fatal: BaseException | None = None
        while in_flight:
            finished, _ = wait(in_flight, return_when=FIRST_COMPLETED)
            for future in finished:
                in_flight.discard(future)
                try:
                    result = future.result()
                except Exception as exc:  # noqa: BLE001 - a fatal error (bad key, bad input) stops the run
                    fatal = fatal or exc
                    continue
                for one in result if isinstance(result, list) else [result]:  # fused judges return several
                    finish(one)
                if fatal is None:
                    submit_next()
        summary.seconds = time.perf_counter() - started
        if fatal is not None:
            # Everything that completed before the failure is already stored; a re-run resumes from there.
            raise fatal
    return summary


# --- several worker processes -------------------------------------------------------------------
#
# One process tops out around 450 judgments/s because DSPy's per-call CPU holds the GIL (see
# benchmarks/README.md). For very fast endpoints the runner can spread the pending tasks over worker
# processes; the parent alone writes the run store, each result as soon as it arrives, so persistence
# and resume behave exactly as with one process.


@dataclass(frozen=True)
class JudgeRecipe:
    """What a worker process needs to rebuild a judge: its spec and how to build its LM (no live objects)."""

    spec: Any
    model: str
    lm_options: dict[str, Any] = field(default_factory=dict)
    judge_options: dict[str, Any] = field(default_factory=dict)

    def build(self) -> Judge:
        from scijudge.judges.base import build_judge
        from scijudge.lm import make_lm

        return build_judge(self.spec, lm=make_lm(self.model, **self.lm_options), **self.judge_options)


def _worker(recipes: list[JudgeRecipe], concurrency: int, use_cache: bool, inbox: Any, outbox: Any) -> None:
    """A worker process: build the judges once, then judge each batch of tasks sent to ``inbox``.

    Every result goes to ``outbox`` as soon as it completes; a batch ends with ("done", None), preceded by
    ("error", message) when a fatal error (bad key, bad input) stopped it. ``None`` in the inbox ends the worker.
    """
    from concurrent.futures import CancelledError

    import dspy

    if not use_cache:
        dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)
    try:
        judges = [recipe.build() for recipe in recipes]
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which raises it
        outbox.put(("error", f"{type(exc).__name__}: {exc}"))
        outbox.put(("ready", None))
        return
    outbox.put(("ready", None))
    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        while (batch := inbox.get()) is not None:
            fatal: BaseException | None = None
            futures = [pool.submit(judges[j].judge_item, Item.model_validate(item), part) for item, j, part in batch]
            for future in futures_as_completed(futures):
                try:
                    done = future.result()
                    for one in done if isinstance(done, list) else [done]:  # fused judges return several
                        outbox.put(("result", one.model_dump(mode="json")))
                except CancelledError:
                    continue
                except Exception as exc:  # noqa: BLE001 - a fatal error: stop the batch, keep what completed
                    if fatal is None:
                        fatal = exc
                        for other in futures:
                            other.cancel()
            if fatal is not None:
                outbox.put(("error", f"{type(fatal).__name__}: {fatal}"))
            outbox.put(("done", None))


class WorkerPool:
    """Worker processes that each rebuild the judges once and judge the batches they are sent.

    Only for API models (a local ``hf:`` model would be loaded once per process). The parent plans the
    tasks, skips completed ones, and alone writes the run store, each result as soon as it arrives.

    Example::

        with WorkerPool(recipes, processes=2, concurrency=64) as pool:
            summary = pool.judge_items(items, run=run)
    """

    def __init__(self, recipes: Sequence[JudgeRecipe], *, processes: int, concurrency: int = 8,
                 use_cache: bool = True) -> None:
        from scijudge.errors import ModelError

        if any(r.model.startswith("hf:") for r in recipes):
            raise ModelError("several processes are for API models; a local hf: model batches inside one process")
        self.recipes = list(recipes)
        self.processes = max(1, processes)
        self.concurrency = concurrency
        self.use_cache = use_cache
        self._judges = [recipe.build() for recipe in self.recipes]  # the parent plans keys and checks inputs
        self._workers: list[Any] = []
        self._inboxes: list[Any] = []
        self._outbox: Any = None

    def start(self) -> "WorkerPool":
        """Start the workers and wait until each has built its judges."""
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        self._outbox = ctx.Queue()
        per_worker = max(1, self.concurrency // self.processes)
        for _ in range(self.processes):
            inbox = ctx.Queue()
            worker = ctx.Process(target=_worker, daemon=True,
                                 args=(self.recipes, per_worker, self.use_cache, inbox, self._outbox))
            worker.start()
            self._inboxes.append(inbox)
            self._workers.append(worker)
        errors = []
        for _ in self._workers:
            kind, data = self._outbox.get()
            while kind == "error":
                errors.append(data)
                kind, data = self._outbox.get()
        if errors:
            self.close()
            from scijudge.errors import ModelError

            raise ModelError(f"a worker process could not start: {errors[0]}")
        return self

    def close(self) -> None:
        """Stop the workers (they finish nothing further)."""
        for inbox in self._inboxes:
            inbox.put(None)
        for worker in self._workers:
            worker.join(10)
            if worker.is_alive():
                worker.terminate()
        self._workers, self._inboxes = [], []

    def __enter__(self) -> "WorkerPool":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def judge_items(self, items: Sequence[Item], *, run: Run | None = None, limit: int | None = None,
                    retry_abstained: bool = False, on_result: Progress | None = None) -> RunSummary:
        """Like ``judge_items``, with the pending tasks dealt round-robin to the workers."""
        from scijudge.errors import ModelError

        tasks, summary = _pending(items, self._judges, run, retry_abstained, limit)
        started = time.perf_counter()
        index = {id(j): n for n, j in enumerate(self._judges)}
        payload = [(item.model_dump(mode="json"), index[id(judge)], part) for item, judge, part in tasks]
        shards = [payload[k::len(self._inboxes)] for k in range(len(self._inboxes))]
        for inbox, shard in zip(self._inboxes, shards):
            inbox.put(shard)
        fatal: str | None = None
        running = len(shards)
        while running:
            kind, data = self._outbox.get()
            if kind == "done":
                running -= 1
            elif kind == "error":
                fatal = fatal or data
            else:
                if run is not None:
                    run.record_dump(data)
                # Validated in the worker already: construct without validating again (the summary reads scalars).
                result = JudgeResult.model_construct(**data)
                summary.add(result)
                if on_result is not None:
                    on_result(result, summary)
        summary.seconds = time.perf_counter() - started
        if fatal is not None:
            raise ModelError(f"a worker process stopped: {fatal}")
        return summary


def judge_items_in_processes(items: Sequence[Item], recipes: Sequence[JudgeRecipe], *, processes: int,
                             run: Run | None = None, concurrency: int = 8, limit: int | None = None,
                             retry_abstained: bool = False, on_result: Progress | None = None,
                             use_cache: bool = True) -> RunSummary:
    """``judge_items`` over ``processes`` worker processes (started and stopped here), ``concurrency`` in all."""
    with WorkerPool(recipes, processes=processes, concurrency=concurrency, use_cache=use_cache) as pool:
        return pool.judge_items(items, run=run, limit=limit, retry_abstained=retry_abstained, on_result=on_result)
