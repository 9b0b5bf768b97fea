"""CPU cost of the whole-request deadline (--timeout), measured side by side in one run.

With a timeout set, every request runs in a short-lived daemon thread so that it can be abandoned at the
deadline; without one it runs inline. Both arms judge the same number of items at the same concurrency
against a loopback server in another process; the arms alternate to spread machine noise.

    python benchmarks/bench_deadline.py --judgments 400 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "true")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _loopback import ServerProcess


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--judgments", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    import dspy

    from scijudge import Item, Judge, Run, get_spec, judge_items, make_lm

    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)
    spec = get_spec("yescieval.qa.correctness")
    papers = [{"title": "T", "abstract": "A."}]
    cpu = {"deadline": 0.0, "inline": 0.0}
    with ServerProcess(0.0) as server, tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.rounds):
            for arm, timeout in (("deadline", 60.0), ("inline", None)):
                judge = Judge(spec, lm=make_lm("openai/judge", api_base=server.url, cache=False, timeout=timeout))
                items = [Item(id=f"{arm}{round_}-{i}", question="Q?", papers=papers, answer=f"A {i} [1].")
                         for i in range(args.judgments)]
                judge_items(items[:8], [judge], concurrency=8)  # warm the client
                with Run(Path(tmp) / f"{arm}{round_}.sqlite") as run:
                    cpu0 = time.process_time()
                    summary = judge_items(items[8:], [judge], run=run, concurrency=args.concurrency)
                    cpu[arm] += time.process_time() - cpu0
                assert summary.ok == args.judgments - 8, summary
    n = args.rounds * (args.judgments - 8)
    per = {arm: 1000 * seconds / n for arm, seconds in cpu.items()}
    print(f"CPU ms/judgment: deadline thread {per['deadline']:.3f}, inline {per['inline']:.3f}, "
          f"ratio {per['deadline'] / per['inline']:.3f} ({n} judgments per arm, concurrency {args.concurrency})")


if __name__ == "__main__":
    main()
