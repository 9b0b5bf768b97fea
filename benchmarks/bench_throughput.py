"""Judgments/s against a loopback server with injected latency, at several concurrency levels.

Prints, per concurrency: judgments/s, the ideal (concurrency / latency), the ratio to ideal, and the
framework's CPU seconds per judgment (this process only; the server runs in another process).

    python benchmarks/bench_throughput.py             # 1,000 judgments at concurrency 16 and 64, 100 ms latency
    python benchmarks/bench_throughput.py --quick     # fewer judgments
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "true")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _loopback import ServerProcess


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--judgments", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--processes", type=int, default=4,
                        help="also run the highest concurrency spread over this many worker processes (0: skip)")
    parser.add_argument("--quick", action="store_true", help="200 judgments (c=1 always uses 30)")
    args = parser.parse_args()
    total = 200 if args.quick else args.judgments

    import tempfile

    import dspy

    from scijudge import Item, Judge, Run, get_spec, judge_items, make_lm
    from scijudge.run.threads import JudgeRecipe, WorkerPool

    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)
    spec = get_spec(os.environ.get("BENCH_SPEC", "yescieval.qa.correctness"))
    print(f"{'concurrency':>11} {'processes':>9} {'judgments':>9} {'j/s':>8} {'ideal':>8} {'ratio':>6} {'cpu ms/j':>9}")
    papers = [{"title": "Capacity fade in layered oxides", "abstract": "Cycling at high voltage cracks particles."}]

    def make_items(tag: str, n: int) -> list:
        return [Item(id=f"{tag}-{i}", question="What limits battery life?", papers=papers,
                     answer=f"Answer {i}: particle cracking at high voltage [1].") for i in range(n)]

    with ServerProcess(args.latency) as server, tempfile.TemporaryDirectory() as tmp:
        for concurrency in args.concurrency:
            n = min(total, 30) if concurrency == 1 else total
            lm = make_lm("openai/judge", api_base=server.url, cache=False)
            judge = Judge(spec, lm=lm)
            items = make_items(f"c{concurrency}", n)
            judge_items(items[:4], [judge], concurrency=4)  # warm the client and connection pool
            with Run(Path(tmp) / f"c{concurrency}.sqlite") as run:
                cpu0, wall0 = time.process_time(), time.perf_counter()
                summary = judge_items(items, [judge], run=run, concurrency=concurrency)
                wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
            assert summary.ok == n, summary
            rate = n / wall
            ideal = concurrency / args.latency
            print(f"{concurrency:>11} {1:>9} {n:>9} {rate:>8.1f} {ideal:>8.1f} {rate / ideal:>6.2f} {1000 * cpu / n:>9.2f}")
        if args.processes > 1:
            concurrency = max(args.concurrency)
            recipe = JudgeRecipe(spec, "openai/judge", {"api_base": server.url, "cache": False})
            items = make_items("mp", total)
            ideal = concurrency / args.latency
            start0 = time.perf_counter()
            with WorkerPool([recipe], processes=args.processes, concurrency=concurrency, use_cache=False) as pool:
                started = time.perf_counter() - start0
                pool.judge_items(make_items("mp-warm", 4 * args.processes))  # as above: warm clients first
                with Run(Path(tmp) / "mp.sqlite") as run:
                    wall0 = time.perf_counter()
                    summary = pool.judge_items(items, run=run)
                    wall = time.perf_counter() - wall0
            assert summary.ok == total, summary
            rate = total / wall
            print(f"{concurrency:>11} {args.processes:>9} {total:>9} {rate:>8.1f} {ideal:>8.1f} {rate / ideal:>6.2f}"
                  f" {'-':>9}   workers started and warm (start-up took {started:.1f} s; CPU is in the workers)")
            with_startup = total / (wall + started)
            print(f"{concurrency:>11} {args.processes:>9} {total:>9} {with_startup:>8.1f} {ideal:>8.1f}"
                  f" {with_startup / ideal:>6.2f} {'-':>9}   the same, counting the start-up")

if __name__ == "__main__":
    main()
