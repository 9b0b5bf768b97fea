"""Checklist throughput: one shared pool over all criteria of all reports vs. a per-report semaphore.

20 reports x 25 criteria are judged against a loopback OpenAI-compatible server (in its own process) that
answers every request after a fixed latency. Both designs run the same ChecklistJudge with 20 requests in
flight at most:

- shared pool: scijudge's ``judge_items(..., concurrency=20)``: every (report, criterion) task in one pool,
  so a report's last criteria overlap with the next report's first ones;
- per-report semaphore (the reference design): reports one after another, each report's 25 criteria
  through a pool of 20; the next report starts when the slowest criterion of this one is done.

With a fixed latency L the ideal wall times are ceil(500 / 20) L = 25 L (shared) and 20 x ceil(25 / 20) L =
40 L (per report), a ratio of 1.6; variable provider latency makes the per-report barrier costlier still.

    python benchmarks/bench_checklist_pool.py            # 300 ms latency (about 25 s)
    python benchmarks/bench_checklist_pool.py --quick    # 100 ms latency (about 10 s)

At low latency the client's own CPU time per judgment (DSPy formatting, HTTP, run-store writes; ~5 ms on
2 cores) caps both designs and the ratio shrinks towards 1; real providers answer in seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "true")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _loopback


def _checklist_handler(body: dict[str, Any]) -> str:
    """Every request gets a valid binary verdict (the server's answer content does not matter here)."""
    return json.dumps({"judgment": {"reasoning": "the report states it", "evidence_quotes": [],
                                    "missing_elements": [], "verdict": "satisfied", "confidence": 0.9}})




def _items(reports: int, criteria: int) -> list[Any]:
    from scijudge.data import Item

    axes = ["Explicit Criteria", "Implicit Criteria", "Synthesis of Information", "Communication Quality"]
    items = []
    for r in range(reports):
        rubrics = [{"criterion": f"Report {r} criterion {c}: covers aspect {c} of the question.",
                    "weight": (-2.0 if c % 10 == 9 else float(1 + c % 5)), "axis": axes[c % len(axes)]}
                   for c in range(criteria)]
        report = f"# Report {r}\n\n" + "\n\n".join(f"Section {s} discusses aspect {s} with evidence." for s in range(40))
        items.append(Item(id=f"report-{r:02d}", question=f"Research question {r}?", answer=report,
                          meta={"rubrics": rubrics}))
    return items


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reports", type=int, default=20)
    parser.add_argument("--criteria", type=int, default=25)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--latency", type=float, default=0.3, help="seconds the server waits before answering")
    parser.add_argument("--quick", action="store_true", help="100 ms latency (same sizes)")
    args = parser.parse_args()
    latency = 0.1 if args.quick else args.latency

    import dspy

    from scijudge.judges.checklist import ChecklistJudge
    from scijudge.lm import make_lm
    from scijudge.run.api import judge_items
    from scijudge.run.store import Run

    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)
    items = _items(args.reports, args.criteria)
    total = args.reports * args.criteria
    c = args.concurrency
    with _loopback.ServerProcess(latency, handler=_checklist_handler) as server, tempfile.TemporaryDirectory() as tmp:
        judge = ChecklistJudge(lm=make_lm("judge", api_base=server.url, cache=False))
        warm = judge_items(items[:1], [judge], concurrency=c)  # connections, schema cache, imports
        assert warm.ok == args.criteria, warm

        with Run(Path(tmp) / "shared.sqlite") as run:
            started = time.perf_counter()
            summary = judge_items(items, [judge], run=run, concurrency=c)
            shared = time.perf_counter() - started
        assert summary.ok == total, summary

        with Run(Path(tmp) / "per_report.sqlite") as run:
            started = time.perf_counter()
            ok = 0
            for item in items:  # the reference design: one report at a time, a semaphore of c inside it
                with ThreadPoolExecutor(max_workers=c) as pool:
                    for result in pool.map(lambda part, item=item: judge.judge_one(item, part), judge.parts(item)):
                        run.record(result)
                        ok += result.ok
            per_report = time.perf_counter() - started
        assert ok == total, ok

    ideal_shared = -(-total // c) * latency
    ideal_per_report = args.reports * -(-args.criteria // c) * latency
    print(f"{args.reports} reports x {args.criteria} criteria = {total} judgments, concurrency {c}, "
          f"latency {latency * 1000:.0f} ms")
    print(f"{'design':<22} {'wall s':>8} {'ideal s':>8} {'judgments/s':>12}")
    print(f"{'shared pool':<22} {shared:>8.2f} {ideal_shared:>8.2f} {total / shared:>12.1f}")
    print(f"{'per-report semaphore':<22} {per_report:>8.2f} {ideal_per_report:>8.2f} {total / per_report:>12.1f}")
    print(f"ratio per-report / shared wall time: {per_report / shared:.2f} "
          f"(ideal {ideal_per_report / ideal_shared:.2f})")


if __name__ == "__main__":
    main()
