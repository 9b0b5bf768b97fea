"""Figure-extraction metric: scijudge's KD-tree metric vs a pure-Python nearest-neighbour loop.

Workload: one figure with 100 series x 10,000 points (``--quick``: 10 x 2,000), ground truth and an
extraction that perturbs, drops and adds points. Both sides compute the same thing: for every point,
the distance to the nearest point of the other set, in both directions, in axis-normalised space.

The pure-Python loop is O(n^2) per series (10^8 distance evaluations per series and direction at full
size, hours in total), so it is NOT run on all of the data: it runs on a SUBSAMPLE of series and query
points (every query still scans the full reference series) and its time is SCALED linearly to the full
workload (time x series/sampled_series x points/sampled_points). Its distances on the subsample are
checked against the KD-tree's before any time is reported. The vectorised metric runs on everything.

Usage: python benchmarks/bench_figures.py [--quick] [--seed 0]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from scijudge.materials.plots import PlotData
from scijudge.metrics.figures import WORST_DISTANCE, _nearest, score_figure


def _make(n_series: int, n_points: int, seed: int) -> tuple[PlotData, PlotData]:
    rng = np.random.default_rng(seed)
    truth, extracted = [], []
    for k in range(n_series):
        x = np.sort(rng.uniform(0, 100, n_points))
        y = np.sin(x / (5 + k % 7)) * (10 + k) + rng.normal(0, 0.5, n_points)
        truth.append({"name": f"series {k}", "points": np.column_stack([x, y]).tolist()})
        keep = rng.random(n_points) > 0.05  # drop 5%, jitter, add 5% strays
        ex = np.column_stack([x[keep], y[keep]]) + rng.normal(0, 0.3, (int(keep.sum()), 2))
        strays = np.column_stack([rng.uniform(0, 100, n_points // 20), rng.uniform(-30, 30, n_points // 20)])
        extracted.append({"name": f"Series {k} (a.u.)", "points": np.vstack([ex, strays]).tolist()})
    return PlotData.model_validate({"series": extracted}), PlotData.model_validate({"series": truth})


def _normalised(truth: PlotData, series_index: int, extracted: PlotData) -> tuple[list, list]:
    """Both point sets of one series scaled by the truth's figure-wide ranges, as Python lists."""
    allt = np.concatenate([s.array() for s in truth.series])
    lo, span = allt.min(axis=0), np.ptp(allt, axis=0)
    t = (truth.series[series_index].array() - lo) / span
    e = (extracted.series[series_index].array() - lo) / span
    return [tuple(p) for p in t.tolist()], [tuple(p) for p in e.tolist()]


def _loop_nearest(queries: list, reference: list) -> list[float]:
    """The pure-Python baseline: scan every reference point for every query point."""
    out = []
    for qx, qy in queries:
        best = math.inf
        for rx, ry in reference:
            d = (qx - rx) * (qx - rx) + (qy - ry) * (qy - ry)
            if d < best:
                best = d
        out.append(min(math.sqrt(best), WORST_DISTANCE))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="10 series x 2,000 points instead of 100 x 10,000")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    n_series, n_points = (10, 2_000) if args.quick else (100, 10_000)
    loop_series, loop_queries = (2, 100) if args.quick else (2, 150)

    started = time.perf_counter()
    extracted, truth = _make(n_series, n_points, args.seed)
    print(f"workload: {n_series} series x {n_points:,} points (extracted ~{n_points:,} each); "
          f"built and validated in {time.perf_counter() - started:.1f} s")

    started = time.perf_counter()
    score = score_figure(extracted, truth)
    vectorised = time.perf_counter() - started
    matched = sum(r.status == "matched" for r in score.series)
    print(f"scijudge (cKDTree), all {matched} series, both directions: {vectorised:.3f} s "
          f"(figure score {score.score:.4f})")

    rng = np.random.default_rng(args.seed + 1)
    loop_time = 0.0
    queries_done = 0
    for k in rng.choice(n_series, size=loop_series, replace=False):
        t, e = _normalised(truth, int(k), extracted)
        for queries, reference in ((e, t), (t, e)):  # precision, then recall direction
            pick = sorted(rng.choice(len(queries), size=min(loop_queries, len(queries)), replace=False))
            sample = [queries[i] for i in pick]
            t0 = time.perf_counter()
            slow = _loop_nearest(sample, reference)
            loop_time += time.perf_counter() - t0
            queries_done += len(sample)
            fast = _nearest(np.asarray(sample), np.asarray(reference))
            if not np.allclose(slow, fast, rtol=1e-12, atol=1e-12):
                raise SystemExit("the pure-Python loop and the KD-tree disagree: benchmark invalid")
    total_queries = sum(len(s.points) for s in truth.series) + sum(len(s.points) for s in extracted.series)
    per_query = loop_time / queries_done
    scaled = per_query * total_queries
    print(f"pure-Python loop: measured {loop_time:.2f} s on a SUBSAMPLE of {queries_done} query points "
          f"({loop_series} series, each query scanning its full reference series); distances identical")
    print(f"pure-Python loop SCALED to all {total_queries:,} query points: {scaled:,.0f} s "
          f"(= {per_query * 1e3:.3f} ms/query x {total_queries:,})")
    print(f"ratio (scaled loop / scijudge): {scaled / vectorised:,.0f}x")


if __name__ == "__main__":
    main()
