"""calibrate's fast paths at scale give exactly what the plain per-row computations they replace give."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import sparse

from scijudge.errors import InputError
from scijudge.metrics import bootstrap as bs
from scijudge.metrics.agreement import scale_values
from scijudge.metrics.calibration import continuous as cont
from scijudge.metrics.calibration._blocks import _isin
from scijudge.metrics.calibration.ordinal import _prob_matrix, _prob_row
from scijudge.metrics.calibration.scales import norm_verdicts
from scijudge.metrics.groups import text_column
from scijudge.vocab import norm_verdict


def _frame(probs: list[object]) -> pd.DataFrame:
    n = len(probs)
    return pd.DataFrame({"item_id": [f"q{i}" for i in range(n)], "judge": ["j"] * n, "source": ["run"] * n,
                         "probs": probs})


def _reference(frame: pd.DataFrame, values: np.ndarray) -> np.ndarray:
    return np.array([_prob_row(p, values, r) for p, (_, r) in zip(frame["probs"], frame.iterrows())])


@pytest.mark.parametrize("scale", [(1, 5, 1), (1, 5, 0.5), (0, 1, 0.25)])
def test_probability_matrix_equals_the_row_by_row_one_bit_for_bit(scale: tuple[float, float, float]) -> None:
    rng = np.random.default_rng(7)
    values = scale_values(*scale)
    keys = [f"{v:g}" for v in values]
    probs: list[object] = []
    for i in range(400):
        kind = i % 5
        if kind == 0:  # every point, random weights that do not sum to 1
            probs.append({k: float(w) for k, w in zip(keys, rng.random(values.size))})
        elif kind == 1:  # a few points, in a shuffled order, one of them zero
            chosen = rng.permutation(keys)[:3]
            probs.append({str(k): (0.0 if j == 0 else float(rng.random())) for j, k in enumerate(chosen)})
        elif kind == 2:  # two spellings of one point: their probabilities add up, in key order
            probs.append({keys[0]: 0.1, f"{values[0]:.1f}": 0.3, keys[-1]: float(rng.random())})
        elif kind == 3:  # integers
            probs.append({keys[1]: 1, keys[2]: 3})
        else:  # one point only
            probs.append({keys[int(rng.integers(values.size))]: float(rng.random()) + 0.5})
    frame = _frame(probs)
    got = _prob_matrix(frame, values)
    assert got.shape == (len(probs), values.size)
    assert np.array_equal(got, _reference(frame, values))  # bit for bit, not approximately
    assert np.array_equal(got.view(np.int64), _reference(frame, values).view(np.int64))


@pytest.mark.parametrize("bad", [
    {"1": -0.2, "2": 1.0},  # a negative probability
    {"1": 0.5, "7": 0.5},  # not a point of the scale
    {"1": None, "2": 1.0},  # not a number
    {"1": float("nan"), "2": 1.0},
    {"1": 0.0, "2": 0.0},  # sums to 0
    {"x": 0.3},
])
def test_a_bad_probability_raises_the_row_by_row_error_for_the_first_bad_row(bad: dict) -> None:
    values = scale_values(1, 5, 1)
    good = {"1": 0.2, "2": 0.8}
    frame = _frame([good, good, bad, {"1": -1.0, "5": 2.0}, good])
    with pytest.raises(InputError) as plain:
        _reference(frame, values)
    with pytest.raises(InputError) as fast:
        _prob_matrix(frame, values)
    assert str(fast.value) == str(plain.value) and "'q2'" in str(fast.value)


def test_text_probabilities_take_the_row_by_row_path_and_agree() -> None:
    values = scale_values(1, 5, 1)
    frame = _frame([{"1": "0.25", "3": 0.75}, {"2": 0.5, "4": 0.5}, {"1": True, "2": 1.0}])
    assert np.array_equal(_prob_matrix(frame, values), _reference(frame, values))


def test_isin_by_hash_equals_pandas_isin() -> None:
    values = pd.Series([f"q{i}" for i in range(50)] + ["", "x"]).astype(str)
    allowed = [f"q{i}" for i in range(0, 80, 3)] + ["q3", ""]  # repeats are fine
    assert np.array_equal(_isin(values, allowed), values.isin(allowed).to_numpy())
    assert np.array_equal(_isin(values, pd.Index(["q1"])), values.isin(["q1"]).to_numpy())
    assert not _isin(values, []).any()


@pytest.mark.parametrize("column", [
    pd.Series(["a", None, "b"]), pd.Series(["a", "b"]), pd.Series([None, None], dtype=object),
    pd.Series([1, None, "x"], dtype=object), pd.Series([], dtype=object), pd.Series(["a", None]).astype(str),
])
def test_text_column_equals_the_round_trip_through_objects(column: pd.Series) -> None:
    expected = column.astype(object).where(column.notna(), "").astype(str)
    pd.testing.assert_series_equal(text_column(column), expected, check_exact=True)


@pytest.mark.parametrize("column", [
    pd.Series([None, None, None], dtype=object, index=[4, 2, 9], name="verdict"),
    pd.Series([None, float("nan")], dtype=object), pd.Series([" A ", None, "Not Satisfied"], dtype=object),
    pd.Series([], dtype=object),
])
def test_norm_verdicts_equals_mapping_each_row(column: pd.Series) -> None:
    pd.testing.assert_series_equal(norm_verdicts(column), column.map(norm_verdict), check_exact=True)


def test_resample_counts_equal_one_bincount_over_the_whole_chunk() -> None:
    n_items, n_boot, seed = 37, 23, 5
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n_items, size=(n_boot, n_items), dtype=np.int64)
    draws += (np.arange(n_boot, dtype=np.int64) * n_items)[:, None]
    reference = np.bincount(draws.ravel(), minlength=n_boot * n_items).reshape(n_boot, n_items)
    got = np.vstack(list(bs.resample_counts(n_items, n_boot, seed)))
    assert got.dtype == reference.dtype and np.array_equal(got, reference)


def test_sparse_bootstrap_sums_equal_one_product_per_chunk_bit_for_bit(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    dense = np.where(rng.random((60, 9)) < 0.4, rng.random((60, 9)) * 3.7, 0.0)
    mat = sparse.csr_matrix(dense)
    monkeypatch.setattr(bs, "_SUB", 4)  # several sub-products per chunk
    got = bs.bootstrap_sums(mat, 50, seed=11)
    transposed = mat.T.tocsr()
    reference = np.vstack([np.asarray(transposed @ counts.T.astype(float)).T
                           for counts in bs.resample_counts(60, 50, 11)])
    assert np.array_equal(got, reference)


def test_rank_replicates_from_chunks_equal_those_from_the_whole_array() -> None:
    rng = np.random.default_rng(2)
    j, h = rng.random(40).round(1), rng.random(40).round(1)
    counts = np.vstack(list(bs.resample_counts(40, 12, seed=4)))
    counts[3] = 0
    counts[3, 0] = 40  # one item drawn 40 times: constant, so NaN
    whole = cont.rank_replicates(counts, j, h)
    chunked = cont.rank_replicates(iter([counts[:5], counts[5:9], counts[9:]]), j, h)
    for name in ("spearman", "kendall"):
        assert np.array_equal(whole[name], chunked[name], equal_nan=True)
        assert np.isnan(whole[name][3]) and whole[name].shape == (12,)


def test_ordinal_reliability_equals_alpha_and_ac2_one_by_one() -> None:
    from scijudge.metrics import agreement as ag

    rng = np.random.default_rng(9)
    for values in (scale_values(1, 5, 1), scale_values(1, 5, 0.5)):
        ratings = rng.choice(values, size=(300, 3))
        ratings[rng.random(ratings.shape) < 0.2] = np.nan
        got = ag.ordinal_reliability(ratings, values)
        assert got == {"alpha_ordinal": ag.krippendorff_alpha(ratings, values, "ordinal"),
                       "alpha_interval": ag.krippendorff_alpha(ratings, values, "interval"),
                       "ac2": ag.gwet_ac2(ratings, values, "quadratic")}


def test_one_blas_thread_limits_blas_and_gives_the_caller_threads_back_for_point_estimates() -> None:
    threadpoolctl = pytest.importorskip("threadpoolctl")
    from scijudge.metrics.calibration._blocks import one_blas_thread

    def blas_threads() -> list[int]:
        return [lib["num_threads"] for lib in threadpoolctl.threadpool_info() if lib["user_api"] == "blas"]

    before = blas_threads()
    with one_blas_thread() as caller_threads:
        assert all(n == 1 for n in blas_threads())
        with caller_threads():
            assert blas_threads() == before
        assert all(n == 1 for n in blas_threads())
    assert blas_threads() == before


def _per_item_sums(mat: sparse.csr_matrix, n_boot: int, seed: int) -> np.ndarray:
    """The per-item product bootstrap_sums made before equal rows were merged: the reference, bit for bit."""
    transposed = mat.T.tocsr()
    return np.vstack([np.asarray(transposed @ counts.T.astype(float)).T
                      for counts in bs.resample_counts(mat.shape[0], n_boot, seed)])


@pytest.mark.parametrize("distinct", [1, 5, 40])
def test_integer_rows_merged_give_the_per_item_sums_bit_for_bit(distinct: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(distinct)
    patterns = rng.integers(0, 3, size=(distinct, 12)) * (rng.random((distinct, 12)) < 0.4)
    mat = sparse.csr_matrix(patterns[rng.integers(0, distinct, size=300)].astype(float))
    merged = bs._merged_rows(mat)
    assert merged is not None and merged[1].shape[0] <= distinct
    monkeypatch.setattr(bs, "_SUB", 4)  # several sub-products, the last one narrower
    assert np.array_equal(bs.bootstrap_sums(mat, 37, seed=2), _per_item_sums(mat, 37, 2))


def test_rows_are_merged_only_when_that_keeps_every_bit() -> None:
    rng = np.random.default_rng(4)
    counts = sparse.csr_matrix(rng.integers(0, 2, size=(200, 3)).astype(float))
    assert bs._merged_rows(counts) is not None
    assert bs._merged_rows(counts * 0.1) is None  # fractions: merged sums would round differently
    assert bs._merged_rows(sparse.csr_matrix(np.eye(50))) is None  # no two items alike: nothing to gain
    huge = counts.copy()
    huge.data[:] = 2.0**50
    assert bs._merged_rows(huge) is None  # integer sums past 2**53 round
    for mat in (counts * 0.1, sparse.csr_matrix(np.eye(50))):
        assert np.array_equal(bs.bootstrap_sums(mat, 20, seed=1), _per_item_sums(sparse.csr_matrix(mat), 20, 1))


def test_kappa_from_the_confusion_table_equals_kappa_from_the_pairs_bit_for_bit() -> None:
    from scijudge.metrics import agreement as ag

    rng = np.random.default_rng(6)
    for values in (scale_values(1, 5, 1), scale_values(0, 1, 0.25), scale_values(1, 3, 1)):
        for trial in range(20):
            n = int(rng.integers(2, 80))
            h = rng.choice(values[: int(rng.integers(1, values.size + 1))], size=n)
            j = np.full(n, values[0]) if trial == 0 else rng.choice(values, size=n)  # one side constant, too
            table = ag.confusion(j, h, values)
            for weights in ("quadratic", "linear", None):
                assert ag.kappa_from_confusion(table, weights) == ag.weighted_kappa(j, h, values, weights)


def test_category_counts_and_coincidence_equal_the_per_unit_sums_bit_for_bit() -> None:
    from scijudge.metrics import agreement as ag

    rng = np.random.default_rng(8)
    for raters, missing in ((2, 0.0), (3, 0.0), (3, 0.3), (5, 0.4)):  # 4 ratings (weight 1/3) take the einsum
        values = scale_values(1, 5, 0.5)
        ratings = rng.choice(values, size=(500, raters))
        ratings[rng.random(ratings.shape) < missing] = np.nan
        expected = np.zeros((ratings.shape[0], values.size))
        present = ~np.isnan(ratings)
        np.add.at(expected, (np.nonzero(present)[0], ag.to_index(ratings[present], values)), 1.0)
        counts = ag._category_counts(ratings, values)
        assert np.array_equal(counts, expected)
        m = counts.sum(axis=1)
        c = counts[m >= 2]
        per_unit = c[:, :, None] * c[:, None, :]
        per_unit[:, np.arange(values.size), np.arange(values.size)] -= c
        reference = np.einsum("ukl,u->kl", per_unit, 1.0 / (m[m >= 2] - 1))
        assert np.array_equal(ag.coincidence_matrix(ratings, values), reference)


def test_calibration_error_of_bins_equals_expected_calibration_error() -> None:
    from scijudge.metrics import agreement as ag

    rng = np.random.default_rng(1)
    conf, correct = rng.random(500), rng.random(500) < 0.7
    for strategy in ("uniform", "quantile"):
        bins = ag.reliability_bins(conf, correct, 10, strategy)
        assert ag.calibration_error_of_bins(bins) == ag.expected_calibration_error(conf, correct, 10, strategy)


def test_probability_matrix_of_masked_rows_equals_that_of_the_selected_frame() -> None:
    values = scale_values(1, 5, 1)
    probs: list[object] = [{"1": 0.2, "2": 0.8}, None, {"3": 1}, {}, {"5": 2.0, "4": 1.0}, {"1": 0.5, "2": 0.5}]
    frame = _frame(probs)
    mask = np.array([isinstance(p, dict) and len(p) > 0 for p in probs])
    assert np.array_equal(_prob_matrix(frame, values, mask), _prob_matrix(frame[mask], values))
    bad = _frame([None, {"1": 0.5}, None, {"1": -1.0}])
    with pytest.raises(InputError, match="'q3'"):  # the error names the frame's row, not the row among the selected
        _prob_matrix(bad, values, np.array([False, True, False, True]))


def test_consensus_of_single_labels_equals_the_group_by_median() -> None:
    from scijudge.metrics.calibration.scales import _consensus

    rng = np.random.default_rng(3)
    n = 200
    lab = pd.DataFrame({"item_id": [f"q{i // 2}" for i in range(n)], "judge": ["a", "b"] * (n // 2),
                        "part": pd.Series([""] * n).astype(str), "score": rng.choice([1.0, 1.5, 2.0, 4.5], n),
                        "verdict": None, "annotator": "x"}).astype({"item_id": str, "judge": str})
    scales = {"a": (1.0, 5.0, 1.0), "b": (1.0, 5.0, 0.5)}
    keys = ["item_id", "judge", "part"]
    for continuous in (set(), {"a"}):
        got = _consensus(lab, scales, continuous)[0]
        # the group-by path, taken as soon as one unit has two labels; that unit's row dropped again
        doubled = _consensus(pd.concat([lab, lab.iloc[:1]], ignore_index=True), scales, continuous)[0]
        expected = doubled.assign(n_annotators=1)
        pd.testing.assert_frame_equal(got, expected.astype({"n_annotators": "int64"}), check_exact=True)
        assert list(got[keys].itertuples(index=False)) == list(lab[keys].itertuples(index=False))


@pytest.mark.parametrize("noise", ["ordinal", "continuous"])
def test_point_estimates_of_a_large_row_are_the_librarys_own_bits(noise: str) -> None:
    """calibrate runs its point estimates on one BLAS thread, except Pearson's r (on the caller's threads): each
    is the value scipy and scikit-learn give when called here, as a user would, bit for bit, on a row long enough
    (60,000 pairs) for multi-threaded BLAS to split its sums."""
    from scipy import stats
    from sklearn import metrics as skm

    from scijudge.metrics.calibration import calibrate

    rng = np.random.default_rng(11)
    n = 60_000
    h = rng.integers(1, 6, n).astype(float)
    j = np.clip(h + rng.choice([-1.0, 0.0, 0.0, 1.0], n), 1, 5)
    scale: tuple = (1, 5, 1)
    if noise == "continuous":
        j = np.clip(h + rng.normal(0, 0.7, n), 1, 5)
        scale = (1, 5, 1, "continuous")
    items = [f"q{i:05d}" for i in range(n)]
    judgments = pd.DataFrame({"item_id": items, "judge": "m.r", "part": "", "family": "likert", "spec_hash": "h",
                              "model": "m", "status": "ok", "score": j, "verdict": None})
    labels = pd.DataFrame({"item_id": items, "judge": "m.r", "score": h})
    row = calibrate(judgments, labels, scale=scale, n_boot=0).per_rubric.iloc[0]
    assert row["pearson"] == stats.pearsonr(j, h).statistic
    assert row["spearman"] == stats.spearmanr(j, h).statistic
    assert row["kendall"] == stats.kendalltau(j, h, variant="b").statistic
    assert row["bias_t"] == stats.ttest_rel(j, h).statistic
    from scijudge.metrics import agreement as ag

    icc = ag.icc(np.column_stack([h, j]))  # scijudge's own ICC, here on the caller's threads
    assert (row["icc_a1"], row["icc_c1"]) == (icc["ICC(A,1)"], icc["ICC(C,1)"])
    if noise == "ordinal":
        assert row["kappa_w"] == skm.cohen_kappa_score(h, j, weights="quadratic")
        assert row["kappa_linear"] == skm.cohen_kappa_score(h, j, weights="linear")


def _scipy_rank_replicates(counts: np.ndarray, j: np.ndarray, h: np.ndarray) -> dict[str, np.ndarray]:
    """What rank_replicates computed before its levels-table path: scipy on each resample's pairs."""
    from scipy import stats

    rho, tau = [], []
    positions = np.arange(j.size)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for row in counts:
            idx = np.repeat(positions, row)
            if idx.size < 2:
                rho.append(np.nan)
                tau.append(np.nan)
                continue
            rj, rh = stats.rankdata(j[idx]), stats.rankdata(h[idx])
            rho.append(np.corrcoef(rj, rh)[0, 1] if np.ptp(rj) and np.ptp(rh) else np.nan)
            tau.append(stats.kendalltau(j[idx], h[idx]).statistic)
    return {"spearman": np.array(rho, dtype=float), "kendall": np.array(tau, dtype=float)}


