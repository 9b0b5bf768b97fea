"""Agreement statistics against independent implementations and published worked examples."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sklearn import metrics as skm
from sklearn.calibration import calibration_curve

from scijudge.metrics import agreement as ag
from scijudge.metrics.tables import ordinal_stats, verdict_stats

NAN = np.nan
# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", example C: 4 observers, 12 units, missing.
KRIPP_2011 = np.array([
    [1, 2, 3, 3, 2, 1, 4, 1, 2, NAN, NAN, NAN],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, NAN, 3],
    [NAN, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, NAN],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, NAN],
]).T  # units × raters
# Shrout & Fleiss (1979), Table 2: 6 targets rated by 4 judges; ICC(2,1) = .29, ICC(3,1) = .71.
SHROUT_FLEISS = np.array([[9, 2, 5, 8], [6, 1, 3, 2], [8, 4, 6, 8], [7, 1, 2, 6], [10, 5, 6, 9], [6, 2, 4, 7]], float)


def _sim(seed: int, values: np.ndarray, n: int = 150) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    h = rng.choice(values, size=n)
    step = values[1] - values[0]
    j = np.clip(h + step * rng.integers(-1, 3, size=n), values[0], values[-1])
    return j, h


def test_scale_values_lists_every_point_and_rejects_bad_scales() -> None:
    assert ag.scale_values(1, 5, 0.5).tolist() == [1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5, 5]
    with pytest.raises(ValueError):
        ag.scale_values(1, 5, 0.3)
    with pytest.raises(ValueError):
        ag.scale_values(5, 1, 1)


def test_simple_agreement_by_hand() -> None:
    j, h = [1, 2, 4, 5], [1, 3, 2, 5]
    assert ag.exact_agreement(j, h) == 0.5
    assert ag.within_agreement(j, h, 1) == 0.75
    assert ag.mean_absolute_error(j, h) == pytest.approx((0 + 1 + 2 + 0) / 4)
    assert ag.top_share(j, 5) == 0.25
    assert ag.sd_ratio(j, h) == pytest.approx(np.std(j, ddof=1) / np.std(h, ddof=1))


def test_weighted_kappa_hand_computed() -> None:
    # human (1,2,3), judge (1,3,3): 2·cov / (var_h + var_j + Δmean²) = (4/3) / (6/9 + 8/9 + 1/9) = 0.8
    assert ag.weighted_kappa([1, 3, 3], [1, 2, 3], [1, 2, 3]) == pytest.approx(0.8)
    table = ag.confusion([1, 3, 3], [1, 2, 3], [1, 2, 3]).astype(float)
    assert ordinal_stats(table, np.array([1.0, 2, 3]), 1.0)["kappa_w"] == pytest.approx(0.8)


def test_weighted_kappa_uses_the_full_scale() -> None:
    # Scores 3 and 4 are unused: weights must still see 2→5 as three steps, not one.
    h, j = np.array([1, 2, 5, 5, 2, 1.0]), np.array([1, 5, 5, 2, 2, 1.0])
    full = ag.weighted_kappa(j, h, [1, 2, 3, 4, 5])
    present_only = skm.cohen_kappa_score(h, j, weights="quadratic")
    v = np.arange(1, 6.0)
    assert full == pytest.approx(ordinal_stats(ag.confusion(j, h, v).astype(float), v, 1.0)["kappa_w"])
    assert full != pytest.approx(present_only)


@pytest.mark.parametrize("seed,values", [(0, np.arange(1, 6.0)), (1, np.arange(1, 6.0)), (2, np.arange(1, 5.5, 0.5)),
                                         (3, np.arange(0, 1.5, 0.5))])
@pytest.mark.needs_extra("irrCAC")
def test_table_statistics_match_libraries(seed: int, values: np.ndarray) -> None:
    import irrCAC.raw as irr_raw
    import krippendorff
    import pingouin

    j, h = _sim(seed, values)
    step = float(values[1] - values[0])
    s = ordinal_stats(ag.confusion(j, h, values).astype(float), values, step)
    assert s["exact"] == pytest.approx(np.mean(j == h))
    assert s["within1"] == pytest.approx(np.mean(np.abs(j - h) <= step + 1e-9))
    assert s["mae"] == pytest.approx(skm.mean_absolute_error(h, j))
    assert s["bias"] == pytest.approx(np.mean(j - h))
    hi, ji = np.rint((h - values[0]) / step), np.rint((j - values[0]) / step)  # sklearn needs class labels
    assert s["kappa_w"] == pytest.approx(skm.cohen_kappa_score(hi, ji, labels=np.arange(values.size), weights="quadratic"))
    assert s["spearman"] == pytest.approx(stats.spearmanr(j, h).statistic)
    assert s["kendall"] == pytest.approx(stats.kendalltau(j, h, variant="b").statistic)
    assert s["pearson"] == pytest.approx(stats.pearsonr(j, h).statistic)
    rel = np.vstack([h, j])
    assert s["alpha_ordinal"] == pytest.approx(krippendorff.alpha(rel, level_of_measurement="ordinal", value_domain=values))
    assert s["alpha_interval"] == pytest.approx(krippendorff.alpha(rel, level_of_measurement="interval"))
    ac2 = irr_raw.CAC(pd.DataFrame({"h": h, "j": j}), weights="quadratic", categories=list(values), digits=12).gwet()
    assert s["ac2"] == pytest.approx(ac2["est"]["coefficient_value"], abs=1e-9)
    long = pd.DataFrame({"t": np.r_[np.arange(h.size), np.arange(h.size)], "r": ["h"] * h.size + ["j"] * h.size,
                         "x": np.r_[h, j]})
    icc = pingouin.intraclass_corr(long, targets="t", raters="r", ratings="x").set_index("Type")["ICC"]
    assert s["icc_a1"] == pytest.approx(icc["ICC(A,1)"] if "ICC(A,1)" in icc else icc["ICC2"])
    assert s["icc_c1"] == pytest.approx(icc["ICC(C,1)"] if "ICC(C,1)" in icc else icc["ICC3"])
    assert s["top_share_judge"] == pytest.approx(np.mean(j == values[-1]))
    assert s["sd_ratio"] == pytest.approx(np.std(j, ddof=1) / np.std(h, ddof=1))
    # the point-estimate functions agree with the table versions too
    pair = np.column_stack([h, j])
    assert ag.krippendorff_alpha(pair, values, "ordinal") == pytest.approx(s["alpha_ordinal"])
    assert ag.gwet_ac2(pair, values) == pytest.approx(s["ac2"])
    assert ag.icc(pair)["ICC(A,1)"] == pytest.approx(s["icc_a1"])


def test_table_statistics_are_batched() -> None:
    values = np.arange(1, 6.0)
    tables = np.stack([ag.confusion(*_sim(s, values), values).astype(float) for s in range(4)])
    batch = ordinal_stats(tables, values, 1.0)
    for i in range(4):
        single = ordinal_stats(tables[i], values, 1.0)
        for name, arr in batch.items():
            assert arr[i] == pytest.approx(single[name]), name


def test_krippendorff_alpha_published_example() -> None:
    krippendorff = pytest.importorskip("krippendorff")
    published = {"nominal": 0.743, "ordinal": 0.815, "interval": 0.849, "ratio": 0.797}
    for level, value in published.items():
        ours = ag.krippendorff_alpha(KRIPP_2011, None, level)  # type: ignore[arg-type]
        assert ours == pytest.approx(value, abs=5e-4)
        assert ours == pytest.approx(krippendorff.alpha(KRIPP_2011.T, level_of_measurement=level))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_krippendorff_alpha_with_missing_matches_package(seed: int) -> None:
    krippendorff = pytest.importorskip("krippendorff")
    rng = np.random.default_rng(seed)
    truth = rng.integers(1, 6, size=40)
    ratings = np.clip(truth[:, None] + rng.integers(-1, 2, size=(40, 4)), 1, 5).astype(float)
    ratings[rng.random(ratings.shape) < 0.3] = np.nan
    values = np.arange(1, 6.0)
    for level in ("nominal", "ordinal", "interval"):
        assert ag.krippendorff_alpha(ratings, values, level) == pytest.approx(  # type: ignore[arg-type]
            krippendorff.alpha(ratings.T, level_of_measurement=level, value_domain=values))


@pytest.mark.needs_extra("irrCAC")
def test_gwet_ac2_matches_irrcac_and_published_ac1() -> None:
    import irrCAC.raw as irr_raw

    frame = pd.DataFrame(KRIPP_2011.copy())
    values = np.arange(1, 6.0)
    # Gwet (2014) 4-rater example as printed in irrCAC's documentation: AC1 = 0.77544 (unit 12 differs by rater
    # but not by value from Krippendorff's table, which leaves AC1 unchanged).
    assert ag.gwet_ac2(KRIPP_2011, values, "identity") == pytest.approx(0.77544, abs=5e-6)
    for weights in ("identity", "quadratic", "linear"):
        ref = irr_raw.CAC(frame, weights=weights, categories=list(values), digits=12).gwet()["est"]["coefficient_value"]
        assert ag.gwet_ac2(KRIPP_2011, values, weights) == pytest.approx(ref, abs=1e-9)  # type: ignore[arg-type]


def test_icc_published_example_and_pingouin() -> None:
    result = ag.icc(SHROUT_FLEISS)
    assert result["ICC(A,1)"] == pytest.approx(0.29, abs=0.005)
    assert result["ICC(C,1)"] == pytest.approx(0.71, abs=0.005)
    pingouin = pytest.importorskip("pingouin")
    n, k = SHROUT_FLEISS.shape
    long = pd.DataFrame({"t": np.repeat(np.arange(n), k), "r": np.tile(np.arange(k), n), "x": SHROUT_FLEISS.ravel()})
    icc = pingouin.intraclass_corr(long, targets="t", raters="r", ratings="x").set_index("Type")["ICC"]
    assert result["ICC(A,1)"] == pytest.approx(icc["ICC(A,1)"] if "ICC(A,1)" in icc else icc["ICC2"])
    assert result["ICC(C,1)"] == pytest.approx(icc["ICC(C,1)"] if "ICC(C,1)" in icc else icc["ICC3"])
    with pytest.raises(ValueError):
        ag.icc(np.array([[1.0, np.nan], [2.0, 3.0]]))


def test_mean_bias_uses_paired_tests() -> None:
    j, h = np.array([3, 4, 5, 4, 5, 5, 4.0]), np.array([3, 3, 4, 4, 4, 3, 4.0])
    res = ag.mean_bias(j, h)
    assert res.bias == pytest.approx(np.mean(j - h))
    assert res.p_ttest == pytest.approx(stats.ttest_rel(j, h).pvalue)
    assert res.p_wilcoxon == pytest.approx(stats.wilcoxon(j - h).pvalue)
    zero = ag.mean_bias([1, 2, 3], [1, 2, 3])
    assert (zero.bias, zero.p_ttest, zero.p_wilcoxon) == (0.0, 1.0, 1.0)
    assert ag.mean_bias([2, 3, 4], [1, 2, 3]).p_ttest == 0.0  # constant non-zero shift


def test_verdict_scores_match_sklearn_and_tables() -> None:
    rng = np.random.default_rng(5)
    classes = np.array(["not", "partial", "satisfied"], dtype=object)
    h = rng.choice(classes[[0, 2]], size=80)  # 'partial' never in the human labels
    j = np.where(rng.random(80) < 0.7, h, rng.choice(classes, size=80))
    ours = ag.verdict_scores(j, h)
    assert ours.accuracy == pytest.approx(skm.accuracy_score(h, j))
    assert ours.kappa == pytest.approx(skm.cohen_kappa_score(h, j))
    assert ours.mcc == pytest.approx(skm.matthews_corrcoef(h, j))
    table = skm.confusion_matrix(h, j, labels=classes).astype(float)
    t = verdict_stats(table)
    with pytest.warns(UserWarning):
        expected_bal = skm.balanced_accuracy_score(h, j)
    assert t["balanced_accuracy"] == pytest.approx(expected_bal)
    assert t["macro_f1"] == pytest.approx(skm.f1_score(h, j, average="macro"))
    assert t["accuracy"] == pytest.approx(ours.accuracy)
    assert t["kappa"] == pytest.approx(ours.kappa)
    assert t["mcc"] == pytest.approx(ours.mcc)


def test_brier_and_ece_by_hand_and_against_sklearn() -> None:
    conf = np.array([0.9, 0.8, 0.6, 0.3, 0.95])
    correct = np.array([1, 1, 0, 0, 1])
    assert ag.brier_binary(conf, correct) == pytest.approx(np.mean((conf - correct) ** 2))
    # ECE, 2 equal-width bins: [0, .5): {0.3 → wrong}; [.5, 1]: {.9, .8, .6, .95 → 3 of 4 right}
    ece = (1 * abs(0 - 0.3) + 4 * abs(0.75 - np.mean([0.9, 0.8, 0.6, 0.95]))) / 5
    assert ag.expected_calibration_error(conf, correct, n_bins=2) == pytest.approx(ece)
    rng = np.random.default_rng(0)
    c = rng.random(300)
    y = (rng.random(300) < c).astype(int)
    for strategy in ("uniform", "quantile"):
        bins = ag.reliability_bins(c, y, 8, strategy)  # type: ignore[arg-type]
        prob_true, prob_pred = calibration_curve(y, c, n_bins=8, strategy=strategy)
        assert np.allclose(bins["accuracy"], prob_true)
        assert np.allclose(bins["confidence"], prob_pred)
    probs = np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]])
    # multi-class Brier: (0.3² + 0.2² + 0.1²) and (0.1² + 0.9² + 0.8²) for true classes 1 and 2
    assert ag.brier_multiclass(probs, [1, 2], [1, 2, 3]) == pytest.approx((0.14 + 1.46) / 2)
