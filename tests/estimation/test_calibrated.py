"""ppi-cal: cross-fitted isotonic calibration inside PPI++, checked against scikit-learn + ppi-python, ppi-aipw's
calibration map, and by coverage on a recorded-like study and in simulation."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from ppi_py import ppi_mean_pointestimate
from scipy.stats import t as student_t
from sklearn.isotonic import IsotonicRegression

from scijudge.estimation import estimate
from scijudge.estimation.calibrated import cross_fit, isotonic_fit, isotonic_predict, ppi_cal_mean
from scijudge.estimation.ppi import ppi_mean
from scijudge.testing.studies import study


def _stretched(rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Human ratings 1..5 and a judge whose score grows exponentially with the rating (plus noise): monotone
    but far from linear, so PPI++'s ``lam * f`` uses it poorly (correlation about 0.68)."""
    y = rng.choice(np.arange(1.0, 6.0), size, p=[0.1, 0.2, 0.3, 0.25, 0.15])
    return y, np.exp(1.5 * (y + rng.normal(0.0, 0.3, size)))


def test_isotonic_fit_equals_sklearn_and_ppi_aipws_calibration_map() -> None:
    rng = np.random.default_rng(0)
    f = rng.integers(1, 6, 60).astype(float)
    y = np.clip(f + rng.normal(0.0, 1.0, 60), 1, 5)
    grid = np.array([0.0, 1.0, 1.5, 2.5, 3.0, 4.9, 5.0, 7.0])
    mine = isotonic_predict(*isotonic_fit(f, y), grid)
    assert mine == pytest.approx(IsotonicRegression(out_of_bounds="clip").fit(f, y).predict(grid), abs=1e-12)
    ppi_aipw = pytest.importorskip("ppi_aipw", reason="ppi-aipw is not installed")
    theirs = ppi_aipw.fit_calibrator(y, f, method="isotonic", isocal_backend="sklearn").predict(grid)
    assert mine == pytest.approx(np.ravel(theirs), abs=1e-12)


def test_ppi_cal_equals_an_independent_computation() -> None:
    """scikit-learn's IsotonicRegression on the same folds, ppi-python's PPI++ point estimate on the cross-fitted
    predictions, and the interval by hand (ddof 1, Student's t with n - 1 degrees of freedom)."""
    rng = np.random.default_rng(1)
    y, f = _stretched(rng, 500)
    lab = rng.choice(500, 60, replace=False)
    unl = np.setdiff1d(np.arange(500), lab)
    got = ppi_cal_mean(y[lab], f[lab], f[unl], 0.1, folds=10, seed=7)
    order = np.random.default_rng(7).permutation(60)
    fold = np.empty(60, dtype=int)
    fold[order] = np.arange(60) % 10
    m_lab, m_unl = np.empty(60), np.zeros(unl.size)
    for k in range(10):
        model = IsotonicRegression(out_of_bounds="clip").fit(f[lab][fold != k], y[lab][fold != k])
        m_lab[fold == k] = model.predict(f[lab][fold == k])
        m_unl += model.predict(f[unl]) / 10
    point = float(np.ravel(ppi_mean_pointestimate(y[lab], m_lab, m_unl))[0])
    assert got.estimate == pytest.approx(point, abs=1e-10)
    lam = got.lam
    se = math.sqrt(lam**2 * np.var(m_unl, ddof=1) / unl.size + np.var(y[lab] - lam * m_lab, ddof=1) / 60)
    half = student_t.ppf(0.95, 59) * se
    assert (got.lo, got.hi) == pytest.approx((point - half, point + half), abs=1e-10)
    assert cross_fit(y[lab], f[lab], f[unl], folds=10, seed=7)[0] == pytest.approx(m_lab, abs=1e-12)


def _coverage(y: np.ndarray, f: np.ndarray, sets: int, n: int, seed: int) -> dict[str, tuple[float, float]]:
    rng = np.random.default_rng(seed)
    theta = y.mean()
    hits: dict[str, list[float]] = {"ppi": [], "ppi-cal": [], "recommended": []}
    widths: dict[str, list[float]] = {"ppi": [], "ppi-cal": [], "recommended": []}
    for r in range(sets):
        mask = np.zeros(y.size, dtype=bool)
        mask[rng.choice(y.size, n, replace=False)] = True
        a = ppi_mean(y[mask], f[mask], f[~mask], 0.1)
        b = ppi_cal_mean(y[mask], f[mask], f[~mask], 0.1, seed=r)
        best = b if b.hi - b.lo < a.hi - a.lo else a
        for name, e in (("ppi", a), ("ppi-cal", b), ("recommended", best)):
            hits[name].append(e.lo <= theta <= e.hi)
            widths[name].append(e.hi - e.lo)
    return {k: (float(np.mean(hits[k])), float(np.mean(widths[k]))) for k in hits}