@pytest.mark.parametrize("case", range(12))
def test_rank_replicates_are_scipys_bit_for_bit(case: int) -> None:
    """Spearman and Kendall of every resample from level tables equal scipy's rankdata + corrcoef and kendalltau
    on the resample's pairs, to the last bit: jury-like thirds, constant sides, empty and one-pair resamples, and
    raw values with so many levels that the per-resample scipy path is taken."""
    rng = np.random.default_rng(case)
    n = int(rng.integers(2, 90))
    j = rng.integers(1, 6, n) + rng.choice([0.0, 1 / 3, 2 / 3], n)
    h = rng.integers(1, 10, n) / 2.0
    if case % 4 == 1:
        h = np.full(n, 3.0)  # a constant human side: every correlation NaN
    if case % 4 == 2:
        j = rng.normal(size=n)  # every value its own level
    if case == 11:
        j, h = rng.normal(size=n + 60), rng.normal(size=n + 60)  # > 1,024 cells: the scipy path
        n = j.size
    counts = rng.multinomial(n, np.ones(n) / n, size=150)
    counts[0] = 0  # nothing drawn
    counts[1] = 0
    counts[1, 0] = 1  # one pair
    counts[2] = 0
    counts[2, 0] = n  # one pair drawn n times
    got = cont.rank_replicates(counts, j, h)
    want = _scipy_rank_replicates(counts, j, h)
    for name in ("spearman", "kendall"):
        assert got[name].dtype == want[name].dtype and got[name].shape == want[name].shape
        assert np.array_equal(got[name], want[name], equal_nan=True), name
        assert np.isnan(got[name][:3]).all()
    assert np.isfinite(got["kendall"][3:]).any() or case % 4 == 1


