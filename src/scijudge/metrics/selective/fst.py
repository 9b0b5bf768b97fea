"""Fixed-sequence testing of confidence thresholds, for one judge or a whole cascade, and the selective curve.

The rule (after Bates et al.'s Learn-then-Test and Jung, Brahman & Choi, "Trust or Escalate", ICLR 2025): a
*path* of candidate thresholds is ordered before any label is seen, from the strictest (trusts least) to the
loosest. At each candidate, the labelled calibration judgments it keeps (``n`` of them, ``x`` agreeing with the
humans) test H0 "the agreement of the judgments this candidate keeps is below ``target``" with the exact
one-sided binomial p-value ``P(Bin(n, target) >= x)``, rejected when it is <= ``delta``. The walk stops at the
first candidate not rejected; the chosen threshold is the last rejected one. Every test is at the full
``delta`` and the order is fixed, so with probability >= 1 - delta the chosen candidate's agreement on new
judgments drawn like the calibration ones is >= target (fixed-sequence testing controls the family-wise error).

* **Ties are whole groups.** Candidates sit only where the confidence changes: judgments of equal confidence
  are kept or left together, so no seed or tie key enters the result.
* **The walk starts where a rejection is first possible**: at the first candidate keeping at least ``n0``
  judgments, ``n0`` the least ``n`` with ``target ** n <= delta`` (a candidate keeping fewer is rejected by no
  data). The start depends on the confidences only, never on the labels.
* **A whole cascade is one path** (``cascade_core``, ``split="whole"``): members' confidences are put on one
  common scale (as stored, or calibrated on a separate split of the labels) and every member's threshold is
  lowered together along it; at each candidate a unit is decided by the first member whose confidence reaches
  its threshold, and the test is on all trusted judgments together at the full risk. ``split="bonferroni"``
  keeps the per-member rule: member k is tested at ``risk / K`` on what earlier members left, which guarantees
  each member's trusted share separately (and so their union) at a cost in coverage.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

SPLITS = ("whole", "bonferroni")


@dataclass(frozen=True)
class FixedSequence:
    """The outcome of one fixed-sequence test: the threshold (confidence, tie key; the tie key is 0: whole groups)
    or None with the reason, and the kept calibration judgments at it (``n_kept``, ``n_agree``, ``p_value``)."""

    threshold: tuple[float, float] | None
    n_calibration: int
    n_kept: int
    n_agree: int
    p_value: float
    reason: str = ""

    @property
    def agreement(self) -> float:
        return self.n_agree / self.n_kept if self.n_kept else float("nan")


def binomial_p_values(n_agree: np.ndarray, n: np.ndarray, target: float) -> np.ndarray:
    """Exact one-sided p-values of H0: agreement < target, ``P(Bin(n, target) >= x)``."""
    return np.asarray(stats.binom.sf(np.asarray(n_agree) - 1, np.asarray(n), target), dtype=float)


def first_testable(target: float, delta: float) -> int:
    """The fewest kept judgments a test at level ``delta`` can reject with: the least n with target**n <= delta."""
    return max(1, math.ceil(math.log(delta) / math.log(target) - 1e-12))


@dataclass(frozen=True)
class PathTest:
    """A fixed-sequence walk over candidates ``0..m-1`` (kept ``n``, agreeing ``x``): the index of the chosen
    candidate (None: nothing rejected), the first one tested and the p-values."""

    chosen: int | None
    start: int | None
    p: np.ndarray


SIMULATIONS = 200
"""Label draws from a calibrated scale's probabilities with which ``walk`` chooses where it starts."""


def walk(n: np.ndarray, x: np.ndarray, *, target: float, delta: float,
         simulated: np.ndarray | None = None) -> PathTest:
    """Test the candidates in order from the start; stop at the first non-rejection. The start is the first
    candidate keeping ``n0`` judgments (the first where a rejection is possible) or, given ``simulated`` (S x m
    agreeing counts at each candidate drawn from probabilities fitted on labels the test does not use), the
    testable candidate whose walk keeps the most judgments on average over the draws. Either way the start
    depends on no label the test uses."""
    n = np.asarray(n, int)
    p = binomial_p_values(np.asarray(x, int), n, target) if n.size else np.zeros(0)
    testable = np.flatnonzero(n >= first_testable(target, delta))
    if testable.size == 0:
        return PathTest(None, None, p)
    start = int(testable[0])
    if simulated is not None and len(simulated):
        start = int(testable[int(np.argmax(expected_kept(n, simulated, target=target, delta=delta)[testable]))])
    rejected = p[start:] <= delta
    if not rejected[0]:
        return PathTest(None, start, p)
    stop = int(np.argmin(rejected)) if not rejected.all() else rejected.size
    return PathTest(start + stop - 1, start, p)


