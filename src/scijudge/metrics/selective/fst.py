"""Fixed-sequence testing of a confidence threshold, and the selective curve (agreement against coverage).

The rule (Jung, Brahman & Choi, "Trust or Escalate", ICLR 2025, after Bates et al.'s Learn-then-Test): order
the calibration judgments from the most to the least confident (ties by the seeded tie key). Walk the
candidate thresholds in that order; at the candidate that keeps the first ``n`` judgments, of which ``x`` agree
with the humans, test H0: "the agreement of the judgments this threshold keeps is below ``target``" with the
exact one-sided binomial p-value ``P(Bin(n, target) >= x)``. Reject when it is <= ``delta``; stop at the first
candidate not rejected. The chosen threshold is the last rejected candidate (the lowest confidence tested
successfully), kept with its whole confidence group when the cut falls at the group's end (tie 0), otherwise
cut inside the group at its tie key; none when the first is not rejected. The sequence starts at the first candidate that could be
rejected at all and keeps at least ``start`` (default 10%) of the calibration judgments: the one keeping
``max(n0, ceil(start * n))``, with ``n0`` the least ``n`` such that ``target ** n <= delta`` (a candidate keeping
fewer is rejected by no data). Starting lower makes the whole sequence hang on the first few judgments (at
``n0`` every one must agree), which stops it early whenever one of the most confident disagrees; the start
depends on ``target``, ``delta`` and the number of calibration judgments only, never on the labels.
Every test is at level ``delta`` and the order is the confidence order, so with probability >= 1 - delta the
chosen threshold's agreement on new judgments from the same distribution is >= target.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats


START = 0.1
"""The first candidate threshold keeps this share of the calibration judgments (or n0, if more)."""


@dataclass(frozen=True)
class FixedSequence:
    """The outcome of one fixed-sequence test: the threshold (confidence, tie key) or None with the reason, and
    the kept calibration judgments at it (``n_kept``, ``n_agree``, ``p_value``)."""

    threshold: tuple[float, float] | None
    n_calibration: int
    n_kept: int
    n_agree: int
    p_value: float
    reason: str = ""

    @property
    def agreement(self) -> float:
        return self.n_agree / self.n_kept if self.n_kept else float("nan")


def order(confidence: np.ndarray, tie: np.ndarray) -> np.ndarray:
    """Indices from the most to the least confident, equal confidences by descending tie key."""
    return np.lexsort((-np.asarray(tie, float), -np.asarray(confidence, float)))


def binomial_p_values(n_agree: np.ndarray, n: np.ndarray, target: float) -> np.ndarray:
    """Exact one-sided p-values of H0: agreement < target, ``P(Bin(n, target) >= x)``."""
    return np.asarray(stats.binom.sf(np.asarray(n_agree) - 1, np.asarray(n), target), dtype=float)


def fixed_sequence(confidence: np.ndarray, tie: np.ndarray, agree: np.ndarray, *, target: float,
                   delta: float, start: float = START) -> FixedSequence:
    """The threshold chosen by fixed-sequence testing (module docstring) on calibration judgments; the first
    candidate keeps ``max(n0, ceil(start * n))`` of the ``n`` judgments."""
    conf = np.asarray(confidence, float)
    n_cal = int(conf.size)
    if n_cal == 0:
        return FixedSequence(None, 0, 0, 0, float("nan"), "no labelled calibration judgment with a confidence")
    n0 = max(first_testable(target, delta), math.ceil(start * n_cal - 1e-9))
    if n_cal < n0:
        return FixedSequence(None, n_cal, 0, 0, float("nan"),
                             f"{n_cal} labelled calibration judgment(s): agreement {target:g} at risk {delta:.3g} "
                             f"needs at least {n0}")
    idx = order(conf, tie)
    hits = np.cumsum(np.asarray(agree, bool)[idx])
    n = np.arange(1, n_cal + 1)
    p = binomial_p_values(hits, n, target)
    rejected = p[n0 - 1:] <= delta
    if not rejected[0]:
        return FixedSequence(None, n_cal, n0, int(hits[n0 - 1]), float(p[n0 - 1]),
                             f"no threshold reaches agreement {target:g} at risk {delta:.3g} on the {n_cal} "
                             f"calibration judgments (the {n0} most confident give p = {p[n0 - 1]:.3g})")
    last = n0 - 1 + (int(np.argmin(rejected)) - 1 if not rejected.all() else rejected.size - 1)
    best = idx[last]
    whole = last + 1 == n_cal or conf[idx[last + 1]] < conf[best]  # the cut keeps its whole confidence group
    return FixedSequence((float(conf[best]), 0.0 if whole else float(np.asarray(tie, float)[best])), n_cal, last + 1,
                         int(hits[last]), float(p[last]))


def first_testable(target: float, delta: float) -> int:
    """The fewest kept judgments a test at level ``delta`` can reject with: the least n with target**n <= delta."""
    return max(1, math.ceil(math.log(delta) / math.log(target) - 1e-12))


def clopper_pearson(x: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The exact (Clopper-Pearson) two-sided interval of a binomial proportion."""
    if n == 0:
        return float("nan"), float("nan")
    ci = stats.binomtest(int(x), int(n)).proportion_ci(confidence_level=level, method="exact")
    return float(ci.low), float(ci.high)


