"""The processes executor: worker processes that each rebuild the judges once, for very fast API endpoints.

One process tops out around 450 judgments/s because DSPy's per-call CPU holds the GIL (see
benchmarks/README.md). This executor spreads the pending tasks over worker processes; the parent alone
writes the run store, each result as soon as it arrives (through the run's lifecycle), so persistence,
resume, faults and interrupts behave exactly as with threads. Workers exit when the parent dies, however it
dies, and start no request once told to stop.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import as_completed as futures_as_completed
from dataclasses import dataclass
from typing import Any

from scijudge.data import Item
from scijudge.errors import EndpointError, ModelError, TransportFailure
from scijudge.judges.recipe import JudgeRecipe, recipe_of
from scijudge.records import JudgeResult
from scijudge.run.lifecycle import Lifecycle
from scijudge.run.plan import Task


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
            stop: Any = None, parent: int | None = None, started: Any = None) -> None:
    """A worker process: build the judges once, then judge each batch of tasks sent to ``inbox``.

    Every task's results go to ``outbox`` as soon as they complete (("results", [dump, ...]), or ("no_answer",
    reason) for a judgment that got none); a batch ends with ("done", None), preceded by ("error", (kind,
    message)) when a fatal error stopped it. Once ``stop`` is set no new request starts; ``started`` (a shared
    counter) counts the tasks that began sending. ``None`` in the inbox ends the worker.
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

    def judge_one(judge: Any, item: Item, part: str) -> list[JudgeResult] | None:
        from scijudge.chain.chain import stopping_on

        if stop is not None and stop.is_set():
            return None
        if started is not None:
            with started.get_lock():
                started.value += 1
        with stopping_on(stop):
            return list(judge.judge_item(item, part))

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
                if result:
                    outbox.put(("results", [one.model_dump(mode="json") for one in result]))
            if fatal is not None:
                kind = "endpoint" if isinstance(fatal, EndpointError) else "other"
                outbox.put(("error", (kind, f"{type(fatal).__name__}: {fatal}" if kind == "other" else str(fatal))))
            from scijudge.chain.cache import flush

            flush()  # a terminated worker skips atexit: write this batch's cache entries now
            outbox.put(("done", None))


class WorkerPool:
    """Worker processes that each rebuild the judges once and judge the batches they are sent.

    Only for API models (a local ``hf:`` model would be loaded once per process). The parent plans the
    tasks, skips completed ones, and alone writes the run store, each result as soon as it arrives.
    Workers exit when the parent dies, however it dies, and start no request once told to stop.

    Example::

        with WorkerPool(recipes, processes=2, concurrency=64) as pool:
            summary = scijudge.judge_items(items, pool.judges, run, executor=ProcessExecutor(pool=pool))
    """

    def __init__(self, recipes: Sequence[JudgeRecipe], *, processes: int, concurrency: int = 8,
                 use_cache: bool = True) -> None:
        from scijudge.lm import is_local_model

        if any(is_local_model(r.model) for r in recipes):
            raise ModelError("several processes are for API models; a local hf: model batches inside one process")
        self.recipes = list(recipes)
        self.processes = max(1, processes)
        self.concurrency = concurrency
        self.use_cache = use_cache
        self.judges = [recipe.build() for recipe in self.recipes]  # the parent plans keys and checks inputs
        self._workers: list[Any] = []
        self._inboxes: list[Any] = []
        self._outbox: Any = None
        self._stop: Any = None
        self._started: Any = None

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
        self._started = ctx.Value("q", 0)
        per_worker = max(1, self.concurrency // self.processes)
        for _ in range(self.processes):
            inbox = ctx.Queue()
            worker = ctx.Process(target=_worker, daemon=True,
                                 args=(self.recipes, per_worker, self.use_cache, inbox, self._outbox, self._stop,
                                       os.getpid(), self._started))
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

    def run_tasks(self, tasks: list[tuple[Item, int, str]], life: Lifecycle) -> int:
        """Deal ``(item, judge index, part)`` tasks round-robin to the workers and store results as they arrive
        (through ``life``); returns how many were in flight without an answer when the run stopped or failed
        (those never sent are told to ``life.never_sent``)."""
        import queue

        payload = [(item.model_dump(mode="json"), index, part) for item, index, part in tasks]
        shards = [payload[k::len(self._inboxes)] for k in range(len(self._inboxes))]
        with self._started.get_lock():
            started_before = self._started.value  # a reused pool counts on; read before any shard is sent
        for inbox, shard in zip(self._inboxes, shards):
            inbox.put(shard)
        fatal: BaseException | None = None
        running = len(shards)
        outstanding = len(payload)
        deadline: float | None = None
        while running:
            if (fatal is not None or life.closed) and deadline is None:
                self._stop.set()  # workers start no new request; answers in flight still arrive
                deadline = time.monotonic() + life.grace
            if deadline is not None and time.monotonic() >= deadline:
                break
            try:
                kind, data = self._outbox.get(timeout=0.2)
            except queue.Empty:
                continue
            if kind == "done":
                running -= 1
            elif kind == "error":
                if fatal is None:
                    fatal = EndpointError(data[1]) if data[0] == "endpoint" else ModelError(
                        f"a worker process stopped: {data[1]}")
                    life.fail(fatal)
            elif kind == "no_answer":
                outstanding -= 1
                life.no_answer(data)
            else:
                outstanding -= 1
                for dump in data:
                    life.record_dump(dump)
        if not (life.closed or fatal is not None):
            return 0
        with self._started.get_lock():
            started = int(self._started.value) - int(started_before)
        answered = len(payload) - outstanding
        in_flight = max(0, min(outstanding, started - answered))  # began sending, no answer stored
        life.never_sent(outstanding - in_flight)
        return in_flight


@dataclass
class ProcessExecutor:
    """Judge over ``processes`` worker processes (API models only), ``concurrency`` judgments in flight in all.

    Judges given as objects are rebuilt in each worker from their recipe (``scijudge.judges.recipe``); an
    already started ``pool`` can be reused across runs.
    """

    processes: int = 2
    concurrency: int = 8
    use_cache: bool = True
    pool: WorkerPool | None = None
    name: str = "processes"
    plans_locally: bool = True

    def check(self, judges: Sequence[Any]) -> None:
        from scijudge.lm import is_local_model

        for judge in judges:
            recipe = recipe_of(judge)
            if is_local_model(recipe.model):
                raise ModelError("several processes are for API models; a local hf: model batches inside one process")

    def execute(self, tasks: list[Task], life: Lifecycle) -> int:
        judges: list[Any] = []
        for _, judge, _ in tasks:
            if all(judge is not known for known in judges):
                judges.append(judge)
        if not tasks:
            return 0
        index = {id(j): n for n, j in enumerate(judges)}
        work = [(item, index[id(judge)], part) for item, judge, part in tasks]
        if self.pool is not None:
            return self.pool.run_tasks(work, life)
        with WorkerPool([recipe_of(j) for j in judges], processes=self.processes, concurrency=self.concurrency,
                        use_cache=self.use_cache) as pool:
            return pool.run_tasks(work, life)