def expected_kept(n: np.ndarray, simulated: np.ndarray, *, target: float, delta: float) -> np.ndarray:
    """For every candidate as the start: the judgments the walk keeps, averaged over simulated agreeing counts."""
    rejected = binomial_p_values(simulated, np.broadcast_to(n, simulated.shape), target) <= delta
    m = n.size
    position = np.where(rejected, m, np.arange(m)[None, :])
    first_fail = np.minimum.accumulate(position[:, ::-1], axis=1)[:, ::-1]  # the first non-rejection at or after
    kept = np.where(rejected, np.r_[0, n][first_fail], 0)  # n at first_fail - 1 (index shifted by the leading 0)
    return np.asarray(kept.mean(axis=0), dtype=float)


def _groups(values: np.ndarray, agree: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct values in descending order with the cumulative count and agreement kept at each (whole groups)."""
    idx = np.argsort(-values, kind="stable")
    v, a = values[idx], agree[idx]
    ends = np.r_[np.flatnonzero(v[1:] != v[:-1]), v.size - 1] if v.size else np.zeros(0, int)
    return v[ends], ends + 1, np.cumsum(a)[ends] if v.size else np.zeros(0)


def fixed_sequence(confidence: np.ndarray, agree: np.ndarray, *, target: float, delta: float,
                   predicted: np.ndarray | None = None) -> FixedSequence:
    """The threshold chosen by fixed-sequence testing (module docstring) on one judge's calibration judgments;
    ``predicted``: each judgment's agreement probability from labels the test does not use (``walk``'s start)."""
    conf = np.asarray(confidence, float)
    n_cal = int(conf.size)
    if n_cal == 0:
        return FixedSequence(None, 0, 0, 0, float("nan"), "no labelled calibration judgment with a confidence")
    values, n, x = _groups(conf, np.asarray(agree, float))
    draws = None
    if predicted is not None:
        rng = np.random.default_rng(0)
        prob = np.clip(np.asarray(predicted, float), 0, 1)
        draws = np.array([_groups(conf, (rng.random(prob.size) < prob).astype(float))[2]
                          for _ in range(SIMULATIONS)])
    test = walk(n, x, target=target, delta=delta, simulated=draws)
    n0 = first_testable(target, delta)
    if test.start is None:
        return FixedSequence(None, n_cal, 0, 0, float("nan"),
                             f"{n_cal} labelled calibration judgment(s): agreement {target:g} at risk {delta:.3g} "
                             f"needs at least {n0}")
    if test.chosen is None:
        s = test.start
        return FixedSequence(None, n_cal, int(n[s]), int(x[s]), float(test.p[s]),
                             f"no threshold reaches agreement {target:g} at risk {delta:.3g} on the {n_cal} "
                             f"calibration judgments (the {int(n[s])} most confident give p = {test.p[s]:.3g})")
    c = test.chosen
    return FixedSequence((float(values[c]), 0.0), n_cal, int(n[c]), int(x[c]), float(test.p[c]))


def selective_curve(confidence: np.ndarray, agree: np.ndarray) -> pd.DataFrame:
    """Agreement against coverage: one row per distinct confidence, from the most confident down, each keeping
    its whole group (``threshold``, ``n_kept``, ``coverage``, ``agreement``)."""
    conf = np.asarray(confidence, float)
    if conf.size == 0:
        return pd.DataFrame(columns=["threshold", "n_kept", "coverage", "agreement"])
    values, n, x = _groups(conf, np.asarray(agree, float))
    return pd.DataFrame({"threshold": values, "n_kept": n, "coverage": n / conf.size, "agreement": x / n})


@dataclass(frozen=True)
class CascadeCore:
    """One judge's cascade over N units and K members: each member's test (under ``whole``: its threshold and the
    calibration judgments it decided, with the joint p-value), how many units reached it, the member that
    decided each unit (-1: escalated) and, under ``whole``, the joint test of all trusted judgments."""

    tests: list[FixedSequence]
    reached: list[int]
    decided: np.ndarray
    split: str = "whole"
    joint: FixedSequence | None = None


def decide(conf: np.ndarray, thresholds: list[float | None]) -> np.ndarray:
    """The member deciding each unit: the first whose confidence reaches its threshold (-1: none)."""
    decided = np.full(conf.shape[1], -1)
    for k in range(conf.shape[0] - 1, -1, -1):
        if thresholds[k] is not None:
            with np.errstate(invalid="ignore"):
                decided[np.isfinite(conf[k]) & (conf[k] >= thresholds[k])] = k
    return decided


def cascade_core(confidence: np.ndarray, agree: np.ndarray, *, target: float, risk: float, split: str = "whole",
                 scale: np.ndarray | None = None, test: np.ndarray | None = None) -> CascadeCore:
    """The cascade rule on arrays: ``confidence`` and ``agree`` are K x N (NaN: no judgment with a confidence / no
    label). ``scale`` (K x N, default the confidences) is the common scale the whole path lowers every threshold
    along, non-decreasing in each member's confidence; ``test`` (N, default all) marks the units whose labels the
    test may use (the rest were used to fit the scale). Thresholds are returned on the members' own confidences."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    conf = np.asarray(confidence, float)
    agr = np.asarray(agree, float)
    sc = conf if scale is None else np.where(np.isfinite(conf), np.asarray(scale, float), np.nan)
    use = np.ones(conf.shape[1], bool) if test is None else np.asarray(test, bool)
    predict = True if scale is not None else None
    if split == "bonferroni":
        return _bonferroni(conf, agr, sc, use, target=target, risk=risk, predict=predict)
    return _whole(conf, agr, sc, use, target=target, risk=risk, predict=predict)


