"""The default executor: one bounded thread pool over every (item, judge, part) task, in this process.

All tasks share the pool (no per-item or per-judge barrier), so a slow item never idles the workers. Each
worker stores its result itself the moment it arrives, so what was sent but not yet stored is bounded by the
number of threads: a kill at any moment loses at most ``concurrency`` answers in flight, never a queue.
"""

from __future__ import annotations

import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

from scijudge.errors import TransportFailure
from scijudge.run.lifecycle import Lifecycle
from scijudge.run.plan import Task


@dataclass
class ThreadExecutor:
    """Judge with ``concurrency`` threads of this process (API models, and local models that batch in-process)."""

    concurrency: int = 8
    name: str = "threads"
    plans_locally: bool = True

    def check(self, judges: list[object]) -> None:
        """Every judge can run in threads."""

    def execute(self, tasks: list[Task], life: Lifecycle) -> int:
        """Run the tasks; returns how many were in flight without an answer when the run stopped (those never
        sent are told to ``life.never_sent``)."""
        workers = max(1, self.concurrency)
        queue = iter(tasks)
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="scijudge")
        in_flight: set[Future[None]] = set()
        skipped: list[int] = []  # tasks a worker picked up after the stop: never sent (list.append is atomic)
        stopped: list[int] = []  # sent, then ended by the stop without an answer (a retry the stop cut short)

        def one(task: Task) -> None:
            item, judge, part = task
            if life.closed:
                skipped.append(1)
                return
            try:
                results = life.judge(judge, item, part)
            except TransportFailure as exc:
                life.no_answer(str(exc))
                return
            if results is None:
                stopped.append(1)
                return
            for result in results:
                life.record(result)

        def submit_next() -> None:
            if life.closed:
                return
            task = next(queue, None)
            if task is not None:
                in_flight.add(pool.submit(one, task))

        for _ in range(workers * 2):  # a short queue keeps threads busy; queued tasks have sent nothing
            submit_next()
        deadline: float | None = None
        unsent = 0
        try:
            while in_flight:
                if life.closed and deadline is None:
                    deadline = time.monotonic() + life.grace
                    for queued in [f for f in in_flight if f.cancel()]:  # not started: never sent
                        in_flight.discard(queued)
                        unsent += 1
                    if not in_flight:
                        break
                timeout = 0.2 if deadline is None else max(0.0, min(0.2, deadline - time.monotonic()))
                finished, _ = wait(in_flight, timeout=timeout, return_when=FIRST_COMPLETED)
                for future in finished:
                    in_flight.discard(future)
                    if not future.cancelled():
                        try:
                            future.result()
                        except Exception:
                            pass  # a run-level fault: the gate holds it and ``finish`` raises it
                    submit_next()
                if deadline is not None and time.monotonic() >= deadline:
                    break
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
        if life.closed:
            life.never_sent(unsent + len(skipped) + sum(1 for _ in queue))
        return len(in_flight) + len(stopped)
