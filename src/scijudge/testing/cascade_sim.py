"""The simulation bar of selective judging (issue 50): an over-confident cheap member and a calibrated strong one,
calibration sets with one human label per unit, each cascade applied to fresh units whose truth is known.

Per unit: humans give the true level with probability q in (0.9, 1), another level otherwise; each member gives the
true level with probability a (lower on harder items). The cheap member reports 1 - 0.4 (1 - a) plus noise
(over-confident); the strong one reports its probability of agreeing with a human. Shared by the test of the bar
(tests/metrics/test_selective.py) and ``benchmarks/bench_cascade.py --simulation``.
"""

from __future__ import annotations

import math

import numpy as np


def population(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(confidences 2 x n, each judgment's probability to agree with a human label 2 x n)."""
    q = rng.uniform(0.9, 1.0, n)
    d = rng.uniform(0, 1, n)
    conf, p_agree = [], []
    for a, cheap in ((0.99 - 0.7 * d, True), (0.995 - 0.25 * d, False)):
        right = rng.random(n) < a
        p_agree.append(np.where(right, q, (1 - q) / 4))
        conf.append(np.clip(1 - 0.4 * (1 - a) + rng.normal(0, 0.02, n), 0, 1) if cheap
                    else a * q + (1 - a) * (1 - q) / 4)
    return np.array(conf), np.array(p_agree)


def oracle(conf: np.ndarray, p: np.ndarray, target: float) -> np.ndarray:
    """Each member keeps the longest most-confident prefix of what reaches it whose TRUE agreement is >= target."""
    decided = np.full(conf.shape[1], -1)
    open_ = np.ones(conf.shape[1], bool)
    for k in range(conf.shape[0]):
        idx = np.where(open_)[0]
        ordered = idx[np.argsort(-conf[k, idx], kind="stable")]
        running = np.cumsum(p[k, ordered]) / np.arange(1, ordered.size + 1)
        good = np.where(running >= target)[0]
        if good.size:
            decided[ordered[:good.max() + 1]] = k
            open_[ordered[:good.max() + 1]] = False
    return decided


def simulate(reps: int, *, split: str = "whole", calibrated: bool = True, n_cal: int = 1000, target: float = 0.8,
             risk: float = 0.1, seed: int = 7, n_test: int = 20000) -> dict[str, float]:
    """``reps`` cascades chosen by ``scijudge.metrics.selective.fst.cascade_core`` on fresh calibration sets:
    the share whose trusted judgments' true agreement is below ``target`` (``violation``, with its 3-sigma Monte
    Carlo margin ``mc``), mean coverage and the cheap member's share, against the oracle's."""
    from scijudge.metrics.selective.fst import cascade_core, decide
    from scijudge.metrics.selective.scale import calibrated_scale

    rng = np.random.default_rng(seed)
    test_conf, test_p = population(rng, n_test)
    violations, coverage, cheap = [], [], []
    for _ in range(reps):
        conf, p = population(rng, n_cal)
        agree = (rng.random(p.shape) < p).astype(float)
        fit = rng.random(n_cal) < 0.5
        scale = calibrated_scale(conf, agree, fit) if calibrated else None
        core = cascade_core(conf, agree, target=target, risk=risk, split=split, scale=scale,
                            test=None if scale is None else ~fit)
        decided = decide(test_conf, [None if t.threshold is None else t.threshold[0] for t in core.tests])
        kept = decided >= 0
        truth = np.where(decided == 0, test_p[0], test_p[1])[kept].mean() if kept.any() else 1.0
        violations.append(truth < target)
        coverage.append(kept.mean())
        cheap.append((decided == 0).mean())
    best = oracle(test_conf, test_p, target)
    return {"violation": float(np.mean(violations)), "mc": 3 * math.sqrt(risk * (1 - risk) / reps),
            "coverage": float(np.mean(coverage)), "oracle": float((best >= 0).mean()),
            "cheap": float(np.mean(cheap)), "oracle_cheap": float((best == 0).mean()),
            "naive": float(test_p[0][test_conf[0] >= target].mean())}