def _raw(conf: np.ndarray, scale: np.ndarray, where: np.ndarray, s: float) -> float | None:
    """A member's own-confidence threshold for common-scale value ``s``: its least confidence on the units in
    ``where`` whose scale reaches ``s`` (None: none does)."""
    with np.errstate(invalid="ignore"):
        hit = where & np.isfinite(scale) & (scale >= s)
    return float(conf[hit].min()) if hit.any() else None


def _bonferroni(conf: np.ndarray, agr: np.ndarray, sc: np.ndarray, use: np.ndarray, *, target: float,
                risk: float, predict: bool | None) -> CascadeCore:
    """Member by member at ``risk / K``, each on the labelled units no earlier member trusted."""
    k_members, n_units = conf.shape
    delta = risk / k_members
    thresholds: list[float | None] = []
    tests, reached = [], []
    open_ = np.ones(n_units, bool)
    for k in range(k_members):
        reached.append(int(open_.sum()))
        cal = open_ & use & np.isfinite(sc[k]) & np.isfinite(agr[k])
        fst = fixed_sequence(sc[k, cal], agr[k, cal] > 0.5, target=target, delta=delta,
                             predicted=None if predict is None else np.clip(sc[k, cal], 0, 1))
        raw = None if fst.threshold is None else _raw(conf[k], sc[k], cal, fst.threshold[0])
        thresholds.append(raw)
        tests.append(fst if raw is None else FixedSequence((raw, 0.0), fst.n_calibration, fst.n_kept, fst.n_agree,
                                                           fst.p_value))
        if raw is not None:
            with np.errstate(invalid="ignore"):
                open_ &= ~(np.isfinite(conf[k]) & (conf[k] >= raw))
    return CascadeCore(tests, reached, decide(conf, thresholds), "bonferroni")


