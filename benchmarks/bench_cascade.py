"""A cascade at judge time against always judging with the strong model, side by side in one run (issue 37).

Two loopback OpenAI-compatible servers answer decision-mode requests: a "cheap" model (20 ms) that is confident
(0.95 on its level) on 60% of the items and unsure (0.45) on the rest, and a "strong" model (150 ms). The cascade
trusts the cheap model at confidence >= 0.9 and sends the strong one the rest. Printed: requests each server got,
wall time of each way, their ratios, and the cascade's own overhead (its wall time minus the time of the same two
``judge_items`` calls made directly on the same subsets, i.e. planning with the select policy and reading back
what the first member trusted).

    python benchmarks/bench_cascade.py [--items 300] [--concurrency 16]

``--simulation`` instead measures the selective-judging bar of issue 50 (``scijudge.testing.cascade_sim``): an
over-confident cheap member and a calibrated strong one, ``--reps`` calibration sets of 1,000 units with one human
label each, target 0.8, risk 0.1, every cascade applied to 20,000 fresh units whose truth is known. Printed per way
of choosing the thresholds (whole-cascade test or Bonferroni, raw or calibrated confidences): the violation rate
(<= risk + 3-sigma Monte Carlo error is the bar), mean coverage and its ratio to the oracle's, and the cheap
member's share.

    python benchmarks/bench_cascade.py --simulation [--reps 200]
"""

from __future__ import annotations

import argparse
import os
import re
import tempfile
import time
from collections import Counter
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "true")
os.environ.setdefault("OPENAI_API_KEY", "k")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--simulation", action="store_true")
    parser.add_argument("--reps", type=int, default=200)
    args = parser.parse_args()
    if args.simulation:
        simulation(args.reps)
        return
    from scijudge import Item, Run, judge_items, load_judge
    from scijudge.run.cascade import Stage, Threshold, judge_cascade
    from scijudge.testing.openai_server import OpenAICompatServer, Reply, last_user_text, level_logprobs

    counts: dict[str, Counter[str]] = {"cheap": Counter(), "strong": Counter()}

    def handler(kind: str):
        def answer(body: dict) -> Reply:
            text = last_user_text(body)
            counts[kind][re.search(r"ITEM=(\S+)", text).group(1)] += 1
            top = 0.9 if kind == "strong" else (0.45 if "UNSURE" in text else 0.95)
            dist = {str(k): (top if k == 3 else (1 - top) / 4) for k in range(1, 6)}
            return Reply("3", finish_reason="length", completion_tokens=1, logprobs=level_logprobs(dist, lead=" "))
        return answer

    cheap = OpenAICompatServer(handler("cheap"), latency=0.02).start()
    strong = OpenAICompatServer(handler("strong"), latency=0.15).start()
    papers = [{"title": "A study", "abstract": "It found things."}]

    def items(tag: str) -> list:
        return [Item(id=f"{tag}{i}", question="Q?", papers=papers,
                     answer=f"ITEM={tag}{i} {'SURE' if i % 5 < 3 else 'UNSURE'}") for i in range(args.items)]

    def judges(model: str, url: str) -> list:
        return [load_judge("yescieval.qa.correctness", model=model, api_base=url, cache=False, mode="decision",
                           decision_score="mode")]

    spec = "yescieval.qa.correctness"
    with tempfile.TemporaryDirectory() as tmp:
        always_items = items("a")
        t0 = time.perf_counter()
        with Run(Path(tmp) / "always.sqlite") as run:
            judge_items(always_items, judges("openai/strong", strong.url), run, concurrency=args.concurrency)
        always_s = time.perf_counter() - t0
        always_strong = sum(counts["strong"].values())

        for kind in counts:
            counts[kind].clear()
        cascade_items = items("c")
        stages = [Stage("cheap", judges("openai/cheap", cheap.url), {spec: Threshold(0.9)}),
                  Stage("strong", judges("openai/strong", strong.url), {spec: Threshold(0.0)})]
        t0 = time.perf_counter()
        with Run(Path(tmp) / "cascade.sqlite") as run:
            judge_cascade(cascade_items, stages, run, concurrency=args.concurrency)
        cascade_s = time.perf_counter() - t0
        sent_cheap, sent_strong = sum(counts["cheap"].values()), sum(counts["strong"].values())

        direct_items = items("d")  # the same two calls without the cascade: the subsets known in advance
        unsure = [it for it in direct_items if "UNSURE" in it.answer]
        t0 = time.perf_counter()
        with Run(Path(tmp) / "direct.sqlite") as run:
            judge_items(direct_items, judges("openai/cheap", cheap.url), run, concurrency=args.concurrency)
            judge_items(unsure, judges("openai/strong", strong.url), run, concurrency=args.concurrency)
        direct_s = time.perf_counter() - t0
    cheap.stop()
    strong.stop()
    n = args.items
    print(f"items {n}, concurrency {args.concurrency}, load average {os.getloadavg()[0]:.1f}")
    print("| way | cheap requests | strong requests | wall s |")
    print("|---|---:|---:|---:|")
    print(f"| always strong | 0 | {always_strong} | {always_s:.2f} |")
    print(f"| cascade (judge_cascade) | {sent_cheap} | {sent_strong} | {cascade_s:.2f} |")
    print(f"| same subsets, two judge_items calls | {n} | {len(unsure)} | {direct_s:.2f} |")
    print(f"strong requests, cascade / always: {sent_strong / always_strong:.2f}")
    print(f"wall time, cascade / always: {cascade_s / always_s:.2f}")
    print(f"cascade overhead: {(cascade_s - direct_s) * 1000 / n:+.2f} ms per item "
          f"(ratio to the direct calls {cascade_s / direct_s:.2f})")


def simulation(reps: int) -> None:
    from scijudge.testing.cascade_sim import simulate

    ways = [("whole cascade, calibrated (default)", "whole", True), ("whole cascade, raw confidences", "whole", False),
            ("Bonferroni, calibrated", "bonferroni", True), ("Bonferroni, raw confidences", "bonferroni", False)]
    print(f"simulation: {reps} calibration sets of 1000, target 0.8, risk 0.1, load average {os.getloadavg()[0]:.1f}")
    print("| way | violation | coverage | coverage / oracle | cheap member decides | seconds per fit |")
    print("|---|---:|---:|---:|---:|---:|")
    oracle = None
    for label, split, calibrated in ways:
        t0 = time.perf_counter()
        got = simulate(reps, split=split, calibrated=calibrated)
        per_fit = (time.perf_counter() - t0) / reps
        oracle = got
        print(f"| {label} | {got['violation']:.3f} (bar {0.1 + got['mc']:.3f}) | {got['coverage']:.3f} | "
              f"{got['coverage'] / got['oracle']:.2f} | {got['cheap']:.3f} | {per_fit:.3f} |")
    assert oracle is not None
    print(f"| oracle (true agreement known) | 0 | {oracle['oracle']:.3f} | 1.00 | {oracle['oracle_cheap']:.3f} | |")
    print(f"trusting the cheap member's own confidence >= 0.8: true agreement {oracle['naive']:.3f}")


if __name__ == "__main__":
    main()
