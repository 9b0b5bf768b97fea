"""Cache-on (the CLI default) vs ``--no-cache`` judgments/s at concurrency 64, side by side in one run.

Against the loopback OpenAI-compatible server (its own process, 100 ms latency). The two modes alternate for
``--rounds`` rounds on fresh items (every judgment is a cache miss followed by a cache write: the cost of the
cache on a new run); the cache is DSPy's memory + disk cache in a new temporary folder, as ``scijudge judge``
uses it. Prints each round, then the median judgments/s of each mode, the ideal (concurrency / latency), and the
ratio cache-on / no-cache (goal >= 0.9). CPU is this process only.

    python benchmarks/bench_cache.py                      # 3 rounds x 1,000 judgments per mode, concurrency 64
    python benchmarks/bench_cache.py --judgments 300 --rounds 2
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "true")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _loopback import ServerProcess, fresh_dspy_cache, make_items, run_loop_args


def main() -> None:
    parser = run_loop_args(__doc__)
    parser.add_argument("--executor", choices=("auto", "threads", "async"), default="auto",
                        help="auto: what `scijudge judge` picks (asyncio from concurrency 64 up)")
    args = parser.parse_args()
    cache_dir = fresh_dspy_cache()

    import tempfile

    from scijudge import Judge, Run, get_spec, judge_items, make_lm
    from scijudge.chain.cache import queued
    from scijudge.run.aio import AUTO_THRESHOLD

    spec = get_spec(os.environ.get("BENCH_SPEC", "yescieval.qa.correctness"))
    ideal = args.concurrency / args.latency
    executor = args.executor if args.executor != "auto" else \
        "async" if args.concurrency >= AUTO_THRESHOLD else "threads"
    rates: dict[str, list[float]] = {"cache on": [], "no-cache": []}
    cpus: dict[str, list[float]] = {"cache on": [], "no-cache": []}
    print(f"DSPy cache folder {cache_dir}; {args.judgments} judgments per round, concurrency {args.concurrency}, "
          f"latency {args.latency * 1000:.0f} ms, ideal {ideal:.0f}/s, {executor} executor; load average "
          f"{os.getloadavg()[0]:.1f}")
    print(f"{'round':>5} {'mode':>9} {'j/s':>8} {'ratio to ideal':>14} {'cpu ms/j':>9}")
    with ServerProcess(args.latency) as server, tempfile.TemporaryDirectory() as tmp:
        judges = {mode: Judge(spec, lm=make_lm("openai/judge", api_base=server.url, cache=mode == "cache on"))
                  for mode in rates}
        for mode, judge in judges.items():  # warm clients and connection pools
            judge_items(make_items(f"warm-{mode}", 8), [judge], concurrency=8, executor=executor)
        for round_ in range(args.rounds):
            for mode in (("no-cache", "cache on") if round_ % 2 == 0 else ("cache on", "no-cache")):
                items = make_items(f"r{round_}-{mode}", args.judgments)
                with Run(Path(tmp) / f"r{round_}-{mode}.sqlite") as run:
                    cpu0, wall0 = time.process_time(), time.perf_counter()
                    summary = judge_items(items, [judges[mode]], run, concurrency=args.concurrency,
                                          executor=executor)
                    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
                assert summary.ok == args.judgments, summary
                assert queued() == 0  # judge_items returned only after the cache entries were on disk
                rate = args.judgments / wall
                rates[mode].append(rate)
                cpus[mode].append(1000 * cpu / args.judgments)
                print(f"{round_ + 1:>5} {mode:>9} {rate:>8.1f} {rate / ideal:>14.2f} {1000 * cpu / args.judgments:>9.2f}",
                      flush=True)
    on, off = statistics.median(rates["cache on"]), statistics.median(rates["no-cache"])
    print(f"median: cache on {on:.1f}/s ({on / ideal:.2f} of ideal), no-cache {off:.1f}/s ({off / ideal:.2f} of ideal)")
    print(f"ratio cache on / no-cache = {on / off:.2f}  (goal >= 0.90); per round: "
          + ", ".join(f"{a / b:.2f}" for a, b in zip(rates["cache on"], rates["no-cache"])))
    cpu_on, cpu_off = statistics.median(cpus["cache on"]), statistics.median(cpus["no-cache"])
    print(f"CPU ms per judgment: cache on {cpu_on:.2f}, no-cache {cpu_off:.2f}: the cache adds {cpu_on - cpu_off:.2f} ms "
          f"({cpu_on / cpu_off - 1:+.0%}); load average at end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