@pytest.mark.parametrize("judge", [0, 1, 2])
def test_coverage_on_the_recorded_like_study_at_50_labels(judge: int) -> None:
    """300 label sets of 50 on a 1,000-unit study drawn from the bundled panel: ppi-cal and the recommended
    estimate cover at least 0.875 at 90%. (These made-up judges are linear in the human score, so calibration
    does not help: ppi-cal is 4-8% wider than PPI++ here, and ``recommended`` picks PPI++ on most sets.)"""
    y, f, _ = study(1000, seed=1, judge=judge)
    result = _coverage(y, f, 300, 50, seed=2)
    assert result["ppi-cal"][0] >= 0.875 and result["recommended"][0] >= 0.875, result
    assert result["recommended"][1] <= result["ppi"][1] * 1.02, result


def test_coverage_and_width_for_a_stretched_judge_in_simulation() -> None:
    """A monotone but non-linear judge: the linear lam * f uses it poorly, the calibration well."""
    y, f = _stretched(np.random.default_rng(3), 2000)
    result = _coverage(y, f, 300, 50, seed=4)
    assert result["ppi-cal"][0] >= 0.875, result
    assert result["ppi-cal"][1] < 0.8 * result["ppi"][1], result


def test_estimate_has_a_ppi_cal_row_and_a_recommended_column() -> None:
    rng = np.random.default_rng(5)
    y, f = _stretched(rng, 400)
    ids = [f"i{k}" for k in range(400)]
    judgments = pd.DataFrame({"item_id": ids, "judge": "j", "score": f})
    lab = np.sort(rng.choice(400, 80, replace=False))  # the units' order: the folds follow it
    labels = pd.DataFrame({"item_id": [ids[k] for k in lab], "judge": "j", "score": y[lab]})
    table = estimate(judgments, labels, scale=(0, 1e6, 1, "continuous")).set_index("method")
    assert list(table.index) == ["ppi", "ppi-cal", "human-only", "judge-only"]
    unl = np.setdiff1d(np.arange(400), lab)
    expected = ppi_cal_mean(y[lab], f[lab], f[unl], 0.05)
    assert table.loc["ppi-cal", "estimate"] == pytest.approx(expected.estimate)
    assert table["recommended"].tolist() == [False, True, False, False]


def test_joint_ppi_cal_equals_statsmodels_ols_and_a_t_interval() -> None:
    """The joint calibration by hand with statsmodels: OLS of the human score on the models' columns, the mean of
    its predictions on the unlabelled units plus the mean residual, ``mse_resid`` (df = n - rank) and t."""
    import statsmodels.api as sm

    from scijudge.estimation.calibrated import joint_columns, ppi_cal_joint_mean

    rng = np.random.default_rng(11)
    y = rng.normal(3.0, 1.0, 700)
    scores = np.column_stack([y + rng.normal(0, 0.8, 700), 0.5 * y + rng.normal(0, 0.6, 700),
                              np.exp(0.4 * y) + rng.normal(0, 0.5, 700)])
    scores[rng.random(700) < 0.15, 1] = np.nan  # model b skipped some units
    x = joint_columns(scores)
    assert x.shape[1] == 4 and set(np.unique(x[:, 2])) == {0.0, 1.0}  # a, b, b's "not scored", c
    assert x[np.isnan(scores[:, 1]), 1] == pytest.approx(np.full(int(np.isnan(scores[:, 1]).sum()),
                                                                   np.nanmean(scores[:, 1])))
    lab = rng.choice(700, 80, replace=False)
    unl = np.setdiff1d(np.arange(700), lab)
    got = ppi_cal_joint_mean(y[lab], x[lab], x[unl], 0.1)
    fit = sm.OLS(y[lab], sm.add_constant(x[lab])).fit()
    pred = fit.predict(sm.add_constant(x[unl], has_constant="add"))
    point = pred.mean() + fit.resid.mean()
    se = math.sqrt(fit.mse_resid / 80 + np.var(pred, ddof=1) / unl.size)
    half = student_t.ppf(0.95, fit.df_resid) * se
    assert fit.df_resid == 80 - 5
    assert got.estimate == pytest.approx(point, abs=1e-10)
    assert (got.lo, got.hi, got.se) == pytest.approx((point - half, point + half, se), abs=1e-10)
    assert math.isnan(ppi_cal_joint_mean(y[lab[:24]], x[lab[:24]], x[unl], 0.1).estimate)  # < max(30, 5 * 5)


