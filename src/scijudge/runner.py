"""Judge many items with many judges through one bounded pool, persisting each judgment as it completes.

All (item, judge, part) tasks share one pool — no per-item or per-judge barrier — so a slow item never
idles the workers. Completed keys in the run store are skipped, which makes every run resumable.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from scijudge.data import Item
from scijudge.judges.base import Judge, JudgeResult, judgment_key, model_name
from scijudge.runs import Run


@dataclass
class RunSummary:
    """What one invocation did: counts, tokens and cost of the judgments made now."""

    planned: int = 0
    skipped_done: int = 0
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
            reason = (result.reason or "unknown").split(":")[0][:80]
            self.abstention_reasons[reason] = self.abstention_reasons.get(reason, 0) + 1


Task = tuple[Item, Judge, str]
Progress = Callable[[JudgeResult, RunSummary], None]


def plan(items: Sequence[Item], judges: Sequence[Judge], run: Run | None, *,
         retry_abstained: bool = False) -> tuple[list[Task], int]:
    """Every (item, judge, part) not yet in the run store, in item-major order, and how many were done."""
    done = run.completed_keys(include_abstained=not retry_abstained) if run is not None else set()
    tasks: list[Task] = []
    skipped = 0
    for item in items:
        for judge in judges:
            judge.inputs_for(item, judge.parts(item)[0])  # fail early, before any LM call
            for part in judge.parts(item):
                key = judgment_key(item.id, judge.name, part, judge.spec_hash, model_name(judge._lm()))
                if key in done:
                    skipped += 1
                else:
                    tasks.append((item, judge, part))
    return tasks, skipped


def judge_items(items: Sequence[Item], judges: Sequence[Judge], *, run: Run | None = None,
                concurrency: int = 8, limit: int | None = None, retry_abstained: bool = False,
                on_result: Progress | None = None) -> RunSummary:
    """Judge items concurrently; every result is written to ``run`` as soon as it completes.

    Args:
        limit: judge at most this many of the pending tasks (after skipping completed ones).
        on_result: called after each persisted result (progress bars, logging).
    """
    tasks, skipped = plan(items, judges, run, retry_abstained=retry_abstained)
    if limit is not None:
        tasks = tasks[:limit]
    summary = RunSummary(planned=len(tasks), skipped_done=skipped)
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
                finish(result)
                if fatal is None:
                    submit_next()
        summary.seconds = time.perf_counter() - started
        if fatal is not None:
            # Everything that completed before the failure is already stored; a re-run resumes from there.
            raise fatal
    return summary
