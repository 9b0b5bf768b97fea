"""Judge many items with many judges through one bounded pool, persisting each judgment as it completes.

All (item, judge, part) tasks share one pool — no per-item or per-judge barrier — so a slow item never
idles the workers. Completed keys in the run store are skipped, which makes every run resumable. A
judgment's key covers the content the judge reads, so an edited item is judged again (and counted as
changed). Run-level faults stop the run (``EndpointError``), and so does a streak of judgments that got
no answer; a stop request (Ctrl-C) ends submission and waits a short grace period for requests in
flight, whose answers are stored.
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
from scijudge.errors import EndpointError, TransportFailure
from scijudge.judges.base import Judge, JudgeResult, judgment_key_for
from scijudge.records import endpoint_of, judgment_key, model_name
from scijudge.run.store import Run

DEFAULT_BREAKER = 8
"""Judgments in a row that got no answer (timeouts, 5xx, resets) before the run stops."""
DEFAULT_GRACE = 10.0
"""Seconds a stopped run waits for requests in flight, so that answers already paid for are stored."""


@dataclass
class RunSummary:
    """What one invocation did: counts, tokens and cost of the judgments made now."""

    planned: int = 0
    skipped_done: int = 0
    not_applicable: int = 0
    changed: int = 0
    judged: int = 0
    ok: int = 0
    abstained: int = 0
    no_answer: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost: float = 0.0
    seconds: float = 0.0
    interrupted: bool = False
    abandoned: int = 0
    abstention_reasons: dict[str, int] = field(default_factory=dict)
    no_answer_reasons: dict[str, int] = field(default_factory=dict)

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

    def add_no_answer(self, reason: str) -> None:
        """A judgment that got no answer (not stored; a re-run tries it again)."""
        self.no_answer += 1
        key = _reason_class(reason)
        self.no_answer_reasons[key] = self.no_answer_reasons.get(key, 0) + 1

    @property
    def complete(self) -> bool:
        """Every planned judgment was made and stored."""
        return not self.interrupted and self.no_answer == 0 and self.abandoned == 0 and self.judged == self.planned


def _reason_class(reason: str) -> str:
    """A short class of an abstention reason for summaries ("all strategies failed: validation_error")."""
    head, _, rest = reason.partition(":")
    if "last problem" in head and rest:
        return f"all strategies failed: {rest.strip().split(':')[0][:60]}"
    return head[:80]


Task = tuple[Item, Judge, str]
Progress = Callable[[JudgeResult, RunSummary], None]


@dataclass
class Plan:
    """The tasks to run and what was found in the store."""

    tasks: list[Task]
    skipped: int
    changed_items: set[str]


def plan(items: Sequence[Item], judges: Sequence[Judge], run: Run | None, *,
         retry_abstained: bool = False, not_applicable: list[tuple[str, str]] | None = None) -> tuple[list[Task], int]:
    """Every (item, judge, part) not yet in the run store, in item-major order, and how many were done.

    (item, judge) pairs with nothing to judge (a pairwise judge and an item with one answer) are
    appended to ``not_applicable`` when a list is given.
    """
    found = plan_run(items, judges, run, retry_abstained=retry_abstained, not_applicable=not_applicable)
    return found.tasks, found.skipped


def plan_run(items: Sequence[Item], judges: Sequence[Judge], run: Run | None, *, retry_abstained: bool = False,
             not_applicable: list[tuple[str, str]] | None = None) -> Plan:
    """``plan`` plus the ids of items whose content changed since their current judgment."""
    done = run.completed_keys(include_abstained=not retry_abstained) if run is not None else set()
    current = run.current_index() if run is not None else {}
    tasks: list[Task] = []
    skipped = 0
    changed: set[str] = set()
    for item in items:
        for judge in judges:
            parts = judge.parts(item)
            if not parts:
                if not_applicable is not None:
                    not_applicable.append((item.id, judge.name))
                continue
            lm = judge._lm()  # (computing the key reads the inputs: a missing one fails here, before any LM call)
            model, endpoint = model_name(lm), endpoint_of(lm)
            for part in parts:
                if hasattr(judge, "result_keys"):  # a fused judge: one call, one stored judgment per rubric
                    keys = judge.result_keys(item, part)
                else:
                    keys = [judgment_key_for(item, judge, part)]
                if all(key in done for key in keys):
                    skipped += 1
                    continue
                row = current.get((item.id, judge.name, part, model, endpoint))
                if row is not None and not row.input_hash and (row.status == "ok" or not retry_abstained) and \
                        row.key == judgment_key(item.id, judge.name, part, judge.spec_hash, model):
                    skipped += 1  # written before content was part of the key: adopted as it always was
                    continue
                if row is not None and row.input_hash and row.input_hash != judge.identity(item, part)[0]:
                    changed.add(item.id)
                tasks.append((item, judge, part))
    return Plan(tasks, skipped, changed)


def _pending(items: Sequence[Item], judges: Sequence[Judge], run: Run | None, retry_abstained: bool,
             limit: int | None) -> tuple[list[Task], RunSummary]:
    """The tasks to run now (at most ``limit``) and a summary that already counts what is skipped."""
    missing: list[tuple[str, str]] = []
    found = plan_run(items, judges, run, retry_abstained=retry_abstained, not_applicable=missing)
    tasks = found.tasks[:limit] if limit is not None else found.tasks
    return tasks, RunSummary(planned=len(tasks), skipped_done=found.skipped, not_applicable=len(missing),
                             changed=len(found.changed_items))


class _Gate:
    """Shared by the pool's threads: whether new judgments may start, and the streak of ones with no answer.

    Checked by each task before it sends anything, so that a fault or a stop request halts the queued tasks
    at once instead of after the main thread has noticed.
    """

    def __init__(self, stop: threading.Event, breaker: int) -> None:
        self.stop = stop
        self.limit = max(1, breaker)
        self.streak = 0
        self.fatal: BaseException | None = None
        self._lock = threading.Lock()

    @property
    def closed(self) -> bool:
        return self.stop.is_set() or self.fatal is not None

    def ok(self) -> None:
        with self._lock:
            self.streak = 0

    def no_answer(self, reason: str) -> None:
        with self._lock:
            if self.stop.is_set():
                return  # a stopped run's unanswered judgments say nothing about the endpoint
            self.streak += 1
            if self.streak >= self.limit and self.fatal is None:
                self.fatal = EndpointError(
                    f"stopped after {self.streak} judgments in a row got no answer from the model (last: {reason}); "
                    "check the endpoint, then re-run to resume")

    def fail(self, exc: BaseException) -> None:
        with self._lock:
            self.fatal = self.fatal or exc

    def run(self, item: Item, judge: Judge, part: str) -> JudgeResult | None:
        """Judge one task unless the gate is closed (None: not started, nothing sent)."""
        if self.closed:
            return None
        from scijudge.chain.chain import STOP

        token = STOP.set(self)  # the chain sends nothing (retries included) once the gate closes
        try:
            result = judge.judge_item(item, part)
        except TransportFailure as exc:
            if self.closed:
                return None  # stopped (or another task hit a fault) before it got an answer: not a judgment
            self.no_answer(str(exc))
            raise
        except Exception as exc:
            self.fail(exc)
            raise
        finally:
            STOP.reset(token)
        self.ok()
        return result

    def is_set(self) -> bool:
        """Closed, seen as an event by the chain."""
        return self.closed


def judge_items(items: Sequence[Item], judges: Sequence[Judge], *, run: Run | None = None,
                concurrency: int = 8, limit: int | None = None, retry_abstained: bool = False,
                on_result: Progress | None = None, stop: threading.Event | None = None,
                grace: float = DEFAULT_GRACE, breaker: int = DEFAULT_BREAKER) -> RunSummary:
    """Judge items concurrently; every result is written to ``run`` as soon as it completes.

    Args:
        limit: judge at most this many of the pending tasks (after skipping completed ones).
        on_result: called after each persisted result (progress bars, logging).
        stop: when set (e.g. by a Ctrl-C handler), no new request is sent; requests in flight get
            ``grace`` seconds and their answers are stored; the summary says ``interrupted``.
        breaker: stop the run (``EndpointError``) after this many judgments in a row got no answer.
    Raises:
        EndpointError: a run-level fault (unreachable endpoint, auth, model not found, rate limit over the
            cap, the breaker); what completed before is stored.
    """
    claimed = run is not None and run._writer is None
    if run is not None:
        run.claim_writer()
    try:
        return _judge_items(items, judges, run, concurrency, limit, retry_abstained, on_result, stop, grace,
                            breaker)
    finally:
        if claimed:
            run.release_writer()


def _judge_items(items, judges, run, concurrency, limit, retry_abstained, on_result, stop, grace,
                 breaker):
    tasks, summary = _pending(items, judges, run, retry_abstained, limit)
    started = time.perf_counter()
    gate = _Gate(stop or threading.Event(), breaker)
    pending_tasks = iter(tasks)
    pool = ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="scijudge")
    in_flight: set[Future[JudgeResult | None]] = set()

    def submit_next() -> None:
        if gate.closed:
            return
        task = next(pending_tasks, None)
        if task is not None:
            in_flight.add(pool.submit(gate.run, *task))

    for _ in range(max(1, concurrency) * 2):  # bounded submission keeps memory flat for huge item files
        submit_next()
    deadline: float | None = None
    try:
        while in_flight:
            if gate.closed and deadline is None:
                deadline = time.monotonic() + grace
                for queued in [f for f in in_flight if f.cancel()]:  # not started: never sent
                    in_flight.discard(queued)
                if not in_flight:
                    break
            timeout = 0.2 if deadline is None else max(0.0, min(0.2, deadline - time.monotonic()))
            finished, _ = wait(in_flight, timeout=timeout, return_when=FIRST_COMPLETED)
            for future in finished:
                in_flight.discard(future)
                if future.cancelled():
                    continue
                try:
                    result = future.result()
                except TransportFailure as exc:
                    summary.add_no_answer(str(exc))
                except Exception:
                    pass
                else:
                    for one in result if isinstance(result, list) else [result]:  # fused judges return several
                        if one is None:
                            continue
                        if run is not None:
                            run.record(one)
                        summary.add(one)
                        if on_result is not None:
                            on_result(one, summary)
                submit_next()
            if deadline is not None and time.monotonic() >= deadline:
                break
    finally:
        summary.abandoned = len(in_flight)
        summary.interrupted = gate.stop.is_set()
        pool.shutdown(wait=False, cancel_futures=True)
        summary.seconds = time.perf_counter() - started
    if gate.fatal is not None:
        # Everything that completed before the failure is stored; a re-run resumes from there.
        gate.fatal.summary = summary  # type: ignore[attr-defined]
        raise gate.fatal
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
    chain_options: dict[str, Any] = field(default_factory=dict)

    def build(self) -> Judge:
        from dataclasses import replace

        from scijudge.judges.base import build_judge, default_chain
        from scijudge.lm import make_lm

        if self.chain_options:
            default_chain().config = replace(default_chain().config, **self.chain_options)
        return build_judge(self.spec, lm=make_lm(self.model, **self.lm_options), **self.judge_options)


def _die_with_parent(parent: int) -> None:
    """Make this worker exit whatever kills its parent (SIGKILL included): the kernel's parent-death signal on
    Linux, and a watchdog thread everywhere (it notices the parent is gone within half a second)."""
    import ctypes
    import os
    import signal
    import sys

    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, daemon=True, name="scijudge-parent-watch").start()


def _worker(recipes: list[JudgeRecipe], concurrency: int, use_cache: bool, inbox: Any, outbox: Any,
            stop: Any = None, parent: int | None = None) -> None:
    """A worker process: build the judges once, then judge each batch of tasks sent to ``inbox``.

    Every result goes to ``outbox`` as soon as it completes (("result", dump), or ("no_answer", reason) for
    a judgment that got none); a batch ends with ("done", None), preceded by ("error", (kind, message)) when a
    fatal error stopped it. Once ``stop`` is set no new request starts. ``None`` in the inbox ends the worker.
    """
    from concurrent.futures import CancelledError

    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole process group: the parent decides
    if parent is not None:
        _die_with_parent(parent)
    import dspy

    if not use_cache:
        dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)
    try:
        judges = [recipe.build() for recipe in recipes]
    except BaseException as exc:
        outbox.put(("error", ("other", f"{type(exc).__name__}: {exc}")))
        outbox.put(("ready", None))
        return
    outbox.put(("ready", None))

    def judge_one(judge: Judge, item: Item, part: str) -> JudgeResult | None:
        from scijudge.chain.chain import STOP

        if stop is not None and stop.is_set():
            return None
        token = STOP.set(stop)
        try:
            return judge.judge_item(item, part)
        finally:
            STOP.reset(token)

    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        while (batch := inbox.get()) is not None:
            fatal: BaseException | None = None
            futures = [pool.submit(judge_one, judges[j], Item.model_validate(item), part) for item, j, part in batch]
            for future in futures_as_completed(futures):
                try:
                    result = future.result()
                except CancelledError:
                    continue
                except TransportFailure as exc:
                    outbox.put(("no_answer", str(exc)))
                    continue
                except Exception as exc:
                    if fatal is None:
                        fatal = exc
                        for other in futures:
                            other.cancel()
                    continue
                for one in result if isinstance(result, list) else [result]:  # fused judges return several
                    if one is not None:
                        outbox.put(("result", one.model_dump(mode="json")))
            if fatal is not None:
                kind = "endpoint" if isinstance(fatal, EndpointError) else "other"
                outbox.put(("error", (kind, f"{type(fatal).__name__}: {fatal}" if kind == "other" else str(fatal))))
            outbox.put(("done", None))


class WorkerPool:
    """Worker processes that each rebuild the judges once and judge the batches they are sent.

    Only for API models (a local ``hf:`` model would be loaded once per process). The parent plans the
    tasks, skips completed ones, and alone writes the run store, each result as soon as it arrives.
    Workers exit when the parent dies, however it dies, and start no request once told to stop.

    Example::

        with WorkerPool(recipes, processes=2, concurrency=64) as pool:
            summary = pool.judge_items(items, run=run)
    """

    def __init__(self, recipes: Sequence[JudgeRecipe], *, processes: int, concurrency: int = 8,
                 use_cache: bool = True) -> None:
        from scijudge.errors import ModelError
        from scijudge.lm import is_local_model

        if any(is_local_model(r.model) for r in recipes):
            raise ModelError("several processes are for API models; a local hf: model batches inside one process")
        self.recipes = list(recipes)
        self.processes = max(1, processes)
        self.concurrency = concurrency
        self.use_cache = use_cache
        self._judges = [recipe.build() for recipe in self.recipes]  # the parent plans keys and checks inputs
        self._workers: list[Any] = []
        self._inboxes: list[Any] = []
        self._outbox: Any = None
        self._stop: Any = None

    @property
    def pids(self) -> list[int]:
        """Process ids of the running workers."""
        return [w.pid for w in self._workers]

    def start(self) -> WorkerPool:
        """Start the workers and wait until each has built its judges."""
        import multiprocessing
        import os

        ctx = multiprocessing.get_context("spawn")
        self._outbox = ctx.Queue()
        self._stop = ctx.Event()
        per_worker = max(1, self.concurrency // self.processes)
        for _ in range(self.processes):
            inbox = ctx.Queue()
            worker = ctx.Process(target=_worker, daemon=True,
                                 args=(self.recipes, per_worker, self.use_cache, inbox, self._outbox, self._stop,
                                       os.getpid()))
            worker.start()
            self._inboxes.append(inbox)
            self._workers.append(worker)
        errors = []
        for _ in self._workers:
            kind, data = self._outbox.get()
            while kind == "error":
                errors.append(data[1])
                kind, data = self._outbox.get()
        if errors:
            self.close()
            from scijudge.errors import ModelError

            raise ModelError(f"a worker process could not start: {errors[0]}")
        return self

    def close(self, timeout: float = 10.0) -> None:
        """Stop the workers (they start nothing further; any still busy after ``timeout`` s are terminated)."""
        if self._stop is not None:
            self._stop.set()
        for inbox in self._inboxes:
            inbox.put(None)
        deadline = time.monotonic() + timeout
        for worker in self._workers:
            worker.join(max(0.0, deadline - time.monotonic()))
            if worker.is_alive():
                worker.terminate()
                worker.join(2)
        self._workers, self._inboxes = [], []

    def __enter__(self) -> WorkerPool:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close(timeout=0.0 if exc[0] is not None else 10.0)

    def judge_items(self, items: Sequence[Item], *, run: Run | None = None, limit: int | None = None,
                    retry_abstained: bool = False, on_result: Progress | None = None,
                    stop: threading.Event | None = None, grace: float = DEFAULT_GRACE,
                    breaker: int = DEFAULT_BREAKER) -> RunSummary:
        """Like ``judge_items``, with the pending tasks dealt round-robin to the workers."""
        import queue

        from scijudge.errors import ModelError

        claimed = run is not None and run._writer is None
        if run is not None:
            run.claim_writer()
        tasks, summary = _pending(items, self._judges, run, retry_abstained, limit)
        started = time.perf_counter()
        index = {id(j): n for n, j in enumerate(self._judges)}
        payload = [(item.model_dump(mode="json"), index[id(judge)], part) for item, judge, part in tasks]
        shards = [payload[k::len(self._inboxes)] for k in range(len(self._inboxes))]
        for inbox, shard in zip(self._inboxes, shards):
            inbox.put(shard)
        fatal: tuple[str, str] | None = None
        running = len(shards)
        outstanding = len(payload)
        gate = _Gate(stop or threading.Event(), breaker)
        deadline: float | None = None
        try:
            while running:
                if (fatal is not None or (stop is not None and stop.is_set())) and deadline is None:
                    self._stop.set()  # workers start no new request; answers in flight still arrive
                    deadline = time.monotonic() + grace
                if deadline is not None and time.monotonic() >= deadline:
                    break
                try:
                    kind, data = self._outbox.get(timeout=0.2)
                except queue.Empty:
                    continue
                if kind == "done":
                    running -= 1
                elif kind == "error":
                    fatal = fatal or tuple(data)
                elif kind == "no_answer":
                    outstanding -= 1
                    summary.add_no_answer(data)
                    if fatal is None:
                        gate.no_answer(data)
                        if gate.fatal is not None:
                            fatal = ("endpoint", str(gate.fatal))
                else:
                    outstanding -= 1
                    gate.ok()
                    if run is not None:
                        run.record_dump(data)
                    # Validated in the worker already: construct without validating again (the summary reads scalars).
                    result = JudgeResult.model_construct(**data)
                    summary.add(result)
                    if on_result is not None:
                        on_result(result, summary)
        finally:
            summary.seconds = time.perf_counter() - started
            summary.interrupted = stop is not None and stop.is_set()
            if claimed:
                run.release_writer()
        if summary.interrupted or fatal is not None:
            summary.abandoned = outstanding  # not answered when the run stopped (in flight or never started)
        if fatal is not None:
            error = EndpointError(fatal[1]) if fatal[0] == "endpoint" else ModelError(f"a worker process stopped: {fatal[1]}")
            error.summary = summary  # type: ignore[attr-defined]
            raise error
        return summary


def judge_items_in_processes(items: Sequence[Item], recipes: Sequence[JudgeRecipe], *, processes: int,
                             run: Run | None = None, concurrency: int = 8, limit: int | None = None,
                             retry_abstained: bool = False, on_result: Progress | None = None,
                             use_cache: bool = True, stop: threading.Event | None = None,
                             grace: float = DEFAULT_GRACE, breaker: int = DEFAULT_BREAKER) -> RunSummary:
    """``judge_items`` over ``processes`` worker processes (started and stopped here), ``concurrency`` in all."""
    with WorkerPool(recipes, processes=processes, concurrency=concurrency, use_cache=use_cache) as pool:
        return pool.judge_items(items, run=run, limit=limit, retry_abstained=retry_abstained, on_result=on_result,
                                stop=stop, grace=grace, breaker=breaker)