def test_corrcoef_steps_give_numpys_bits() -> None:
    rng = np.random.default_rng(7)
    for _ in range(2000):
        n = int(rng.integers(2, 300))
        x, y = rng.integers(1, 40, n) / 2.0, rng.normal(size=n)
        if np.ptp(x) == 0:
            continue
        assert cont._corrcoef(x, y) == np.corrcoef(x, y)[0, 1]


@pytest.mark.parametrize("repeat", [False, True])
def test_common_units_equal_the_merges_they_replace(repeat: bool) -> None:
    from scijudge.metrics.calibration._blocks import _Group
    from scijudge.metrics.calibration.paired import _on_common_units

    rng = np.random.default_rng(5)

    def group(n: int, name: str) -> _Group:
        ids = [f"q{i}" for i in rng.choice(40, size=n, replace=False)]
        pairs = pd.DataFrame({"item_id": ids, "part": [""] * n,
                              "score": rng.integers(1, 6, n).astype(float), "h_score": rng.integers(1, 6, n) / 1.0})
        if repeat:  # a unit judged twice (a pairwise judge's two orders): the merges' cross product
            pairs = pd.concat([pairs, pairs.iloc[:2]], ignore_index=True)
        return _Group(contender=name, judge="j", track="ordinal", pool="1..5", model=name, spec_hash="h",
                      family="likert", categories=np.arange(1, 6.0), pairs=pairs, counts={})

    ga, gb = group(25, "a"), group(30, "b")
    key = ["item_id", "part"]
    common = ga.pairs[key].merge(gb.pairs[key], on=key)
    want_a = ga.pairs.merge(common, on=key).sort_values(key).reset_index(drop=True)
    want_b = gb.pairs.merge(common, on=key).sort_values(key).reset_index(drop=True)
    got = _on_common_units(ga, gb, key)
    assert got is not None and len(common) >= 2
    pd.testing.assert_frame_equal(got[0], want_a, check_exact=True)
    pd.testing.assert_frame_equal(got[1], want_b, check_exact=True)


