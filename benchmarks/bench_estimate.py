"""Benchmark: one ``scijudge.estimate()`` call against ``ppi_py.ppi_mean_ci`` + ``ppi_mean_pointestimate``, same data.

Data: N judged items (default 1,000; a minimal judgments frame: item_id, judge, score) and K labels (default 100),
a fresh random label set for every call, as a simulation or a planner makes them. ``estimate`` returns the
whole table (PPI++, human-only, judge-only with intervals and counts) from frames; ppi-python gets the three
arrays it needs, already split. Both are timed call by call, interleaved, and the medians are compared, in CPU
time (``time.process_time``: what a busy shared machine does not inflate) and in wall time. The benchmark also
checks that the PPI++ point and standard error agree with ppi-python's (the table's interval is Student's t on
n - 1 df around them).

Usage: python benchmarks/bench_estimate.py [--n 1000] [--labels 100] [--calls 300]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from ppi_py import ppi_mean_ci, ppi_mean_pointestimate
from scipy.stats import norm
from scipy.stats import t as student_t

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from scijudge.estimation import estimate

JUDGE = "bench.quality"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--labels", type=int, default=100)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    y = rng.integers(1, 6, args.n).astype(float)
    f = np.clip(y + rng.normal(0.3, 0.8, args.n), 1, 5)
    judgments = pd.DataFrame({"item_id": [f"i{i}" for i in range(args.n)], "judge": JUDGE, "score": f})
    picks = [rng.choice(args.n, args.labels, replace=False) for _ in range(args.calls)]
    label_sets = [pd.DataFrame({"item_id": [f"i{i}" for i in p], "judge": JUDGE, "score": y[p]}) for p in picks]
    scale = (1, 5, 1, "continuous")
    estimate(judgments, label_sets[0], scale=scale, alpha=0.1)  # the first call prepares and indexes the frame
    cpu = {"scijudge": [], "ppi-python": []}
    wall = {"scijudge": [], "ppi-python": []}
    worst = 0.0
    for p, labels in zip(picks, label_sets):
        c0, w0 = time.process_time(), time.perf_counter()
        table = estimate(judgments, labels, scale=scale, alpha=0.1)
        c1, w1 = time.process_time(), time.perf_counter()
        mask = np.zeros(args.n, dtype=bool)
        mask[p] = True
        lo, hi = ppi_mean_ci(y[mask], f[mask], f[~mask], alpha=0.1)
        point = ppi_mean_pointestimate(y[mask], f[mask], f[~mask])
        c2, w2 = time.process_time(), time.perf_counter()
        cpu["scijudge"].append(c1 - c0)
        cpu["ppi-python"].append(c2 - c1)
        wall["scijudge"].append(w1 - w0)
        wall["ppi-python"].append(w2 - w1)
        row = table[table["method"] == "ppi"].iloc[0]
        # the table's interval is Student's t on n - 1 df around ppi-python's point and standard error
        se = (float(np.ravel(hi)[0]) - float(np.ravel(lo)[0])) / (2 * norm.ppf(0.95))
        half = student_t.ppf(0.95, args.labels - 1) * se
        worst = max(worst, abs(row["se"] - se), abs(row["lo"] - (row["estimate"] - half)),
                    abs(row["hi"] - (row["estimate"] + half)), abs(row["estimate"] - float(np.ravel(point)[0])))
    print(f"estimate() on {args.n} items x {args.labels} labels, {args.calls} calls (a new label set each call); "
          f"max |scijudge - ppi-python| on the PPI++ point, se and t interval {worst:.1e}")
    for name, times in (("CPU", cpu), ("wall", wall)):
        ours, theirs = (float(np.median(times[k])) * 1000 for k in ("scijudge", "ppi-python"))
        print(f"  {name:4s} median per call: scijudge.estimate {ours:.2f} ms, ppi-python {theirs:.2f} ms, "
              f"ratio {ours / theirs:.1f}x")
    if worst > 1e-9:
        raise SystemExit("the PPI++ intervals differ")


if __name__ == "__main__":
    main()
