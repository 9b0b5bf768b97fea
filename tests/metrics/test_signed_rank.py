"""The signed-rank test equals scipy's exhaustive permutation test (ties), its exact method and its normal form."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from scijudge.metrics.agreement import mean_bias
from scijudge.metrics.signed_rank import EXACT_MAX, signed_rank_pvalue


@pytest.mark.parametrize("seed", range(6))
def test_ties_and_zeros_equal_scipys_exhaustive_permutation_test(seed: int) -> None:
    rng = np.random.default_rng(seed)
    d = rng.integers(-2, 3, size=9).astype(float)
    d[0] = 1.0  # at least one non-zero difference
    expected = stats.wilcoxon(d, zero_method="wilcox", method=stats.PermutationMethod(n_resamples=np.inf)).pvalue
    assert signed_rank_pvalue(d) == pytest.approx(expected, abs=1e-12)


def test_without_ties_equals_the_exact_method_and_above_the_cutoff_the_normal_one() -> None:
    rng = np.random.default_rng(3)
    d = rng.normal(size=25)
    assert signed_rank_pvalue(d) == pytest.approx(stats.wilcoxon(d, method="exact").pvalue, abs=1e-12)
    big = rng.normal(0.1, 1, size=EXACT_MAX + 50)
    assert signed_rank_pvalue(big) == pytest.approx(stats.wilcoxon(big, method="approx").pvalue, rel=1e-9)


def test_all_zero_differences_have_no_evidence() -> None:
    assert signed_rank_pvalue(np.zeros(5)) == 1.0
    assert mean_bias([3, 4, 5], [3, 4, 5]).p_wilcoxon == 1.0


def test_twelve_tied_differences_take_milliseconds() -> None:
    import time

    d = np.array([1, -1, 2, 0, 1, 1, -2, 1, 0, 1, 2, 1], dtype=float)
    start = time.perf_counter()
    for _ in range(50):
        signed_rank_pvalue(d)
    assert (time.perf_counter() - start) / 50 < 0.05  # scipy's permutation path: about a second per call
