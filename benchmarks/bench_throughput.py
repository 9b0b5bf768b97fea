"""Judgments/s against a loopback server with injected latency, at several concurrency levels.

Measures the CLI default path: the response cache on (DSPy's memory + disk cache, in a new temporary folder,
so every judgment is a miss and then a write, as on a new run). ``--no-cache`` measures ``scijudge judge
--no-cache``. Prints, per concurrency: judgments/s, the ideal (concurrency / latency), the ratio to ideal, and
the framework's CPU milliseconds per judgment (this process only; the server runs in another process), and the
load average at the start (the machines these figures come from are shared: read the ratio, not the rate).

    python benchmarks/bench_throughput.py             # 1,000 judgments at concurrency 1 (30), 16 and 64, 100 ms
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

from _loopback import ServerProcess, fresh_dspy_cache, make_items


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--judgments", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--processes", type=int, default=4,
                        help="also run the highest concurrency spread over this many worker processes (0: skip)")
    parser.add_argument("--quick", action="store_true", help="200 judgments (c=1 always uses 30)")
    parser.add_argument("--no-cache", dest="cache", action="store_false",
                        help="no response cache (scijudge judge --no-cache); default: the cache on, as the CLI")
    args = parser.parse_args()
    total = 200 if args.quick else args.judgments
    cache_dir = fresh_dspy_cache()

    import tempfile

    from scijudge import Judge, Run, get_spec, judge_items, make_lm
    from scijudge.judges.recipe import JudgeRecipe
    from scijudge.run.processes import ProcessExecutor, WorkerPool

    spec = get_spec(os.environ.get("BENCH_SPEC", "yescieval.qa.correctness"))
    print(f"response cache: {f'on (memory + disk, {cache_dir})' if args.cache else 'off (--no-cache)'}; "
          f"latency {args.latency * 1000:.0f} ms; load average {os.getloadavg()[0]:.1f}")
    print(f"{'concurrency':>11} {'processes':>9} {'judgments':>9} {'j/s':>8} {'ideal':>8} {'ratio':>6} {'cpu ms/j':>9}")

    with ServerProcess(args.latency) as server, tempfile.TemporaryDirectory() as tmp:
        for concurrency in args.concurrency:
            n = min(total, 30) if concurrency == 1 else total
            lm = make_lm("openai/judge", api_base=server.url, cache=args.cache)
            judge = Judge(spec, lm=lm)
            items = make_items(f"c{concurrency}", n)
            judge_items(make_items(f"warm-c{concurrency}", 4), [judge], concurrency=4)  # warm client and connections
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
            recipe = JudgeRecipe(spec, "openai/judge", {"api_base": server.url, "cache": args.cache})
            items = make_items("mp", total)
            ideal = concurrency / args.latency
            start0 = time.perf_counter()
            with WorkerPool([recipe], processes=args.processes, concurrency=concurrency,
                            use_cache=args.cache) as pool:
                started = time.perf_counter() - start0
                executor = ProcessExecutor(pool=pool)
                judge_items(make_items("mp-warm", 4 * args.processes), pool.judges, executor=executor)  # warm
                with Run(Path(tmp) / "mp.sqlite") as run:
                    wall0 = time.perf_counter()
                    summary = judge_items(items, pool.judges, run, executor=executor)
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