def test_calibrate_without_scikit_learns_argument_checks_gives_every_number_bit_for_bit(monkeypatch: pytest.MonkeyPatch) -> None:
    """``trusted_library_arguments`` turns off only scikit-learn's parameter validation: the same result."""
    import contextlib

    import sklearn

    from scijudge.metrics.calibration import _api, calibrate

    rng = np.random.default_rng(3)
    rows, labels = [], []
    for i in range(30):
        h = float(rng.integers(1, 6))
        labels += [{"item_id": f"q{i}", "judge": "yescieval.qa.correctness", "annotator": a,
                    "score": float(np.clip(h + rng.integers(-1, 2), 1, 5))} for a in ("a", "b")]
        rows += [{"item_id": f"q{i}", "judge": "yescieval.qa.correctness", "part": "", "family": "likert",
                  "spec_hash": "h", "model": m, "status": "ok", "score": float(np.clip(h + rng.integers(-n, n + 1), 1, 5)),
                  "verdict": None, "confidence": None, "probs": None} for m, n in (("m-a", 0), ("m-b", 2))]
    judgments, label_frame = pd.DataFrame(rows), pd.DataFrame(labels)
    seen = []
    original = _api.trusted_library_arguments

    @contextlib.contextmanager
    def watched():
        with original():
            seen.append(sklearn.get_config()["skip_parameter_validation"])
            yield

    monkeypatch.setattr(_api, "trusted_library_arguments", watched)
    fast = calibrate(judgments, label_frame, n_boot=100).to_dict()
    monkeypatch.setattr(_api, "trusted_library_arguments", contextlib.nullcontext)
    checked = calibrate(judgments, label_frame, n_boot=100).to_dict()
    assert seen == [True] and not sklearn.get_config()["skip_parameter_validation"]
    assert json.dumps(fast, sort_keys=True, default=str) == json.dumps(checked, sort_keys=True, default=str)


