"""The vectorised item bootstrap against explicit per-resample computations."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import sparse
from sklearn import metrics as skm

from scijudge.metrics import bootstrap as bs
from scijudge.metrics.agreement import confusion
from scijudge.metrics.tables import ordinal_stats


def test_resample_counts_draw_n_items_per_resample_and_are_seeded() -> None:
    chunks = list(bs.resample_counts(50, 30, seed=3))
    counts = np.vstack(chunks)
    assert counts.shape == (30, 50)
    assert (counts.sum(axis=1) == 50).all()
    again = np.vstack(list(bs.resample_counts(50, 30, seed=3)))
    assert (counts == again).all()
    other = np.vstack(list(bs.resample_counts(50, 30, seed=4)))
    assert (counts != other).any()
    # each item is drawn about once per resample on average
    assert counts.mean() == pytest.approx(1.0)


def test_chunking_does_not_change_the_draws(monkeypatch: pytest.MonkeyPatch) -> None:
    whole = np.vstack(list(bs.resample_counts(40, 25, seed=1)))
    monkeypatch.setattr(bs, "_CHUNK_CELLS", 40 * 7)  # 7 resamples per chunk
    chunked = list(bs.resample_counts(40, 25, seed=1))
    assert len(chunked) == 4
    assert (np.vstack(chunked) == whole).all()


def test_bootstrap_sums_equal_an_explicit_loop() -> None:
    rng = np.random.default_rng(0)
    per_item = rng.random((30, 4))
    counts = np.vstack(list(bs.resample_counts(30, 20, seed=9)))
    expected = np.array([(per_item * c[:, None]).sum(axis=0) for c in counts])
    assert np.allclose(bs.bootstrap_sums(per_item, 20, seed=9), expected)
    assert np.allclose(bs.bootstrap_sums(sparse.csr_matrix(per_item), 20, seed=9), expected)


def test_vectorised_kappa_replicates_match_sklearn_on_resampled_items() -> None:
    """Cluster bootstrap: items with several ratings; replicate b must equal sklearn on the rows of the items
    drawn in resample b (each drawn item's rows repeated as often as it was drawn)."""
    rng = np.random.default_rng(2)
    values = np.arange(1, 6.0)
    n_items = 60
    item_of_row = np.repeat(np.arange(n_items), 3)  # three rubrics per item
    h = rng.integers(1, 6, size=item_of_row.size).astype(float)
    j = np.clip(h + rng.integers(-1, 2, size=h.size), 1, 5)
    k = values.size
    cells = ((h - 1) * k + (j - 1)).astype(int)
    per_item = sparse.csr_matrix((np.ones(h.size), (item_of_row, cells)), shape=(n_items, k * k))
    reps = bs.bootstrap_sums(per_item, 25, seed=5).reshape(-1, k, k)
    kappa = ordinal_stats(reps, values, 1.0)["kappa_w"]
    counts = np.vstack(list(bs.resample_counts(n_items, 25, seed=5)))
    for b in range(25):
        weights = counts[b][item_of_row]
        hh, jj = np.repeat(h, weights), np.repeat(j, weights)
        assert kappa[b] == pytest.approx(skm.cohen_kappa_score(hh, jj, labels=values, weights="quadratic"))
    # replicate 0 of a table equal to the observed one is the point estimate
    observed = ordinal_stats(confusion(j, h, values).astype(float), values, 1.0)["kappa_w"]
    assert observed == pytest.approx(skm.cohen_kappa_score(h, j, labels=values, weights="quadratic"))


def test_percentile_interval_ignores_undefined_replicates() -> None:
    reps = np.r_[np.arange(100.0), [np.nan, np.inf]]
    lo, hi = bs.percentile_interval(reps)
    assert (lo, hi) == pytest.approx(tuple(np.percentile(np.arange(100.0), [2.5, 97.5])))
    batch = np.column_stack([np.arange(100.0), np.full(100, np.nan)])
    lo, hi = bs.percentile_interval(batch)
    assert lo[0] == pytest.approx(2.475) and np.isnan(lo[1])


def test_interval_covers_a_known_mean() -> None:
    """Coverage sanity check: the bootstrap interval of a mean contains the true mean in ~95% of samples."""
    rng = np.random.default_rng(11)
    hits = 0
    for _ in range(200):
        x = rng.normal(2.0, 1.0, size=60)
        reps = bs.bootstrap_sums(np.column_stack([x, np.ones_like(x)]), 300, seed=int(rng.integers(1 << 30)))
        lo, hi = bs.percentile_interval(reps[:, 0] / reps[:, 1])
        hits += lo <= 2.0 <= hi
    assert 0.88 <= hits / 200 <= 0.99


def test_paired_pvalue() -> None:
    assert bs.paired_pvalue(np.full(999, 0.3)) == pytest.approx(2 / 1000)
    assert bs.paired_pvalue(np.linspace(-1, 1, 1001)) == pytest.approx(1.0)
    assert np.isnan(bs.paired_pvalue(np.array([np.nan])))


def test_holm_by_hand() -> None:
    # sorted p: .01·3 = .03; .03·2 = .06; .04·1 = .04 → monotone max → .06
    assert np.allclose(bs.holm([0.01, 0.04, 0.03]), [0.03, 0.06, 0.06])
    out = bs.holm([0.02, np.nan])
    assert out[0] == pytest.approx(0.02) and np.isnan(out[1])


@pytest.mark.slow
def test_holm_matches_statsmodels() -> None:
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(0)
    for size in (1, 3, 7, 11):  # each statsmodels call runs gc.collect(): keep them few
        p = rng.random(size) ** 3
        assert np.allclose(bs.holm(p), multipletests(p, method="holm")[1])
