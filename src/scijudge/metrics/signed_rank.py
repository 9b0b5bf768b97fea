"""Wilcoxon signed-rank test in milliseconds: the exact null distribution by dynamic programming.

scipy's ``wilcoxon`` switches to a resampling permutation test when the differences have ties or zeros and
n <= 13 (then it enumerates all 2^n sign flips through Python callbacks: about a second per call), which
made ``calibrate`` on a 12-item example spend most of its time there. The permutation distribution of the
signed-rank statistic is the same thing computed exactly: each non-zero difference carries its (mid-)rank
with a + or - sign with probability 1/2, so the number of sign assignments giving each sum of positive
ranks is a subset-sum count. Doubling the mid-ranks makes them integers, and one pass over the ranks builds
the whole distribution (O(n^3) additions). Up to ``EXACT_MAX`` differences the p-value is
exact (equal to scipy's exhaustive permutation test and to its exact method when there are no ties); above
it, the normal approximation with the tie correction (scipy's ``method="approx"``, no continuity
correction). Zeros are dropped first (``zero_method="wilcox"``). The tests cross-check all three.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

EXACT_MAX = 400
"""Largest number of non-zero differences whose p-value comes from the exact distribution."""


def signed_rank_pvalue(differences: np.ndarray) -> float:
    """Two-sided p-value of the Wilcoxon signed-rank test of ``differences`` against a zero median."""
    d = np.asarray(differences, dtype=float)
    d = d[np.isfinite(d)]
    d = d[d != 0]
    n = int(d.size)
    if n == 0:
        return 1.0
    ranks = stats.rankdata(np.abs(d))
    r_plus = float(ranks[d > 0].sum())
    if n <= EXACT_MAX:
        doubled = np.rint(ranks * 2).astype(np.int64)
        total = int(doubled.sum())
        counts = np.zeros(total + 1)  # float64: relative precision is what a p-value needs (2^400 fits)
        counts[0] = 1.0
        for r in doubled:
            counts[r:] = counts[r:] + counts[: total + 1 - r].copy()
        probs = counts / counts.sum()
        observed = int(round(r_plus * 2))
        lower, upper = float(probs[: observed + 1].sum()), float(probs[observed:].sum())
        return min(1.0, 2.0 * min(lower, upper))
    mean = n * (n + 1) / 4.0
    _, tie_counts = np.unique(np.abs(d), return_counts=True)
    var = n * (n + 1) * (2 * n + 1) / 24.0 - float((tie_counts**3 - tie_counts).sum()) / 48.0
    if var <= 0:
        return 1.0
    z = (r_plus - mean) / math.sqrt(var)
    return float(min(1.0, 2.0 * stats.norm.sf(abs(z))))