def selective_curve(confidence: np.ndarray, tie: np.ndarray, agree: np.ndarray) -> pd.DataFrame:
    """Agreement against coverage: one row per kept-set size, from the most confident judgment down
    (``threshold``, ``n_kept``, ``coverage``, ``agreement``)."""
    conf = np.asarray(confidence, float)
    if conf.size == 0:
        return pd.DataFrame(columns=["threshold", "n_kept", "coverage", "agreement"])
    idx = order(conf, tie)
    hits = np.cumsum(np.asarray(agree, bool)[idx])
    n = np.arange(1, conf.size + 1)
    return pd.DataFrame({"threshold": conf[idx], "n_kept": n, "coverage": n / conf.size, "agreement": hits / n})


@dataclass(frozen=True)
class CascadeCore:
    """One judge's cascade over N units and K members: each member's test, how many units reached it, and the
    member that decided each unit (-1: escalated)."""

    tests: list[FixedSequence]
    reached: list[int]
    decided: np.ndarray


def cascade_core(confidence: np.ndarray, tie: np.ndarray, agree: np.ndarray, *, target: float,
                 risk: float, start: float = START) -> CascadeCore:
    """The cascade rule on arrays: ``confidence`` and ``agree`` are K x N (NaN: no judgment with a confidence /
    no label), ``tie`` has N. Member k is tested at level ``risk / K`` on the labelled units no earlier member
    trusted, and trusts the units it reaches whose (confidence, tie) reaches its threshold."""
    conf = np.asarray(confidence, float)
    agr = np.asarray(agree, float)
    ties = np.asarray(tie, float)
    k_members, n_units = conf.shape
    delta = risk / k_members
    open_ = np.ones(n_units, bool)
    decided = np.full(n_units, -1)
    tests, reached = [], []
    for k in range(k_members):
        reached.append(int(open_.sum()))
        has = open_ & np.isfinite(conf[k])
        cal = has & np.isfinite(agr[k])
        fst = fixed_sequence(conf[k, cal], ties[cal], agr[k, cal] > 0.5, target=target, delta=delta, start=start)
        tests.append(fst)
        if fst.threshold is None:
            continue
        value, cut = fst.threshold
        with np.errstate(invalid="ignore"):
            trusted = has & ((conf[k] > value) | ((conf[k] == value) & (ties >= cut)))
        decided[trusted] = k
        open_ &= ~trusted
    return CascadeCore(tests, reached, decided)
