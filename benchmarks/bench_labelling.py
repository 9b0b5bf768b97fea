"""Labels needed to reach a target interval width: the anytime-valid sequential loop (``estimate --sequential``)
vs a fixed-n PPI++ plan sized in advance from a 30-label pilot (``ppi.labels_needed``) vs human labels alone,
with the coverage of each, side by side on the same label orders.

Scenarios: the recorded-like study (``scijudge.testing.studies``: 2,000 units drawn from the bundled panel, judge
a) and a simulation (5,000 units, human score ~ N(3, 1) clipped to 1..5, a biased judge f = y + 0.3 + N(0, 0.5)).
Labels arrive in a random order without replacement; the truth is the mean human score of the units.

    python benchmarks/bench_labelling.py [--runs 500] [--width 0.3] [--alpha 0.1]

Columns: median and mean labels used, the share of runs that reached the width, coverage at the reported interval
(sequential: at its stop; ``ever`` = the share whose sequence never excluded the truth at any look) and the mean
width there. The fixed plan uses exactly its planned labels (it does not look), so its width may miss the target;
"fixed-n ppi, looked at each label" is the invalid practice the sequence replaces (stop when the fixed-n interval
first looks narrow enough).
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from scijudge.estimation import anytime
from scijudge.estimation.ppi import labels_needed, ppi_mean, with_t

PILOT = 30


def _simulation(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = np.clip(3 + rng.normal(0, 1, 5000), 1, 5)
    return y, y + 0.3 + rng.normal(0, 0.5, y.size)


def _study(seed: int) -> tuple[np.ndarray, np.ndarray]:
    from scijudge.testing.studies import study

    y, f, _ = study(2000, seed=seed, judge=0)
    return y, f


def _one(y: np.ndarray, f: np.ndarray, order: np.ndarray, width: float, alpha: float,
         bounds: tuple[float, float]) -> dict[str, tuple[float, bool, float, bool]]:
    """Per method: (labels used, covered, width, reached)."""
    truth, n_max = y.mean(), y.size
    out: dict[str, tuple[float, bool, float, bool]] = {}
    for name, human_only in (("sequential ppi", False), ("sequential human-only", True)):
        seq = anytime.ppi_sequence(y[order], f[order], f.mean(), alpha, bounds=bounds, human_only=human_only)
        at = seq.stop(width)
        k = (at or n_max) - 1
        shown = ~np.isnan(seq.lo)
        ever = not bool(np.any((seq.lo[shown] > truth) | (seq.hi[shown] < truth)))
        out[name] = (k + 1, bool(seq.lo[k] <= truth <= seq.hi[k]), float(seq.hi[k] - seq.lo[k]), at is not None)
        out[name + " (ever)"] = (k + 1, ever, float(seq.hi[k] - seq.lo[k]), at is not None)
    out["fixed-n ppi, looked at each label"] = _peeking(y, f, order, width, alpha)
    pilot = order[:PILOT]
    rest = np.ones(n_max, bool)
    rest[pilot] = False
    n_ppi, n_human = labels_needed(y[pilot], f[pilot], f[rest], width, alpha)
    for name, n_plan, lam in (("fixed plan ppi", n_ppi, None), ("fixed plan human-only", n_human, 0.0)):
        n = int(min(max(n_plan, PILOT), n_max)) if math.isfinite(n_plan) else n_max
        lab = order[:n]
        unl = np.ones(n_max, bool)
        unl[lab] = False
        e = with_t(ppi_mean(y[lab], f[lab], f[unl], alpha, lam=lam), alpha)
        out[name] = (n, bool(e.lo <= truth <= e.hi), e.hi - e.lo, e.hi - e.lo <= width)
    return out


def _peeking(y: np.ndarray, f: np.ndarray, order: np.ndarray, width: float,
             alpha: float) -> tuple[float, bool, float, bool]:
    """PPI++'s fixed-n t interval recomputed after every label from the sequence's first look on, stopping at
    the first one at most ``width`` wide: what a fixed-n interval is not valid for."""
    truth = y.mean()
    unl = np.ones(y.size, bool)
    unl[order[:anytime.DEFAULT_START - 1]] = False
    for n in range(anytime.DEFAULT_START, y.size + 1):
        unl[order[n - 1]] = False
        lab = order[:n]
        e = with_t(ppi_mean(y[lab], f[lab], f[unl], alpha), alpha)
        if e.hi - e.lo <= width:
            return n, bool(e.lo <= truth <= e.hi), e.hi - e.lo, True
    return y.size, bool(e.lo <= truth <= e.hi), e.hi - e.lo, False


def run(scenario: str, runs: int, width: float, alpha: float) -> None:
    make = _study if scenario == "study" else _simulation
    rows: dict[str, list[tuple[float, bool, float, bool]]] = {}
    for r in range(runs):
        y, f = make(r)
        order = np.random.default_rng(50_000 + r).permutation(y.size)
        for name, value in _one(y, f, order, width, alpha, (1.0, 5.0)).items():
            rows.setdefault(name, []).append(value)
    se = math.sqrt(alpha * (1 - alpha) / runs)
    print(f"\n{scenario}: {runs} runs, target width {width:g} at {1 - alpha:.0%} (MC s.e. of a miss rate {se:.3f})")
    print(f"{'method':34s} {'median n':>9s} {'mean n':>8s} {'reached':>8s} {'coverage':>9s} {'width':>7s}")
    for name, values in rows.items():
        n, covered, w, reached = (np.array(v, float) for v in zip(*values))
        print(f"{name:34s} {np.median(n):9.0f} {n.mean():8.1f} {reached.mean():8.3f} {covered.mean():9.3f} "
              f"{w.mean():7.3f}")
    seq = np.median([v[0] for v in rows["sequential ppi"]])
    plan = np.median([v[0] for v in rows["fixed plan ppi"]])
    human = np.median([v[0] for v in rows["sequential human-only"]])
    print(f"ratio of median labels: sequential ppi / fixed plan ppi = {seq / plan:.2f}; "
          f"sequential ppi / sequential human-only = {seq / human:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--width", type=float, default=0.3)
    parser.add_argument("--alpha", type=float, default=0.1)
    args = parser.parse_args()
    for scenario in ("study", "simulation"):
        run(scenario, args.runs, args.width, args.alpha)


if __name__ == "__main__":
    main()
