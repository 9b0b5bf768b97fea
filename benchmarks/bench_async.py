"""Many slow judgments in flight (issue 41 item 1): judgments/s as a ratio to the ideal (concurrency / latency).

Side by side in one run, against one loopback OpenAI-compatible server in its own process (its CPU is not
charged to the judge), for each setting: scijudge's asyncio executor (``judge_items(executor="async")``, the CLI's
choice from ``--concurrency 64`` for API models), scijudge's thread executor (one thread per judgment in flight),
and plain DSPy (``dspy.Predict`` with DSPy's JSONAdapter on a stock ``dspy.LM``, in a thread pool of the same
size: what a DSPy user gets without scijudge); and, as the ceiling this machine and server allow at that moment,
a bare aiohttp client posting the same request bodies (no framework at all). Each runs in a fresh child
process, so the peak memory (max RSS) is its own. A bounded number of judgments per setting (8 rounds of the
concurrency by default): on a shared machine the rate is noisy; read the ratio.

    python benchmarks/bench_async.py                 # 512 in flight at 2 s, and 64 in flight at 100 ms
    python benchmarks/bench_async.py --rounds 4      # fewer judgments
    python benchmarks/bench_async.py --profile       # where the asyncio executor's CPU per judgment goes
    python benchmarks/bench_async.py --setting 64:0.1 --ways "async executor"   # one setting, one way
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "true")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _loopback import ServerProcess, fresh_dspy_cache, make_items

SETTINGS = ((512, 2.0), (64, 0.1))
WAYS = ("async executor", "thread executor", "plain dspy.Predict", "raw aiohttp")


def _measure(way: str, url: str, concurrency: int, n: int, out: mp.Queue) -> None:
    """One way, in its own process: (judgments/s, CPU ms per judgment, max RSS MB, ok)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # one socket per judgment in flight, for every way
    items = make_items(f"{way[:5]}-c{concurrency}", n)
    warm = make_items(f"warm-{way[:5]}", 8)
    if way == "raw aiohttp":
        import asyncio

        import aiohttp

        from scijudge import Judge, get_spec

        builder = Judge(get_spec("yescieval.qa.correctness"))
        bodies = [builder.chain.chat_body("judge", builder.signature, [], builder.inputs_for(item),
                                          strategy="json_schema", temperature=0.0) for item in items]

        async def post_all(batch: list) -> tuple[int, float, float]:
            limit = asyncio.Semaphore(concurrency)
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
                async def one(body: dict) -> bool:
                    async with limit, session.post(f"{url}/chat/completions", json=body) as reply:
                        return "choices" in await reply.json()

                await asyncio.gather(*(one(b) for b in batch[:8]))  # warm
                cpu0, wall0 = time.process_time(), time.perf_counter()
                done = sum(await asyncio.gather(*(one(b) for b in batch)))
                return done, time.perf_counter() - wall0, time.process_time() - cpu0

        ok, wall, cpu = asyncio.run(post_all(bodies))
    elif way == "plain dspy.Predict":
        from concurrent.futures import ThreadPoolExecutor

        import dspy

        from scijudge import Judge, get_spec

        spec = get_spec("yescieval.qa.correctness")
        builder = Judge(spec)  # only to give plain DSPy the same input texts (computed before the clock starts)
        predict = dspy.Predict(builder.signature)
        lm = dspy.LM("openai/judge", api_base=url, api_key="sk-no-key", cache=False, num_retries=0)
        adapter = dspy.JSONAdapter()

        def one(inputs: dict) -> bool:
            with dspy.context(lm=lm, adapter=adapter):
                return predict(**inputs) is not None

        warm = [builder.inputs_for(item) for item in warm]
        items = [builder.inputs_for(item) for item in items]
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            list(pool.map(one, warm))
            cpu0, wall0 = time.process_time(), time.perf_counter()
            ok = sum(pool.map(one, items))
            wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    else:
        from scijudge import Judge, get_spec, judge_items, make_lm

        judge = Judge(get_spec("yescieval.qa.correctness"), lm=make_lm("openai/judge", api_base=url, cache=False))
        executor = "async" if way == "async executor" else "threads"
        judge_items(warm, [judge], executor=executor, concurrency=8)
        cpu0, wall0 = time.process_time(), time.perf_counter()
        summary = judge_items(items, [judge], executor=executor, concurrency=concurrency)
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        ok = summary.ok
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out.put((n / wall, 1000 * cpu / n, rss, ok))


def _profile(url: str, n: int) -> None:
    """cProfile of the asyncio executor's event loop (run in this thread), top functions by own time."""
    import asyncio
    import cProfile
    import pstats

    from scijudge import Judge, get_spec, make_lm
    from scijudge.run.aio import AsyncExecutor
    from scijudge.run.lifecycle import Lifecycle
    from scijudge.run.summary import RunSummary

    judge = Judge(get_spec("yescieval.qa.correctness"), lm=make_lm("openai/judge", api_base=url, cache=False))
    tasks = [(item, judge, "") for item in make_items("profile", n)]
    life = Lifecycle(None, RunSummary(planned=n))
    profile = cProfile.Profile()
    cpu0 = time.process_time()
    profile.enable()
    asyncio.run(AsyncExecutor(concurrency=64)._run(tasks, life))
    profile.disable()
    print(f"{n} judgments, {1000 * (time.process_time() - cpu0) / n:.2f} ms CPU each (profiler on; DSPy's thread "
          "hops not shown)")
    pstats.Stats(profile).sort_stats("tottime").print_stats(25)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=8, help="judgments per setting = rounds x concurrency")
    parser.add_argument("--ways", nargs="+", default=list(WAYS), choices=WAYS)
    parser.add_argument("--setting", action="append", metavar="IN_FLIGHT:LATENCY_S",
                        help="only this setting (repeatable), e.g. 64:0.1; default: 512:2 and 64:0.1")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    fresh_dspy_cache()
    ctx = mp.get_context("spawn")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (shared machines: read the ratio)")
    if args.profile:
        with ServerProcess(0.1) as server:
            _profile(server.url, 640)
        return
    print(f"{'in flight':>9} {'latency':>8} {'way':<20} {'judgments':>9} {'j/s':>7} {'ideal':>6} {'ratio':>6} "
          f"{'cpu ms/j':>8} {'max RSS':>8}")
    settings = [(int(c), float(s)) for c, s in (x.split(":") for x in args.setting)] if args.setting else SETTINGS
    for concurrency, latency in settings:
        n = args.rounds * concurrency
        with ServerProcess(latency) as server:
            for way in args.ways:
                out: mp.Queue = ctx.Queue()
                child = ctx.Process(target=_measure, args=(way, server.url, concurrency, n, out))
                child.start()
                while child.is_alive() and out.empty():
                    child.join(0.5)
                if out.empty():
                    print(f"{concurrency:>9} {latency * 1000:>6.0f}ms {way:<20} failed (exit {child.exitcode})")
                    continue
                rate, cpu, rss, ok = out.get()
                child.join(30)
                ideal = concurrency / latency
                note = "" if ok == n else f"  ({ok} of {n} ok)"
                print(f"{concurrency:>9} {latency * 1000:>6.0f}ms {way:<20} {n:>9} {rate:>7.1f} {ideal:>6.0f} "
                      f"{rate / ideal:>6.2f} {cpu:>8.2f} {rss:>6.0f}MB{note}", flush=True)


if __name__ == "__main__":
    main()
