"""ppi-cal's widths and coverage beside PPI++ and ppi-aipw, on the same label sets (issue 40 item 2).

The recorded-like study (``scijudge.testing.studies``: the bundled panel's three judges matched to the bundled
labels, units drawn with replacement into a 1,000-unit study) and a simulated stretched judge. Each label set is
a simple random sample of n units; every method sees the same sets; the estimand is the study's mean human
rating. Widths are relative to PPI++ (``ppi``, normal interval) on the same sets.

    python benchmarks/bench_ppi_cal.py --sets 500
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from scijudge.estimation.calibrated import joint_columns, ppi_cal_joint_mean, ppi_cal_mean
from scijudge.estimation.ppi import ppi_mean
from scijudge.testing.studies import recorded_units


def _aipw():
    try:
        from ppi_aipw import mean_inference
    except ImportError:
        return None
    return mean_inference


def run(y: np.ndarray, f: np.ndarray, n: int, sets: int, seed: int, alpha: float) -> dict[str, tuple[float, float]]:
    """(coverage, mean width / PPI++'s mean width) per method; judge 0 is the single judge."""
    aipw = _aipw()
    x = joint_columns(f)
    single = np.isfinite(f[:, 0])
    truth = y.mean()
    rng = np.random.default_rng(seed)
    out: dict[str, list[tuple[float, bool]]] = {}
    for r in range(sets):
        mask = np.zeros(y.size, dtype=bool)
        mask[rng.choice(y.size, n, replace=False)] = True
        lab, unl = mask & single, ~mask & single
        found = {"ppi": ppi_mean(y[lab], f[lab, 0], f[unl, 0], alpha),
                 "ppi-cal": ppi_cal_mean(y[lab], f[lab, 0], f[unl, 0], alpha, seed=r)}
        if f.shape[1] > 1:
            found["ppi-cal joint"] = ppi_cal_joint_mean(y[mask], x[mask], x[~mask], alpha)
        intervals = {k: (e.lo, e.hi) for k, e in found.items()}
        if aipw is not None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                res = aipw(y[lab], f[lab, 0], f[unl, 0], method="monotone_spline", alpha=alpha)
            intervals["ppi-aipw (monotone spline)"] = (float(res.ci[0]), float(res.ci[1]))
        for k, (lo, hi) in intervals.items():
            out.setdefault(k, []).append((hi - lo, lo <= truth <= hi))
    base = float(np.mean([w for w, _ in out["ppi"]]))
    return {k: (float(np.mean([c for _, c in v])), float(np.mean([w for w, _ in v])) / base) for k, v in out.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", type=int, default=500)
    parser.add_argument("--alpha", type=float, default=0.1)
    args = parser.parse_args()
    if _aipw() is None:
        print("ppi-aipw is not installed (pip install ppi-aipw==0.2.2 --no-deps): its column is left out")
    y0, f0 = recorded_units()
    print(f"| study | judge | n | method | coverage ({1 - args.alpha:.0%}) | width / PPI++ |")
    print("|---|---|---:|---|---:|---:|")
    start = time.perf_counter()
    for study in (0, 1):
        for judge in range(3):
            order = [judge, *[j for j in range(3) if j != judge]]  # the single judge first, then the others
            keep = np.isfinite(f0[:, judge])
            pick = np.random.default_rng(100 * study + judge).integers(0, int(keep.sum()), 1000)
            y, f = y0[keep][pick], f0[keep][:, order][pick]
            for n in (50, 100):
                for method, (cov, width) in run(y, f, n, args.sets, seed=7 + study, alpha=args.alpha).items():
                    print(f"| {study} | {'abc'[judge]} | {n} | {method} | {cov:.3f} | {width:.3f} |")
    rng = np.random.default_rng(3)
    y = rng.choice(np.arange(1.0, 6.0), 2000, p=[0.1, 0.2, 0.3, 0.25, 0.15])
    f = np.exp(1.5 * (y + rng.normal(0.0, 0.3, 2000)))[:, None]
    for method, (cov, width) in run(y, f, 50, args.sets, seed=4, alpha=args.alpha).items():
        print(f"| stretched judge (simulated) | - | 50 | {method} | {cov:.3f} | {width:.3f} |")
    print(f"\n{args.sets} label sets per cell, {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
