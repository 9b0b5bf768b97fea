"""The one judgment lifecycle every executor goes through.

An executor decides *how* judgments are made (threads, worker processes, provider batches, Ray actors); the
lifecycle decides what happens to them, the same way for all: each result is stored the moment it arrives
(``record``), a judgment with no answer is counted and never stored (``no_answer``), a streak of those or a
run-level fault closes the gate so that nothing more is sent (``fail``), a stop request (Ctrl-C) closes it
too, and answers still in flight get ``grace`` seconds. ``finish`` raises the run-level fault, carrying the
summary of what was stored before it.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from scijudge.chain.chain import stopping_on
from scijudge.errors import EndpointError, TransportFailure
from scijudge.records import JudgeResult
from scijudge.run.store import Run
from scijudge.run.summary import DEFAULT_BREAKER, DEFAULT_GRACE, Progress, RunSummary


class Gate:
    """Whether new judgments may start, and the streak of ones with no answer; shared by every thread.

    Checked before anything is sent, so that a fault or a stop request halts queued work at once instead of
    after the main loop has noticed. Seen by the chain as an event (``is_set``): no retry is sent once closed.
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

    def is_set(self) -> bool:
        return self.closed

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


class Lifecycle:
    """One run's bookkeeping: the store, the summary, the gate, the grace period and the progress callback."""

    def __init__(self, store: Run | None, summary: RunSummary, *, stop: threading.Event | None = None,
                 grace: float = DEFAULT_GRACE, breaker: int = DEFAULT_BREAKER,
                 on_result: Progress | None = None) -> None:
        self.store = store
        self.summary = summary
        self.gate = Gate(stop or threading.Event(), breaker)
        self.grace = grace
        self.on_result = on_result
        self._lock = threading.Lock()
        self._started = time.perf_counter()

    @property
    def closed(self) -> bool:
        """No new judgment may start (stopped, or a run-level fault)."""
        return self.gate.closed

    @property
    def stopped(self) -> bool:
        """The user asked the run to stop (Ctrl-C/SIGTERM)."""
        return self.gate.stop.is_set()

    def done_keys(self, *, retry_abstained: bool) -> set[str]:
        """Keys the store already holds (executors that plan remotely, like Ray, skip these)."""
        return self.store.completed_keys(include_abstained=not retry_abstained) if self.store is not None else set()

    # --- results arriving -----------------------------------------------------------------------
    def record(self, result: JudgeResult) -> None:
        """Store one result now, count it, and report progress."""
        with self._lock:
            if self.store is not None:
                try:
                    self.store.record(result)
                except Exception as exc:  # the store cannot be written (disk full): nothing more is sent
                    self.fail(exc)
                    raise
            self.summary.add(result)
        self.gate.ok()
        if self.on_result is not None:
            self.on_result(result, self.summary)

    def record_all(self, results: list[JudgeResult]) -> None:
        """Store several results in one commit (the asyncio executor's group commit: the answers that arrive in
        one turn of its event loop), then count and report each. Nothing is counted or reported before its row
        is committed. If the one commit fails, each result is stored alone, so every row that can be stored is
        (as ``record`` one by one would) and the first that cannot closes the gate and raises."""
        if len(results) < 2 or self.store is None:
            for result in results:
                self.record(result)
            return
        with self._lock:
            try:
                with self.store.transaction():
                    for result in results:
                        self.store.record(result)
            except Exception:
                stored = False
            else:
                stored = True
                for result in results:
                    self.summary.add(result)
        if not stored:
            for result in results:
                self.record(result)
            return
        self.gate.ok()
        if self.on_result is not None:
            for result in results:
                self.on_result(result, self.summary)

    def record_dump(self, data: dict[str, Any]) -> None:
        """Store a result that was validated in another process (as its JSON dump)."""
        with self._lock:
            if self.store is not None:
                try:
                    self.store.record_dump(data)
                except Exception as exc:
                    self.fail(exc)
                    raise
            result = JudgeResult.model_construct(**data)  # validated already: the summary reads scalars
            self.summary.add(result)
        self.gate.ok()
        if self.on_result is not None:
            self.on_result(result, self.summary)

    def no_answer(self, reason: str) -> None:
        """A judgment got no answer: counted (a re-run retries it), never stored; a streak stops the run."""
        with self._lock:
            self.summary.add_no_answer(reason)
        self.gate.no_answer(reason)

    def fail(self, exc: BaseException) -> None:
        """A run-level fault: nothing more is sent; ``finish`` raises it."""
        self.gate.fail(exc)

    def never_sent(self, count: int) -> None:
        """The executor stopped with ``count`` planned judgments it never sent (``RunSummary.not_sent``)."""
        with self._lock:
            self.summary.not_sent = max(0, count)

    # --- making one judgment in this process ------------------------------------------------------
    def judge(self, judge: Any, item: Any, part: str) -> list[JudgeResult] | None:
        """Make one task's judgments unless the gate is closed (None: not started, nothing sent, or stopped
        before an answer came). Run-level faults close the gate and propagate; a judgment with no answer is
        counted by the caller through ``TransportFailure``."""
        if self.closed:
            return None
        with stopping_on(self.gate):  # the chain sends nothing (retries included) once the gate closes
            try:
                return list(judge.judge_item(item, part))
            except TransportFailure:
                if self.closed:
                    return None  # stopped (or another task hit a fault) before it got an answer: not a judgment
                raise
            except Exception as exc:
                self.fail(exc)
                raise

    async def ajudge(self, judge: Any, item: Any, part: str, *, blocking: Any = None) -> list[JudgeResult] | None:
        """``judge`` awaited on an event loop, with the same gate and faults: a judge with a native
        ``ajudge_item`` is awaited; any other runs ``judge_item`` in ``blocking`` (a thread pool)."""
        import asyncio
        import contextvars

        if self.closed:
            return None
        with stopping_on(self.gate):
            try:
                if getattr(judge, "native_async", False):
                    return list(await judge.ajudge_item(item, part))
                ctx = contextvars.copy_context()
                loop = asyncio.get_running_loop()
                return list(await loop.run_in_executor(blocking, ctx.run, judge.judge_item, item, part))
            except TransportFailure:
                if self.closed:
                    return None
                raise
            except Exception as exc:
                self.fail(exc)
                raise

    # --- the end ---------------------------------------------------------------------------------
    def finish(self, *, abandoned: int = 0) -> RunSummary:
        """Close the summary; raise the run-level fault (with the summary attached) if there was one.

        ``abandoned``: the judgments the executor had sent whose answer was not stored (in flight when the run
        stopped); those it never sent are told with ``never_sent``.
        """
        summary = self.summary
        summary.abandoned = abandoned
        summary.interrupted = self.stopped
        summary.seconds = time.perf_counter() - self._started
        fatal = self.gate.fatal
        if fatal is not None:
            fatal.summary = summary  # type: ignore[attr-defined]
            raise fatal
        return summary
