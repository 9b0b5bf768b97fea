"""Dynamic batching: requests from many threads (or event loops) are grouped into one model call.

Callers submit work and block on a future; one daemon worker thread owns the model. The worker takes the
oldest pending job, waits until ``max_batch_size`` jobs of the same group (same adapter) are pending or the
oldest has waited ``max_wait_s``, and runs them together. Jobs are taken in whole prefix-key groups (the same
rubric when prompts put the rubric first, the same item when they put the item first: rubric-major or
item-major scheduling), oldest group first, so their common prompt prefix is computed once. While a batch runs, new jobs queue up
and form the next batch, so under load batches fill without waiting.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger("scijudge.lm.local")


@dataclass
class Job:
    """One unit of work waiting for a batch."""

    payload: Any
    group: Hashable
    prefix_key: Hashable
    max_batch_size: int
    max_wait_s: float
    future: Future = field(default_factory=Future)
    enqueued: float = field(default_factory=time.monotonic)


def _by_prefix(jobs: list[Job]) -> list[Job]:
    """Jobs grouped by prefix key, groups in order of their oldest job: a batch takes whole groups first.

    With rubric-first prompts the key is the rubric, so this is rubric-major scheduling; with item-first
    prompts it is the item, so item-major: either way a batch holds few, large shared-prefix groups.
    """
    groups: dict[Hashable, list[Job]] = {}
    for job in jobs:
        groups.setdefault(job.prefix_key, []).append(job)
    return [job for group in groups.values() for job in group]


class Batcher:
    """A queue plus one worker thread that calls ``run(group, payloads) -> results`` on batches of jobs."""

    def __init__(
        self, run: Callable[[Hashable, Sequence[Any]], Sequence[Any]], *, name: str = "scijudge-local"
    ) -> None:
        self._run = run
        self._name = name
        self._pending: list[Job] = []
        self._cv = threading.Condition()
        self._closed = False
        self._thread: threading.Thread | None = None
        self.batch_sizes: list[int] = []  # sizes of the batches run so far (for tests and benchmarks)

    def submit(
        self,
        payload: Any,
        *,
        group: Hashable,
        prefix_key: Hashable = None,
        max_batch_size: int = 8,
        max_wait_s: float = 0.01,
    ) -> Future:
        """Queue one job and return the future its result (or exception) will be set on."""
        job = Job(payload, group, prefix_key, max(1, int(max_batch_size)), max(0.0, float(max_wait_s)))
        with self._cv:
            if self._closed:
                raise RuntimeError("the local engine has been closed")
            self._pending.append(job)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                self._thread.start()
            self._cv.notify_all()
        return job.future

    def close(self) -> None:
        """Finish queued work, then stop the worker."""
        with self._cv:
            self._closed = True
            self._cv.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=60)

    def _same_group(self, group: Hashable) -> int:
        return sum(1 for job in self._pending if job.group == group)

    def _take(self) -> list[Job] | None:
        """Wait for and remove the next batch; None when closed and drained."""
        with self._cv:
            while not self._pending and not self._closed:
                self._cv.wait()
            if not self._pending:
                return None
            first = self._pending[0]
            deadline = first.enqueued + first.max_wait_s
            while not self._closed and self._same_group(first.group) < first.max_batch_size:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cv.wait(remaining)
            batch = _by_prefix([job for job in self._pending if job.group == first.group])[: first.max_batch_size]
            chosen = {id(job) for job in batch}
            self._pending = [job for job in self._pending if id(job) not in chosen]
            return batch

    def _loop(self) -> None:
        while True:
            batch = self._take()
            if batch is None:
                return
            live = [job for job in batch if job.future.set_running_or_notify_cancel()]
            if not live:
                continue
            self.batch_sizes.append(len(live))
            try:
                results = self._run(live[0].group, [job.payload for job in live])
            except BaseException as exc:
                logger.debug("local batch of %d failed: %r", len(live), exc)
                for job in live:
                    job.future.set_exception(exc)
                continue
            for job, result in zip(live, results, strict=True):
                if isinstance(result, BaseException):
                    job.future.set_exception(result)
                else:
                    job.future.set_result(result)