def test_joint_ppi_cal_covers_on_the_recorded_like_study_and_is_narrower_than_any_one_judge() -> None:
    """300 label sets of 50 on a 1,000-unit study drawn from the bundled panel (three judges, each abstaining on
    some units): the joint calibration covers at least 0.875 at 90% and is narrower than every single judge's
    PPI++ (measured 0.81-0.86 of judge a's)."""
    from scijudge.estimation.calibrated import joint_columns, ppi_cal_joint_mean
    from scijudge.testing.studies import recorded_units

    y0, f0 = recorded_units()
    keep = np.isfinite(f0).any(axis=1)
    pick = np.random.default_rng(21).integers(0, int(keep.sum()), 1000)
    y, f = y0[keep][pick], f0[keep][pick]
    x = joint_columns(f)
    rng = np.random.default_rng(22)
    hits, widths, single = [], [], {j: [] for j in range(3)}
    for _ in range(300):
        mask = np.zeros(y.size, dtype=bool)
        mask[rng.choice(y.size, 50, replace=False)] = True
        e = ppi_cal_joint_mean(y[mask], x[mask], x[~mask], 0.1)
        hits.append(e.lo <= y.mean() <= e.hi)
        widths.append(e.hi - e.lo)
        for j in range(3):
            scored = np.isfinite(f[:, j])
            s = ppi_mean(y[mask & scored], f[mask & scored, j], f[~mask & scored, j], 0.1)
            single[j].append(s.hi - s.lo)
    assert np.mean(hits) >= 0.875, np.mean(hits)
    assert all(np.mean(widths) < 0.95 * np.mean(w) for w in single.values()), (np.mean(widths), single)


def _panel(n_items: int, labelled: int, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    y = rng.integers(1, 6, n_items).astype(float)
    rows = []
    for model, noise in (("m1", 0.7), ("m2", 0.9)):
        for k in range(n_items):
            rows.append({"item_id": f"i{k}", "judge": "j", "model": model,
                         "score": float(np.clip(np.round(y[k] + rng.normal(0, noise)), 1, 5))})
    lab = rng.choice(n_items, labelled, replace=False)
    labels = pd.DataFrame({"item_id": [f"i{k}" for k in lab], "judge": "j", "score": y[lab]})
    return pd.DataFrame(rows), labels


def test_estimate_adds_a_joint_ppi_cal_row_only_with_enough_labels() -> None:
    from scijudge.estimation.calibrated import joint_columns, ppi_cal_joint_mean

    judgments, labels = _panel(300, 60, seed=3)
    table = estimate(judgments, labels, scale=(1, 5, 1))
    joint = table[table["model"] == "m1 + m2"]
    assert joint["method"].tolist() == ["ppi-cal"] and joint["kind"].tolist() == ["mean"]
    assert "2 models' scores at once" in joint["design"].iloc[0] and joint["note"].iloc[0] == ""
    wide = judgments.pivot(index="item_id", columns="model", values="score")
    order = sorted(wide.index)  # the units' order in the table (item ids sorted)
    x = joint_columns(wide.loc[order, ["m1", "m2"]].to_numpy(float))
    human = labels.set_index("item_id")["score"].reindex(order).to_numpy(float)
    expected = ppi_cal_joint_mean(human[~np.isnan(human)], x[~np.isnan(human)], x[np.isnan(human)], 0.05)
    assert joint["estimate"].iloc[0] == pytest.approx(expected.estimate, abs=1e-12)
    single = table[(table["model"] != "m1 + m2") & table["recommended"]]
    assert (joint["hi"] - joint["lo"]).iloc[0] < (single["hi"] - single["lo"]).min()  # 0.408 vs 0.416 here
    assert bool(joint["recommended"].iloc[0])
    few = estimate(judgments, labels.iloc[:20], scale=(1, 5, 1))
    assert "m1 + m2" not in set(few["model"])  # 20 labels < 30: no joint row