def path_counts(scale: np.ndarray, agree: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The whole path on K x N arrays of labelled units: (candidate values descending, kept, agreeing) where at
    value s a unit is kept by the first member whose scale reaches s and counts that member's agreement.
    ``agree`` may carry leading axes (S x K x N: several label draws at once); the agreeing counts then do too."""
    plan = _PathPlan(scale)
    return plan.values, plan.kept, plan.agreeing(agree)


class _PathPlan:
    """What of the whole path depends on the scale only: the events (a unit's decider changing as the common
    threshold falls past one of its members' values), in descending order, and where each candidate ends."""

    def __init__(self, scale: np.ndarray) -> None:
        k_members, n_units = scale.shape
        keyed = np.where(np.isfinite(scale), scale, -np.inf)
        order = np.argsort(-keyed, axis=0, kind="stable")  # members by descending scale; equal values by position
        values = np.take_along_axis(keyed, order, axis=0)
        self.decider = np.minimum.accumulate(order, axis=0)  # the first member trusting the unit at that value
        ok = np.isfinite(values)
        self.ok = ok
        v = values[ok]
        self.idx = np.argsort(-v, kind="stable")
        v = v[self.idx]
        self.ends = np.r_[np.flatnonzero(v[1:] != v[:-1]), v.size - 1] if v.size else np.zeros(0, int)
        first = np.zeros((k_members, n_units))
        first[0] = 1.0
        self.values = v[self.ends]
        self.kept = np.rint(np.cumsum(first[ok][self.idx])[self.ends]).astype(int) if v.size else np.zeros(0, int)

    def agreeing(self, agree: np.ndarray) -> np.ndarray:
        a = np.nan_to_num(np.asarray(agree, float), nan=0.0)
        units = np.arange(a.shape[-1])[None, :]
        got = a[..., self.decider, units]  # (..., K, N): the decider's agreement after each event
        zero = np.zeros((*got.shape[:-2], 1, got.shape[-1]))
        dx = np.diff(np.concatenate([zero, got], axis=-2), axis=-2)
        flat = dx[..., self.ok][..., self.idx]
        return np.cumsum(flat, axis=-1)[..., self.ends] if self.ends.size else flat[..., :0]


def _whole(conf: np.ndarray, agr: np.ndarray, sc: np.ndarray, use: np.ndarray, *, target: float,
           risk: float, predict: bool | None) -> CascadeCore:
    """One fixed-sequence test at the full risk along the common-scale path; thresholds per member."""
    labelled = use & np.isfinite(agr).any(axis=0)
    plan = _PathPlan(sc[:, labelled])
    values, n = plan.values, plan.kept
    x = np.rint(plan.agreeing(agr[:, labelled])).astype(int)
    draws = None
    if predict:
        prob = np.clip(sc[:, labelled], 0, 1)
        rng = np.random.default_rng(0)
        chunk = max(1, min(SIMULATIONS, 2_000_000 // max(1, prob.size)))  # memory bounded on large label sets
        draws = np.concatenate([plan.agreeing((rng.random((min(chunk, SIMULATIONS - done), *prob.shape)) < prob)
                                              .astype(float)) for done in range(0, SIMULATIONS, chunk)])
    test = walk(n, x, target=target, delta=risk, simulated=draws)
    n_cal = int(labelled.sum())
    k_members = conf.shape[0]
    if test.chosen is None:
        n0 = first_testable(target, risk)
        if test.start is None:
            reason = (f"{n_cal} labelled calibration item(s) with a confidence: agreement {target:g} at risk "
                      f"{risk:.3g} needs at least {n0}")
            joint = FixedSequence(None, n_cal, 0, 0, float("nan"), reason)
        else:
            s = test.start
            reason = (f"no threshold reaches agreement {target:g} at risk {risk:.3g} on the {n_cal} calibration "
                      f"items (the {int(n[s])} most confident give p = {test.p[s]:.3g})")
            joint = FixedSequence(None, n_cal, int(n[s]), int(x[s]), float(test.p[s]), reason)
        decided = np.full(conf.shape[1], -1)
        return CascadeCore([joint] * k_members, [conf.shape[1]] + [conf.shape[1]] * (k_members - 1), decided,
                           "whole", joint)
    c = test.chosen
    thresholds = [_raw(conf[k], sc[k], labelled, float(values[c])) for k in range(k_members)]
    decided = decide(conf, thresholds)
    joint = FixedSequence((float(values[c]), 0.0), n_cal, int(n[c]), int(x[c]), float(test.p[c]))
    tests, reached = [], []
    for k in range(k_members):
        reached.append(int((~np.isin(decided, range(k))).sum()))
        mine = labelled & (decided == k)
        cal = labelled & ~np.isin(decided, range(k)) & np.isfinite(conf[k])
        agree_k = np.nan_to_num(agr[k, mine], nan=0.0)
        thr = thresholds[k]
        tests.append(FixedSequence(None if thr is None else (thr, 0.0), int(cal.sum()), int(mine.sum()),
                                   int(agree_k.sum()), float(test.p[c]),
                                   "" if thr is not None else "no calibration unit reaches the cascade's threshold"))
    return CascadeCore(tests, reached, decided, "whole", joint)


def clopper_pearson(x: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The exact (Clopper-Pearson) two-sided interval of a binomial proportion."""
    if n == 0:
        return float("nan"), float("nan")
    ci = stats.binomtest(int(x), int(n)).proportion_ci(confidence_level=level, method="exact")
    return float(ci.low), float(ci.high)
