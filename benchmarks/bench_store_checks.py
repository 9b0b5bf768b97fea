"""What the store's safety checks cost (issue 35): SQLite's quick_check when a store is opened to write, and the
row check every reader runs (folded into its own query), each timed side by side with the same step without it.

    python benchmarks/bench_store_checks.py                 # 50,000 judgments
    python benchmarks/bench_store_checks.py --rows 200000

Arms alternate within one process on one store; medians of --rounds are shown, with the ratio checked / unchecked.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from unittest import mock


def build(path: Path, n: int) -> None:
    from scijudge.records import Attempt, JudgeResult
    from scijudge.run.store import Run

    attempt = [Attempt(strategy="json_schema", temperature=0.0, outcome="ok")]
    with Run(path) as run, run.transaction():
        run.record_many(JudgeResult(
            item_id=f"q{k:07d}", judge=f"yescieval.qa.j{k % 3}", family="likert", spec_hash="h", model="m",
            status="ok" if k % 17 else "abstained", score=float(k % 5 + 1) if k % 17 else None,
            result={"rating": k % 5 + 1, "rationale": "a rationale of some length " * 6},
            rationale="a rationale of some length " * 6, attempts=attempt, tokens_in=300, tokens_out=80,
            created_at="2026-12-01T10:00:00+00:00").model_dump(mode="json") for k in range(n))


def timed(step: Callable[[], object], rounds: int, checked: bool) -> float:
    import scijudge.run.store as store

    times = []
    for _ in range(rounds):
        with mock.patch.object(store, "quick_check", store.quick_check if checked else (lambda db, path: None)), \
                mock.patch.object(store, "check_columns", store.check_columns if checked else (lambda *a: None)):
            started = time.perf_counter()
            step()
            times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    from scijudge.run.store import Run

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "run.sqlite"
        build(path, args.rows)
        size = path.stat().st_size / 2**20

        def open_to_write() -> None:
            with Run(path) as run:
                run.claim_writer()

        def to_pandas() -> None:
            with Run(path, create=False) as run:
                run.to_pandas()

        def export() -> None:
            with Run(path, create=False) as run:
                run.export(Path(folder) / "out.jsonl")

        print(f"{args.rows:,} judgments, {size:.1f} MiB store; median of {args.rounds} rounds, arms alternating")
        print(f"{'step':<34}{'checked s':>11}{'unchecked s':>13}{'ratio':>8}")
        for name, step in (("open to write (quick_check)", open_to_write), ("to_pandas (row check)", to_pandas),
                           ("export jsonl (row check)", export)):
            pairs = [(timed(step, 1, True), timed(step, 1, False)) for _ in range(args.rounds)]
            on, off = statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)
            print(f"{name:<34}{on:>11.3f}{off:>13.3f}{on / off:>8.2f}")


if __name__ == "__main__":
    main()
