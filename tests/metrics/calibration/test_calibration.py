"""calibrate(): recovery of known judge behaviour, cross-checks of its numbers, and bad-input messages."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sklearn import metrics as skm

from scijudge.errors import InputError
from scijudge.labels import labels_to_frame, load_labels
from scijudge.metrics.calibration import POOLED, calibrate
from scijudge.report.calibration import report_dict

RUBRICS = ["yescieval.qa.correctness", "yescieval.qa.coherence", "yescieval.qa.completeness"]


def _row(item: str, judge: str, model: str, score: float | None, *, status: str = "ok", family: str = "likert",
         part: str = "", verdict: str | None = None, confidence: float | None = None, probs: dict | None = None,
         source: str = "") -> dict:
    return {"item_id": item, "judge": judge, "part": part, "family": family, "spec_hash": "s-" + judge[-4:],
            "model": model, "status": status, "score": score, "verdict": verdict, "confidence": confidence,
            "probs": probs, "source": source}


def _exact_offsets(rng: np.random.Generator, n: int, shares: tuple[float, float, float]) -> np.ndarray:
    """Offsets −1/0/+1 in exactly the given shares, in random order: the bias and noise are known exactly."""
    counts = np.round(np.array(shares) * n).astype(int)
    counts[1] = n - counts[0] - counts[2]
    return rng.permutation(np.repeat([-1.0, 0.0, 1.0], counts))


def _simulated(n_items: int = 400, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, float]]:
    rng = np.random.default_rng(seed)
    human = {(f"q{i}", r): float(rng.integers(2, 5)) for i in range(n_items) for r in RUBRICS}  # 2..4: no clipping
    judges = {"precise": (0.05, 0.65, 0.30), "noisy": (0.25, 0.20, 0.55)}  # biases 0.25 and 0.30
    true_bias = {name: s[2] - s[0] for name, s in judges.items()}
    rows = []
    keys = list(human)
    for name, shares in judges.items():
        offsets = _exact_offsets(rng, len(keys), shares)
        rows += [_row(item, judge, name, human[(item, judge)] + off) for (item, judge), off in zip(keys, offsets)]
    labels = pd.DataFrame([{"item_id": i, "judge": j, "score": s, "annotator": "a1"} for (i, j), s in human.items()])
    return pd.DataFrame(rows), labels, true_bias


@pytest.fixture(scope="module")
def simulated() -> tuple:
    judgments, labels, true_bias = _simulated()
    return judgments, labels, true_bias, calibrate(judgments, labels, n_boot=500, seed=1)


@pytest.mark.slow
def test_recovers_known_bias_and_ranks_the_less_noisy_judge_first(simulated: tuple) -> None:
    _, _, true_bias, result = simulated
    board = result.leaderboard.set_index("contender")
    for name, bias in true_bias.items():
        row = board.loc[name]
        assert row["bias"] == pytest.approx(bias)
        assert row["bias_lo"] < bias < row["bias_hi"]
        assert row["bias_p"] < 1e-6  # a real optimism bias is detected
    assert result.leaderboard.iloc[0]["contender"] == "precise"
    assert list(result.leaderboard["rank"]) == [1, 2]
    # the same numbers reach the JSON report
    report = report_dict(result)
    assert report["leaderboard"][0]["contender"] == "precise"
    assert report["leaderboard"][0]["bias"] == pytest.approx(true_bias["precise"])
    # and the two judges differ significantly on the paired comparison, in favour of the precise one
    pooled = result.paired[(result.paired["judge"] == POOLED) & (result.paired["metric"] == "kappa_w")].iloc[0]
    assert pooled["better"] == "precise" and pooled["p"] < 0.01


@pytest.mark.slow
def test_point_estimates_match_libraries_on_the_matched_pairs(simulated: tuple) -> None:
    judgments, labels, _, result = simulated
    merged = judgments.merge(labels, on=["item_id", "judge"], suffixes=("", "_h"))
    values = np.arange(1, 6.0)
    for _, row in result.per_rubric.iterrows():
        sel = merged[(merged["model"] == row["contender"]) & (merged["judge"] == row["judge"])]
        j, h = sel["score"].to_numpy(), sel["score_h"].to_numpy()
        assert row["n"] == len(sel)
        assert row["kappa_w"] == pytest.approx(skm.cohen_kappa_score(h, j, labels=values, weights="quadratic"))
        assert row["spearman"] == pytest.approx(stats.spearmanr(j, h).statistic)
        assert row["kendall"] == pytest.approx(stats.kendalltau(j, h).statistic)
        assert row["bias_p"] == pytest.approx(stats.ttest_rel(j, h).pvalue)
        assert row["exact"] == pytest.approx(np.mean(j == h))
        assert row["kappa_w_lo"] <= row["kappa_w"] <= row["kappa_w_hi"]
    sel = merged[merged["model"] == "precise"]
    pooled = result.leaderboard.set_index("contender").loc["precise"]
    assert pooled["kappa_w"] == pytest.approx(skm.cohen_kappa_score(sel["score_h"], sel["score"], labels=values,
                                                                    weights="quadratic"))
    # Holm across rubrics, per contender (statsmodels is the reference)
    from statsmodels.stats.multitest import multipletests

    precise = result.per_rubric[result.per_rubric["contender"] == "precise"]
    assert np.allclose(precise["bias_p_holm"], multipletests(precise["bias_p"], method="holm")[1])
    cm = result.confusion_matrix("precise", RUBRICS[0])
    s = sel[sel["judge"] == RUBRICS[0]]
    assert (cm.to_numpy() == skm.confusion_matrix(s["score_h"], s["score"], labels=values)).all()


@pytest.mark.slow
def test_same_seed_same_intervals() -> None:
    judgments, labels, _ = _simulated(60, seed=3)
    a = calibrate(judgments, labels, n_boot=200, seed=7)
    b = calibrate(judgments, labels, n_boot=200, seed=7)
    c = calibrate(judgments, labels, n_boot=200, seed=8)
    assert a.per_rubric["kappa_w_lo"].tolist() == b.per_rubric["kappa_w_lo"].tolist()
    assert a.per_rubric["kappa_w_lo"].tolist() != c.per_rubric["kappa_w_lo"].tolist()


def test_abstentions_lower_coverage_and_are_never_imputed() -> None:
    rows = [_row(f"q{i}", RUBRICS[0], "m", float(1 + i % 5)) for i in range(20)]
    rows += [_row(f"q{i}", RUBRICS[0], "m", None, status="abstained") for i in range(20, 25)]
    labels = pd.DataFrame([{"item_id": f"q{i}", "judge": RUBRICS[0], "score": float(1 + (i + 1) % 5)} for i in range(25)])
    result = calibrate(pd.DataFrame(rows), labels, n_boot=50)
    row = result.per_rubric.iloc[0]
    assert (row["n_units"], row["n_judged"], row["n_abstained"], row["n"]) == (25, 25, 5, 20)
    assert row["coverage"] == pytest.approx(0.8)
    # labels of items no run judged (allowed extra labels) do not count against coverage ...
    labels_more = pd.concat([labels, pd.DataFrame({"item_id": ["q25", "q26"], "judge": [RUBRICS[0]] * 2,
                                                   "score": [3.0, 2.0]})])
    result = calibrate(pd.DataFrame(rows), labels_more, n_boot=0, allow_extra_labels=True)
    row = result.per_rubric.iloc[0]
    assert (row["n_units"], row["n_missing"], row["coverage"]) == (25, 0, pytest.approx(20 / 25))
    assert any("2 labelled unit(s) of items no run judged" in n for n in result.notes)
    # ... but an item another contender judged and this one did not does
    other = rows + [_row("q25", RUBRICS[0], "other", 3.0)]
    row = calibrate(pd.DataFrame(other), labels_more, n_boot=0, allow_extra_labels=True).per_rubric
    row = row[row["contender"] == "m"].iloc[0]
    assert (row["n_missing"], row["coverage"]) == (1, pytest.approx(20 / 26))
    j = np.array([1 + i % 5 for i in range(20)], float)
    h = np.array([1 + (i + 1) % 5 for i in range(20)], float)
    assert row["mae"] == pytest.approx(np.mean(np.abs(j - h)))  # only the 20 answered items


def test_multiple_annotators_give_a_ceiling_and_a_consensus() -> None:
    krippendorff = pytest.importorskip("krippendorff")
    rng = np.random.default_rng(4)
    truth = rng.integers(1, 6, size=40).astype(float)
    ann = np.clip(truth[:, None] + rng.integers(-1, 2, size=(40, 3)), 1, 5)
    ann[rng.random(ann.shape) < 0.2] = np.nan
    ann[:, 0] = np.where(np.isnan(ann).sum(axis=1) >= 2, truth, ann[:, 0])  # at least two labels per item
    labels = pd.DataFrame([{"item_id": f"q{i}", "judge": RUBRICS[0], "score": ann[i, a], "annotator": f"a{a}"}
                           for i in range(40) for a in range(3) if not np.isnan(ann[i, a])])
    judgments = pd.DataFrame([_row(f"q{i}", RUBRICS[0], "m", truth[i]) for i in range(40)])
    result = calibrate(judgments, labels, n_boot=100)
    ceiling = result.human_ceiling.iloc[0]
    assert ceiling["alpha_ordinal"] == pytest.approx(
        krippendorff.alpha(ann.T, level_of_measurement="ordinal", value_domain=np.arange(1, 6.0)))
    assert ceiling["n_annotators"] == 3
    assert ceiling["alpha_ordinal_lo"] <= ceiling["alpha_ordinal"] <= ceiling["alpha_ordinal_hi"]
    # consensus = median, snapped to the scale (ties between two steps round to the even step index)
    med = np.nanmedian(ann, axis=1)
    cons = 1 + np.round(med - 1)
    assert result.per_rubric.iloc[0]["mae"] == pytest.approx(np.mean(np.abs(truth - cons)))


def test_verdicts_with_confidence() -> None:
    rng = np.random.default_rng(8)
    h = rng.choice(["satisfied", "not satisfied"], size=60)
    j = np.where(rng.random(60) < 0.8, h, np.where(h == "satisfied", "not satisfied", "satisfied"))
    conf = rng.uniform(0.5, 1.0, size=60)
    rows = [_row(f"r{i}", "researchrubrics.checklist", "m", 1.0 if j[i] == "satisfied" else 0.0, family="checklist",
                 part=f"c{i % 3}", verdict=j[i].upper(), confidence=conf[i]) for i in range(60)]
    labels = pd.DataFrame([{"item_id": f"r{i}", "judge": "researchrubrics.checklist", "part": f"c{i % 3}",
                            "verdict": h[i]} for i in range(60)])
    result = calibrate(pd.DataFrame(rows), labels, n_boot=100)
    row = result.verdict_per_rubric.iloc[0]
    assert row["accuracy"] == pytest.approx(skm.accuracy_score(h, j))
    assert row["kappa"] == pytest.approx(skm.cohen_kappa_score(h, j))
    assert row["mcc"] == pytest.approx(skm.matthews_corrcoef(h, j))
    assert row["macro_f1"] == pytest.approx(skm.f1_score(h, j, average="macro"))
    assert row["brier"] == pytest.approx(skm.brier_score_loss((h == j).astype(int), conf))
    assert row["accuracy_lo"] <= row["accuracy"] <= row["accuracy_hi"]
    assert result.leaderboard.empty and not result.verdict_leaderboard.empty
    assert set(result.reliability["strategy"]) == {"uniform", "quantile"}


def test_rating_probabilities_give_a_multiclass_brier() -> None:
    probs = [{"1": 0.1, "2": 0.1, "3": 0.6, "4": 0.1, "5": 0.1}, {"4": 0.5, "5": 0.5}, {"2": 1.0}]
    rows = [_row(f"q{i}", RUBRICS[0], "m", s, probs=p) for i, (s, p) in enumerate(zip([3.0, 4.0, 2.0], probs))]
    labels = pd.DataFrame({"item_id": ["q0", "q1", "q2"], "judge": RUBRICS[0], "score": [3.0, 5.0, 1.0]})
    row = calibrate(pd.DataFrame(rows), labels, n_boot=0).per_rubric.iloc[0]
    p = np.array([[0.1, 0.1, 0.6, 0.1, 0.1], [0, 0, 0, 0.5, 0.5], [0, 1.0, 0, 0, 0]])
    assert row["calibration_source"] == "probs"
    assert row["brier"] == pytest.approx(skm.brier_score_loss([2, 4, 0], p, labels=range(5), scale_by_half=False))


def test_half_point_scale_inferred_from_family() -> None:
    rows = [_row(f"s{i}", "lematerial.synthesis.overall", "m", v, family="synthesis")
            for i, v in enumerate([3.5, 4.0, 2.5, 5.0, 1.5, 3.0])]
    labels = pd.DataFrame({"item_id": [f"s{i}" for i in range(6)], "judge": "lematerial.synthesis.overall",
                           "score": [3.0, 4.0, 3.5, 4.5, 1.5, 2.5]})
    result = calibrate(pd.DataFrame(rows), labels, n_boot=0)
    assert result.scales["lematerial.synthesis.overall"] == (1.0, 5.0, 0.5)
    assert result.per_rubric.iloc[0]["within1"] == pytest.approx(5 / 6)  # differences .5 0 1 .5 0 .5: 5 within ±0.5
    assert "bootstrap disabled" in " ".join(result.notes)


def test_undefined_statistics_are_explained() -> None:
    rows = [_row(f"q{i}", RUBRICS[0], "m", 5.0) for i in range(6)]  # the optimism extreme: always 5
    labels = pd.DataFrame({"item_id": [f"q{i}" for i in range(6)], "judge": RUBRICS[0], "score": [1.0, 2, 3, 4, 5, 3]})
    row = calibrate(pd.DataFrame(rows), labels, n_boot=20).per_rubric.iloc[0]
    assert np.isnan(row["spearman"]) and "judge ratings constant" in row["notes"]
    assert row["top_share_judge"] == 1.0
    assert json.dumps(report_dict(calibrate(pd.DataFrame(rows), labels, n_boot=20)), allow_nan=False)


@pytest.mark.slow
def test_several_runs_of_one_model_are_separate_contenders() -> None:
    judgments, labels, _ = _simulated(30)
    two = pd.concat([judgments.assign(source="run1"), judgments.assign(source="run2")])
    result = calibrate(two, labels, n_boot=0)
    assert {"precise @run1", "precise @run2", "noisy @run1", "noisy @run2"} == set(result.leaderboard["contender"])


# --- bad input ------------------------------------------------------------------------------------------


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _small() -> pd.DataFrame:
    return pd.DataFrame([_row(f"q{i}", RUBRICS[0], "m", float(1 + i % 5)) for i in range(10)])


def test_labels_for_unknown_items_name_the_line(tmp_path: Path) -> None:
    rows = [{"item_id": f"q{i}", "judge": RUBRICS[0], "score": 3} for i in range(10)]
    rows.insert(4, {"item_id": "typo-7", "judge": RUBRICS[0], "score": 3})
    labels = labels_to_frame(load_labels(_write(tmp_path / "l.jsonl", rows)))
    with pytest.raises(InputError) as err:
        calibrate(_small(), labels)
    assert "l.jsonl:5" in str(err.value) and "item_id" in str(err.value) and "typo-7" in str(err.value)
    assert calibrate(_small(), labels, allow_extra_labels=True, n_boot=0).per_rubric.iloc[0]["n"] == 10


def test_duplicate_labels_from_one_annotator(tmp_path: Path) -> None:
    frame = pd.DataFrame([{"item_id": "q1", "judge": RUBRICS[0], "score": 3, "annotator": "ann"},
                          {"item_id": "q1", "judge": RUBRICS[0], "score": 4, "annotator": "ann"}])
    with pytest.raises(InputError, match="duplicate label: annotator 'ann'"):
        calibrate(_small(), frame)


def test_scores_outside_the_scale(tmp_path: Path) -> None:
    rows = [{"item_id": f"q{i}", "judge": RUBRICS[0], "score": 3} for i in range(10)]
    rows[6]["score"] = 7
    rows[8]["score"] = 9
    labels = labels_to_frame(load_labels(_write(tmp_path / "l.jsonl", rows)))
    with pytest.raises(InputError) as err:
        calibrate(_small(), labels)
    assert "l.jsonl:7" in str(err.value) and "field 'score'" in str(err.value) and "1..5" in str(err.value)
    assert "score 7 " in str(err.value)  # the first bad label, not a later one
    bad_judgment = _small()
    bad_judgment.loc[2, "score"] = 0.0
    bad_judgment.loc[5, "score"] = 6.0
    rows[6]["score"] = rows[8]["score"] = 3
    with pytest.raises(InputError, match="judgment of item 'q2' .* has score 0, outside the scale"):
        calibrate(bad_judgment, labels_to_frame(load_labels(_write(tmp_path / "l2.jsonl", rows))))
    bad_judgment.loc[5, "score"] = 1.0
    # an explicit scale that fits is accepted
    assert calibrate(bad_judgment, labels_to_frame(load_labels(tmp_path / "l2.jsonl")), scale=(0, 5, 1), n_boot=0)


def test_no_overlap_between_runs_and_labels() -> None:
    labels = pd.DataFrame({"item_id": [f"q{i}" for i in range(10)], "judge": "yescieval.qa.cohesion", "score": 3.0})
    with pytest.raises(InputError, match="no judgment matches a label"):
        calibrate(_small(), labels)


def test_missing_columns_and_duplicate_judgments() -> None:
    with pytest.raises(InputError, match="field 'item_id'"):  # status, part, family... have defaults (frames.py)
        calibrate(_small().drop(columns="item_id"), pd.DataFrame({"item_id": ["q1"], "judge": [RUBRICS[0]], "score": [3.0]}))
    labels = pd.DataFrame({"item_id": [f"q{i}" for i in range(10)], "judge": RUBRICS[0], "score": 3.0})
    with pytest.raises(InputError, match="more than once"):
        calibrate(pd.concat([_small(), _small()]), labels)


def test_pairwise_orders_use_a_part_less_label() -> None:
    judge = "yescieval.qa.correctness.pairwise"
    truth = ["A", "B", "tie", "A", "B", "A"]
    said_ab = ["A", "B", "A", "A", "A", "A"]
    said_ba = ["A", "B", "tie", "B", "B", "A"]
    rows = [_row(f"p{i}", judge, "m", None, family="pairwise", part=order, verdict=v)
            for i in range(6) for order, v in (("AB", said_ab[i]), ("BA", said_ba[i]))]
    labels = pd.DataFrame({"item_id": [f"p{i}" for i in range(6)], "judge": judge, "verdict": truth})
    row = calibrate(pd.DataFrame(rows), labels, n_boot=0).verdict_per_rubric.iloc[0]
    assert row["n"] == 12 and row["n_units"] == 6 and row["coverage"] == 1.0
    h = [t.lower() for t in truth for _ in range(2)]
    j = [v.lower() for pair in zip(said_ab, said_ba) for v in pair]
    assert row["accuracy"] == pytest.approx(skm.accuracy_score(h, j))
    assert row["kappa"] == pytest.approx(skm.cohen_kappa_score(h, j))


def test_pairwise_position_consistency_by_hand() -> None:
    from scipy.stats import binomtest

    judge = "yescieval.qa.correctness.pairwise"
    truth = ["A", "B", "tie", "A", "B", "A"]
    said_ab = ["A", "B", "A", "A", "A", "A"]  # item terms; in AB the first slot is A
    said_ba = ["A", "B", "tie", "B", "B", "A"]  # item terms; in BA the first slot is B
    rows = [_row(f"p{i}", judge, "m", None, family="pairwise", part=order, verdict=v)
            for i in range(6) for order, v in (("AB", said_ab[i]), ("BA", said_ba[i]))]
    labels = pd.DataFrame({"item_id": [f"p{i}" for i in range(6)], "judge": judge, "verdict": truth})
    (row,) = calibrate(pd.DataFrame(rows), labels, n_boot=0).position.to_dict("records")
    # flips: items 2 (A vs tie), 3 (A vs B), 4 (A vs B) -> 3 of 6
    assert row["n_both_orders"] == 6 and row["flip_rate"] == pytest.approx(3 / 6)
    # decisive judgments: AB 6 (all A/B) + BA 5 (one tie) = 11; first slot: AB says A 5 times, BA says B 3 times
    assert (row["n_decisive"], row["first_slot_share"]) == (11, pytest.approx(8 / 11))
    assert row["first_slot_p"] == pytest.approx(binomtest(8, 11, 0.5).pvalue)
    # resolved by both orders: A, B, tie, tie, tie, A vs truth A, B, tie, A, B, A -> 4 of 6
    assert row["agreement_resolved"] == pytest.approx(4 / 6)
    assert row["agreement_ab"] == pytest.approx(4 / 6) and row["agreement_ba"] == pytest.approx(5 / 6)


@pytest.mark.slow
def test_continuous_moment_statistics_match_scipy_and_pingouin() -> None:
    """The moment formulas behind continuous-scale intervals give the library values on the full sample."""
    pingouin = pytest.importorskip("pingouin")
    from scipy import stats

    from scijudge.metrics.calibration.continuous import (
        N_MOMENTS,
        moment_cells,
        moment_stats,
    )

    rng = np.random.default_rng(11)
    h = rng.uniform(1, 5, 40)
    j = np.clip(h + rng.normal(0.3, 0.6, 40), 1, 5)
    cells, vals = moment_cells(j, h)
    sums = np.bincount(cells, weights=vals, minlength=N_MOMENTS)
    got = moment_stats(sums)
    long = pd.DataFrame({"t": np.r_[np.arange(40), np.arange(40)], "r": ["h"] * 40 + ["j"] * 40, "x": np.r_[h, j]})
    icc = pingouin.intraclass_corr(long, targets="t", raters="r", ratings="x").set_index("Type")["ICC"]
    assert got["icc_a1"] == pytest.approx(icc["ICC(A,1)"] if "ICC(A,1)" in icc else icc["ICC2"])
    assert got["icc_c1"] == pytest.approx(icc["ICC(C,1)"] if "ICC(C,1)" in icc else icc["ICC3"])
    assert got["pearson"] == pytest.approx(stats.pearsonr(j, h).statistic)
    assert got["mae"] == pytest.approx(np.mean(np.abs(j - h))) and got["bias"] == pytest.approx(np.mean(j - h))
    assert got["sd_ratio"] == pytest.approx(np.std(j, ddof=1) / np.std(h, ddof=1))


def test_continuous_scale_keeps_raw_values_and_rounds_only_for_the_grid() -> None:
    rows = [_row(f"q{i}", "m.overall", "m", v) for i, v in enumerate([4.21, 3.64, 2.5, 1.93, 4.79, 3.07])]
    labels = pd.DataFrame({"item_id": [f"q{i}" for i in range(6)], "judge": "m.overall",
                           "score": [4.0, 3.86, 2.71, 2.25, 4.5, 3.0]})
    with pytest.raises(InputError, match="outside the scale 1..5 step 0.5"):
        calibrate(pd.DataFrame(rows), labels, scale=(1, 5, 0.5), n_boot=0)
    result = calibrate(pd.DataFrame(rows), labels, scale={"m.overall": (1, 5, 0.5, "continuous")}, n_boot=100)
    row = result.per_rubric.iloc[0]
    j = np.array([4.21, 3.64, 2.5, 1.93, 4.79, 3.07])
    h = np.array([4.0, 3.86, 2.71, 2.25, 4.5, 3.0])
    assert row["mae"] == pytest.approx(np.mean(np.abs(j - h)))
    grid = lambda x: np.round(x * 2) / 2  # noqa: E731 - half steps, half-way cases to even
    assert row["exact"] == pytest.approx(np.mean(grid(j) == grid(h)))
    assert result.continuous == ["m.overall"] and "continuous" in row["scale"]
    assert row["mae_lo"] <= row["mae"] <= row["mae_hi"]


def test_scale_comes_from_the_spec_matching_the_stored_hash_not_the_name() -> None:
    from scijudge.spec.judge_spec import ScaleTable, get_spec

    shipped = get_spec(RUBRICS[0])
    mine = shipped.model_copy(update={"scale": ScaleTable(min=0, max=10, step=1)})  # a user's edit: same name
    assert mine.spec_hash() != shipped.spec_hash()
    rows = [dict(_row(f"q{i}", RUBRICS[0], "m", float(v)), spec_hash=mine.spec_hash())
            for i, v in enumerate([8, 2, 10, 5, 0, 7])]
    labels = pd.DataFrame({"item_id": [f"q{i}" for i in range(6)], "judge": RUBRICS[0],
                           "score": [7.0, 3.0, 9.0, 5.0, 1.0, 7.0]})
    result = calibrate(pd.DataFrame(rows), labels, n_boot=0, specs=[mine])
    assert result.scales[RUBRICS[0]] == (0.0, 10.0, 1.0)
    assert result.per_rubric.iloc[0]["mae"] == pytest.approx(np.mean(np.abs(np.array([8, 2, 10, 5, 0, 7]) -
                                                                        np.array([7, 3, 9, 5, 1, 7]))))
    # without the spec, the shipped spec of that name is NOT used (its hash differs): family default, clear error
    with pytest.raises(InputError, match="outside the scale 1..5 step 1"):
        calibrate(pd.DataFrame(rows), labels, n_boot=0)
    # rows recorded with the shipped spec's hash take the shipped scale without being told
    shipped_rows = [dict(r, spec_hash=shipped.spec_hash(), score=s) for r, s in zip(rows, [4.0, 1.0, 5.0, 3.0, 1.0, 4.0])]
    shipped_labels = labels.assign(score=[4.0, 2.0, 5.0, 3.0, 1.0, 4.0])
    assert calibrate(pd.DataFrame(shipped_rows), shipped_labels, n_boot=0).scales[RUBRICS[0]] == (1.0, 5.0, 1.0)
