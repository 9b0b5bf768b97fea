"""A 10,000-judgment batch round trip against the loopback files+batches server, beside direct calls.

Prints wall time and scijudge's CPU per judgment (this process only: the server runs in its own process)
for the batch path (build lines, upload, create, poll, download, parse, validate, store) and, side by side,
for direct calls through the runner on the same server; the ratio is batch CPU ÷ direct CPU per judgment.

    python benchmarks/bench_batch.py                  # 10,000 batch judgments, 1,000 direct
    python benchmarks/bench_batch.py --judgments 1000 --direct 200
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "true")


def _answer(body: dict) -> str:
    return json.dumps({"judgment": {"rationale": "adequate support for most claims", "rating": 4}})


def _serve(port_queue: mp.Queue[int]) -> None:
    from scijudge.testing.batch_server import BatchServer

    server = BatchServer(_answer).start()
    port_queue.put(server.port)
    while True:
        time.sleep(3600)


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of another process (Linux /proc), to show where the wall time went."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--judgments", type=int, default=10_000)
    parser.add_argument("--direct", type=int, default=1_000, help="judgments through direct calls (CPU reference)")
    parser.add_argument("--batch-size", type=int, default=5_000)
    parser.add_argument("--poll", type=float, default=0.2)
    args = parser.parse_args()

    import dspy

    from scijudge import Item, Judge, Run, get_spec, judge_items, make_lm
    from scijudge.run.batch.executor import BatchReport, judge_items_batch

    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)
    ctx = mp.get_context("spawn")
    queue: mp.Queue[int] = ctx.Queue()
    proc = ctx.Process(target=_serve, args=(queue,), daemon=True)
    proc.start()
    url = f"http://127.0.0.1:{queue.get(timeout=60)}/v1"
    papers = [{"title": "Capacity fade in layered oxides", "abstract": "Cycling at high voltage cracks particles."}]
    spec = get_spec("yescieval.qa.correctness")

    def make_items(tag: str, n: int) -> list:
        return [Item(id=f"{tag}-{i}", question="What limits battery life?", papers=papers,
                     answer=f"Answer {i}: particle cracking at high voltage [1].") for i in range(n)]

    try:
        with tempfile.TemporaryDirectory() as tmp:
            judge = Judge(spec, lm=make_lm("openai/gpt-4o-mini", api_base=url, cache=False))
            judge_items(make_items("warm", 4), [judge], concurrency=4)  # warm the client and the imports
            rows = []
            with Run(Path(tmp) / "direct.sqlite") as run:
                cpu0, wall0, server0 = time.process_time(), time.perf_counter(), _cpu_seconds(proc.pid)
                direct = judge_items(make_items("d", args.direct), [judge], run=run, concurrency=64)
                rows.append(("direct (runner, concurrency 64)", direct.ok, time.perf_counter() - wall0,
                             time.process_time() - cpu0, None, _cpu_seconds(proc.pid) - server0))
            report = BatchReport()
            with Run(Path(tmp) / "batch.sqlite") as run:
                cpu0, wall0, server0 = time.process_time(), time.perf_counter(), _cpu_seconds(proc.pid)
                batch = judge_items_batch(make_items("b", args.judgments), [judge], run=run,
                                          batch_size=args.batch_size, poll=args.poll, report=report)
                rows.append((f"batch ({report.created} batches of <= {args.batch_size})", batch.ok,
                             time.perf_counter() - wall0, time.process_time() - cpu0, batch.cost,
                             _cpu_seconds(proc.pid) - server0))
    finally:
        proc.terminate()
        proc.join(10)
    print(f"{'path':<36} {'ok':>6} {'wall s':>8} {'cpu s':>7} {'cpu ms/j':>9} {'cost USD':>9} {'server cpu s':>12}")
    for name, ok, wall, cpu, cost, server in rows:
        print(f"{name:<36} {ok:>6} {wall:>8.2f} {cpu:>7.2f} {1000 * cpu / max(ok, 1):>9.3f} "
              f"{'' if cost is None else f'{cost:.4f}':>9} {server:>12.2f}")
    per = [cpu / max(ok, 1) for _, ok, _, cpu, _, _ in rows]
    print(f"ratio batch CPU / direct CPU per judgment: {per[1] / per[0]:.2f}")


if __name__ == "__main__":
    main()