def test_paired_kappa_from_remembered_tables_is_scikit_learns_on_the_common_units_bit_for_bit() -> None:
    """Paired κ_w comes from each side's table of counts, remembered per distinct table (a side that rated every
    common unit has its own row's table): each value is scikit-learn's κ on the pairs of the common units, per
    judge and pooled, with partly overlapping contenders and a judge where both sides are constant (NaN)."""
    from sklearn.metrics import cohen_kappa_score

    from scijudge.metrics.calibration import POOLED, calibrate

    rng = np.random.default_rng(11)
    rows, labels = [], []
    judges = ("yescieval.qa.correctness", "yescieval.qa.coherence", "yescieval.qa.relevancy")
    for i in range(60):
        for judge in judges:
            h = 3.0 if judge == judges[2] else float(rng.integers(1, 6))
            labels.append({"item_id": f"q{i}", "judge": judge, "score": h})
            for model, noise in (("m-a", 1), ("m-b", 2), ("m-c", 0)):
                if model == "m-b" and i % 4 == 0:
                    continue  # m-b skipped a quarter of the items: its pairs with m-a are on common units only
                score = 3.0 if judge == judges[2] else float(np.clip(h + rng.integers(-noise, noise + 1), 1, 5))
                rows.append({"item_id": f"q{i}", "judge": judge, "part": "", "family": "likert", "spec_hash": "h",
                             "model": model, "status": "ok", "score": score, "verdict": None, "confidence": None,
                             "probs": None})
    judgments, human = pd.DataFrame(rows), pd.DataFrame(labels)
    paired = calibrate(judgments, human, n_boot=50).paired
    kappas = paired[paired["metric"] == "kappa_w"]
    assert len(kappas) == 3 * (len(judges) + 1)
    truth = human.set_index(["item_id", "judge"])["score"]
    for row in kappas.itertuples():
        names = judges if row.judge == POOLED else (row.judge,)
        both = judgments[judgments["judge"].isin(names)]
        by = {m: both[both["model"] == m].set_index(["item_id", "judge"])["score"] for m in (row.a, row.b)}
        common = by[row.a].index.intersection(by[row.b].index)
        assert row.n == len(common)
        for value, model in ((row.value_a, row.a), (row.value_b, row.b)):
            j, h = by[model].loc[common].to_numpy(), truth.loc[common].to_numpy()
            if row.judge == judges[2]:
                assert np.isnan(value)  # both sides constant: κ undefined
                continue
            want = cohen_kappa_score(h.astype(int) - 1, j.astype(int) - 1, labels=np.arange(5), weights="quadratic")
            assert value == want  # bit for bit
