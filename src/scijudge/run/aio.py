"""The asyncio executor: every (item, judge, part) task a coroutine on one event loop, so that hundreds or
thousands of slow judgments wait at once without a thread each (issue 41).

Each request goes through the same chain (``StructuredChain.acall``: the chain's steps awaited through DSPy's
async LM call, ``lm.acall``) and each task through the same lifecycle as the thread executor
(``Lifecycle.ajudge``/``record_all``/``no_answer``): a result is stored in the turn of the event loop it arrives
in (one group commit for the answers of that turn), before it is counted or reported and before that task's
slot takes the next task, so what was sent but not stored is bounded by ``concurrency`` at any moment; a stop
request or a run-level fault closes the gate, answers in flight get ``grace`` seconds, and those still out
are cancelled (counted as in flight, never stored). Judges with no native async path (decision mode, presets,
fused, checklist judges, local models) run ``judge_item`` in a pool of ``concurrency`` threads.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from scijudge.errors import TransportFailure
from scijudge.records import JudgeResult
from scijudge.run.lifecycle import Lifecycle
from scijudge.run.plan import Task

AUTO_THRESHOLD = 64
"""``--executor auto`` (the CLI default) picks this executor for API models from this ``--concurrency`` up."""


@dataclass
class AsyncExecutor:
    """Judge with ``concurrency`` tasks in flight on one asyncio event loop (a thread of its own)."""

    concurrency: int = 512
    name: str = "async"
    plans_locally: bool = True

    def check(self, judges: list[object]) -> None:
        """Every judge can run here (those with no native async path in threads)."""

    def execute(self, tasks: list[Task], life: Lifecycle) -> int:
        """Run the tasks; returns how many were in flight without an answer when the run stopped (those never
        sent are told to ``life.never_sent``)."""
        if not tasks:
            return 0
        raise_open_files(self.concurrency)
        # The loop runs in its own thread: this thread (the CLI's main thread) keeps its signal handlers, and a
        # caller that already runs an event loop (a notebook) can still call judge_items.
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                with _older_objects_frozen():
                    box["left"] = asyncio.run(self._run(tasks, life))
            except BaseException as exc:  # handed to the caller's thread
                box["error"] = exc

        import threading

        thread = threading.Thread(target=run, name="scijudge-async", daemon=True)
        thread.start()
        try:
            while thread.is_alive():
                thread.join(0.2)
        except KeyboardInterrupt:  # a library caller's Ctrl-C: stop as the CLI's first Ctrl-C does, then raise
            life.gate.stop.set()
            thread.join(life.grace + 5)
            raise
        if "error" in box:
            raise box["error"]
        return int(box.get("left", 0))

    async def _run(self, tasks: list[Task], life: Lifecycle) -> int:
        slots = max(1, self.concurrency)
        queue: Iterator[Task] = iter(tasks)
        loop = asyncio.get_running_loop()
        blocking = ThreadPoolExecutor(max_workers=min(slots, 256), thread_name_prefix="scijudge-async-blocking") \
            if not all(getattr(task[1], "native_async", False) for task in tasks) else None
        # DSPy's async call hops to the default executor for its set-up (``prepare``, routing, pricing): a few
        # more threads than asyncio's default keep those hops from queueing behind each other.
        loop.set_default_executor(ThreadPoolExecutor(max_workers=16, thread_name_prefix="scijudge-async-hop"))
        in_flight: set[asyncio.Task[bool]] = set()
        idle = asyncio.Event()
        skipped = 0
        stopped = 0  # sent, then ended by the stop without an answer (a retry the stop cut short)

        ending = False

        def idle_if_done() -> None:
            if not in_flight and not group.held:
                idle.set()

        group = _GroupCommit(life, loop, lambda: start_next(), idle_if_done)

        async def one(task: Task) -> bool:
            """Judge one task; True when its answers wait for the group commit."""
            nonlocal skipped, stopped
            item, judge, part = task
            if life.closed:
                skipped += 1
                return False
            try:
                results = await life.ajudge(judge, item, part, blocking=blocking)
            except TransportFailure as exc:
                life.no_answer(str(exc))
                return False
            except Exception:
                return False  # a run-level fault: the gate holds it and ``finish`` raises it
            if results is None:
                stopped += 1
                return False
            group.add(results)
            return True

        def start_next() -> None:
            if life.closed or ending:
                return
            task = next(queue, None)
            if task is None:
                return
            running = loop.create_task(one(task))
            in_flight.add(running)
            running.add_done_callback(finished)

        def finished(done: asyncio.Task[bool]) -> None:
            in_flight.discard(done)
            if done.cancelled() or done.exception() is not None or not done.result():
                start_next()  # else the commit starts it: a slot takes its next task only once its answers are stored
            idle_if_done()

        for _ in range(slots):
            start_next()
        try:
            left = await _drain(in_flight, group, idle, life)
        finally:
            ending = True  # nothing new starts from here
            group.commit()  # answers that arrived are stored, however the loop ends
            await _close_clients(tasks)
            if blocking is not None:
                blocking.shutdown(wait=False, cancel_futures=True)
        if life.closed:
            life.never_sent(skipped + sum(1 for _ in queue))
        return left + stopped


class _GroupCommit:
    """The answers that arrive in one turn of the event loop, stored in one transaction at the end of that turn
    (``Lifecycle.record_all``: committed before they are counted or reported); the slots whose answers waited
    take their next tasks after it (``start_next``, once per slot)."""

    def __init__(self, life: Lifecycle, loop: asyncio.AbstractEventLoop, start_next: Callable[[], None],
                 idle_if_done: Callable[[], None]) -> None:
        self.life, self.loop, self.start_next, self.idle_if_done = life, loop, start_next, idle_if_done
        self.waiting: list[JudgeResult] = []
        self.held = 0  # slots whose answers wait for the commit

    def add(self, results: list[JudgeResult]) -> None:
        if not self.waiting and not self.held:
            self.loop.call_soon(self.commit)  # before the task's done callback: its slot waits for the commit
        self.waiting.extend(results)
        self.held += 1

    def commit(self) -> None:
        if not self.waiting and not self.held:
            return
        results, slots = self.waiting, self.held
        self.waiting, self.held = [], 0
        try:
            self.life.record_all(results)
        except Exception:
            pass  # the store cannot be written: the gate holds it and ``finish`` raises it
        for _ in range(slots):
            self.start_next()
        self.idle_if_done()


async def _drain(in_flight: set[asyncio.Task[bool]], group: _GroupCommit, idle: asyncio.Event,
                 life: Lifecycle) -> int:
    """Wait until every task is done and stored, or, once the gate closes, for ``life.grace`` seconds; cancel what
    is still out (sent, no answer in time: never stored) and return how many those were."""
    deadline: float | None = None
    while in_flight or group.held:
        if life.closed and deadline is None:
            deadline = time.monotonic() + life.grace
        if deadline is not None and time.monotonic() >= deadline:
            break
        wait = 0.1 if deadline is None else max(0.0, min(0.1, deadline - time.monotonic()))
        try:
            await asyncio.wait_for(idle.wait(), wait)
        except TimeoutError:
            pass
    left = sum(1 for running in in_flight if not running.done())
    for running in list(in_flight):
        running.cancel()
    if in_flight:
        await asyncio.gather(*in_flight, return_exceptions=True)
    return left


@contextmanager
def _older_objects_frozen() -> Iterator[None]:
    """While the run lasts, the garbage collector leaves alone what existed before it (``gc.freeze``): DSPy,
    litellm and the caller's data are some 100,000 objects that every full collection would scan again, about
    a tenth of a millisecond per judgment in ``benchmarks/bench_async.py``. What the run makes is collected as
    usual; the rest is handed back at the end (``gc.unfreeze``). A process that froze objects itself, or runs
    with the collector off, is left as it is."""
    import gc

    if not gc.isenabled() or gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


async def _close_clients(tasks: list[Task]) -> None:
    """Close the async connection pools this loop opened (each LM once)."""
    seen: set[int] = set()
    for _, judge, _ in tasks:
        lm = getattr(judge, "lm", None)
        if lm is None or id(lm) in seen:
            continue
        seen.add(id(lm))
        close = getattr(lm, "aclose", None)
        if close is not None:
            try:
                await close()
            except Exception:  # a pool that cannot close is released with its loop
                pass


def raise_open_files(concurrency: int) -> None:
    """Each request in flight holds a socket: lift the soft open-file limit to the hard one when the default
    (often 1,024) is below what ``concurrency`` needs."""
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = concurrency + 256
    if soft != resource.RLIM_INFINITY and soft < wanted:
        target = wanted if hard == resource.RLIM_INFINITY else min(hard, max(wanted, soft))
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            pass


def wants_async(judges: list[Any], concurrency: int) -> bool:
    """``--executor auto``: the asyncio executor for many API judgments in flight, threads otherwise (local
    ``hf:`` models batch in-process from threads as they always did)."""
    from scijudge.lm import is_local_model
    from scijudge.records import model_name

    return concurrency >= AUTO_THRESHOLD and all(
        getattr(j, "native_async", False) and not is_local_model(model_name(j.lm)) for j in judges)
