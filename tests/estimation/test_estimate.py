"""estimate(): run-store rows + human labels -> PPI++ / human-only / judge-only per (judge, model, group)."""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd
import pytest

from scijudge.errors import InputError
from scijudge.estimation import ESTIMATE_COLUMNS, estimate
from scijudge.estimation.ppi import classical_mean, ppi_mean

JUDGE = "yescieval.qa.correctness"
SCALE = (1.0, 7.0, 0.5)  # judge scores are human + bias + noise, rounded to half points
LEVELS = np.arange(1.0, 6.0)
PROBS = {"A": np.array([0.05, 0.15, 0.30, 0.30, 0.20]), "B": np.array([0.10, 0.25, 0.30, 0.25, 0.10])}
BIAS = {"A": 0.5, "B": 0.1}


def _row(item: str, score: float | None, *, model: str = "m", status: str = "ok", part: str = "") -> dict:
    return {"item_id": item, "judge": JUDGE, "part": part, "family": "likert", "spec_hash": "h", "model": model,
            "status": status, "score": score, "verdict": None, "confidence": None, "probs": None}


def _systems(rng: np.random.Generator, n: int = 2000, n_labeled: int = 150, paired: bool = False, reps: int = 1):
    """Two systems' answers judged by one judge; paired: both answer the same n questions, and the labelled
    subset is a random set of questions with both answers labelled.

    ``reps`` independent repetitions side by side, told apart as models ``rep0``, ``rep1``, ... (item ids
    ``<rep>:<system><i>``), so one ``estimate`` call computes them all; with ``reps=1`` the model is ``m``
    and item ids are ``<system><i>``.
    """
    frames, labels, groups, pairs = [], [], {}, {}
    for rep in range(reps):
        model, prefix = ("m", "") if reps == 1 else (f"rep{rep}", f"{rep}:")
        difficulty = rng.normal(0.0, 0.8, n) if paired else np.zeros(n)
        questions = rng.choice(n, n_labeled, replace=False)  # paired: humans label both answers to a question
        for system in ("A", "B"):
            y = rng.choice(LEVELS, n, p=PROBS[system])
            if paired:  # a hard question pulls both systems' human scores down
                y = np.clip(np.rint(y + difficulty), 1, 5)
            f = np.clip(np.round((y + BIAS[system] + rng.normal(0.0, 0.6, n)) * 2) / 2, *SCALE[:2])
            ids = [f"{prefix}{system}{i}" for i in range(n)]
            frames.append(pd.DataFrame({"item_id": ids, "judge": JUDGE, "part": "", "family": "likert",
                                        "spec_hash": "h", "model": model, "status": "ok", "score": f,
                                        "verdict": None, "confidence": None, "probs": None}))
            groups.update(dict.fromkeys(ids, system))
            pairs.update({item: f"{prefix}q{i}" for i, item in enumerate(ids)})
            labeled = questions if paired else rng.choice(n, n_labeled, replace=False)
            labels.append(pd.DataFrame({"item_id": [ids[i] for i in labeled], "judge": JUDGE, "score": y[labeled]}))
    return pd.concat(frames, ignore_index=True), pd.concat(labels, ignore_index=True), groups, pairs


def test_table_columns_and_agreement_with_the_formulas() -> None:
    rng = np.random.default_rng(0)
    judgments, labels, groups, _ = _systems(rng, n=300, n_labeled=40)
    table = estimate(judgments, labels, groups=groups, scale=SCALE)
    assert list(table.columns) == ESTIMATE_COLUMNS
    assert set(table["method"]) == {"ppi", "ppi-cal", "human-only", "judge-only"}
    assert set(table["group"]) == {"A", "B"}
    a = judgments[judgments["item_id"].str.startswith("A")].set_index("item_id")
    lab = labels.set_index("item_id")
    lab_a = lab[lab.index.str.startswith("A")]
    expected = ppi_mean(lab_a["score"].to_numpy(), a.loc[lab_a.index, "score"].to_numpy(),
                        a.drop(index=lab_a.index)["score"].to_numpy())
    row = table[(table["group"] == "A") & (table["method"] == "ppi")].iloc[0]
    # ppi_mean's point and se (ppi-python's); the table's interval: Student's t on 40 - 1 df
    from scipy.stats import t

    half = t.ppf(0.975, 39) * expected.se
    assert (row["estimate"], row["se"]) == pytest.approx((expected.estimate, expected.se), rel=1e-12)
    assert (row["lo"], row["hi"]) == pytest.approx((expected.estimate - half, expected.estimate + half), rel=1e-12)
    assert (row["n_labeled"], row["n_unlabeled"]) == (40, 260)
    judge_only = table[(table["group"] == "A") & (table["method"] == "judge-only")].iloc[0]
    assert judge_only["estimate"] == pytest.approx(a["score"].mean())
    assert (judge_only["n_labeled"], judge_only["n_unlabeled"]) == (0, 300)


def test_abstentions_and_labels_without_judgment_are_counted_not_imputed() -> None:
    rows = [_row(f"i{k}", float(2 + k % 3)) for k in range(10)]
    rows += [_row("i10", None, status="abstained"), _row("i11", None, status="abstained")]
    labels = pd.DataFrame([{"item_id": f"i{k}", "judge": JUDGE, "score": float(1 + k % 4)} for k in (0, 1, 2, 3, 10)]
                          + [{"item_id": "i99", "judge": JUDGE, "score": 3.0}])  # i99: labelled, never judged
    table = estimate(pd.DataFrame(rows), labels).set_index("method")
    assert table.loc["ppi", "n_labeled"] == 4 and table.loc["ppi", "n_unlabeled"] == 6
    assert table.loc["ppi", "n_abstained"] == 2 and table.loc["ppi", "n_label_only"] == 1
    human = classical_mean(np.array([1.0, 2.0, 3.0, 4.0]))  # i10's label has no score to pair with: left out
    assert table.loc["human-only", "estimate"] == pytest.approx(human.estimate)
    assert table.loc["judge-only", "n_unlabeled"] == 10
    assert table.loc["ppi", "group"] == ""  # no --by and a frame without a run name


def _coverage(paired: bool, seed: int) -> dict[str, float]:
    judgments, labels, groups, pairs = _systems(np.random.default_rng(seed), paired=paired, reps=40)
    table = estimate(judgments, labels, groups=groups, pairs=pairs if paired else None, compare=("A", "B"),
                     scale=SCALE)
    diff = table[table["kind"] == "difference"]
    assert len(diff) == 4 * 40 and set(diff["paired"]) == {paired}
    truth = _truth_difference(paired)
    hits = {m: int(((d["lo"] <= truth) & (truth <= d["hi"])).sum()) for m, d in diff.groupby("method")}
    widths = {f"width {m}": float((d["hi"] - d["lo"]).mean()) for m, d in diff.groupby("method")}
    if not paired:  # the mean of system A alone, from the same table (2,000 items, 150 labelled, judge +0.5)
        mean_a = table[(table["kind"] == "mean") & (table["group"] == "A")]
        truth_a = float(LEVELS @ PROBS["A"])
        hits.update({f"A {m}": int(((d["lo"] <= truth_a) & (truth_a <= d["hi"])).sum()) for m, d in mean_a.groupby("method")})
        widths.update({f"width A {m}": float((d["hi"] - d["lo"]).mean()) for m, d in mean_a.groupby("method")})
    return {**hits, **widths}


@functools.cache
def _truth_difference(paired: bool) -> float:
    """A's minus B's mean human score, by Monte Carlo on a huge sample for the paired design (it rounds and clips)."""
    if not paired:
        return float(LEVELS @ (PROBS["A"] - PROBS["B"]))
    rng = np.random.default_rng(123)
    difficulty = rng.normal(0.0, 0.8, 2_000_000)
    means = [np.clip(np.rint(rng.choice(LEVELS, difficulty.size, p=PROBS[s]) + difficulty), 1, 5).mean()
             for s in ("A", "B")]
    return float(means[0] - means[1])


@pytest.mark.slow
@pytest.mark.parametrize("paired", [False, True])
def test_difference_between_systems_covers_the_truth(paired: bool) -> None:
    result = _coverage(paired, seed=1 + paired)
    assert result["ppi"] >= 36 and result["ppi-cal"] >= 36, result
    assert result["width ppi"] < result["width human-only"], result
    assert result["judge-only"] <= 2, result  # biased: the judge favours A
    if not paired:
        assert result["A ppi"] >= 36 and result["A judge-only"] == 0, result
        assert result["width A ppi"] < result["width A human-only"], result


def test_compare_and_grouping_errors(tmp_path) -> None:
    judgments, labels, groups, _ = _systems(np.random.default_rng(4), n=20, n_labeled=5)
    with pytest.raises(InputError, match="no group named 'C'"):
        estimate(judgments, labels, groups=groups, compare=("A", "C"), scale=SCALE)
    with pytest.raises(InputError, match="not in the items file"):
        estimate(judgments, labels, groups={k: v for k, v in groups.items() if k != "A3"}, scale=SCALE)
    with pytest.raises(InputError, match="holds pair key 'q0' more than once"):
        estimate(judgments, labels, groups=groups, pairs={k: "q0" for k in groups}, compare=("A", "B"), scale=SCALE)
    bad = labels.copy()
    bad.loc[0, "score"] = 9.0
    with pytest.raises(InputError, match="outside the scale"):
        estimate(judgments, bad, groups=groups, scale=SCALE)


@pytest.mark.slow
def test_paired_difference_matches_ppi_python_on_pair_differences() -> None:
    ppi_py = pytest.importorskip("ppi_py")  # the dev extra installs it
    judgments, labels, groups, pairs = _systems(np.random.default_rng(9), n=400, n_labeled=120, paired=True)
    table = estimate(judgments, labels, groups=groups, pairs=pairs, compare=("A", "B"), scale=SCALE)
    row = table[(table["kind"] == "difference") & (table["method"] == "ppi")].iloc[0]
    score = judgments.set_index("item_id")["score"]
    human = labels.set_index("item_id")["score"]
    ids = np.arange(400)
    d_f = score[[f"A{i}" for i in ids]].to_numpy() - score[[f"B{i}" for i in ids]].to_numpy()
    both = np.array([f"A{i}" in human.index and f"B{i}" in human.index for i in ids])
    d_y = np.array([human[f"A{i}"] - human[f"B{i}"] for i in ids[both]])
    lo, hi = ppi_py.ppi_mean_ci(d_y, d_f[both], d_f[~both], alpha=0.05)
    assert bool(row["paired"]) and row["n_labeled"] == both.sum() and row["n_unlabeled"] == (~both).sum()
    # ppi-python's point and standard error; the table's interval is Student's t on n - 1 df around them
    from scipy.stats import norm, t

    point, half = (lo[0] + hi[0]) / 2, (hi[0] - lo[0]) / 2
    assert row["estimate"] == pytest.approx(point, rel=1e-10)
    ratio = t.ppf(0.975, both.sum() - 1) / norm.ppf(0.975)
    assert (row["lo"], row["hi"]) == pytest.approx((point - half * ratio, point + half * ratio), rel=1e-10)


def test_model_versions_and_endpoints_are_told_apart() -> None:
    rows = [_row(f"i{k}", 3.0) for k in range(6)]
    rows += [{**_row(f"i{k}", 4.0), "spec_hash": "optimized"} for k in range(6)]
    frame = pd.DataFrame(rows)
    labels = pd.DataFrame([{"item_id": f"i{k}", "judge": JUDGE, "score": 3.0} for k in range(3)])
    models = set(estimate(frame, labels)["model"])
    assert models == {"m #h", "m #optimize"}
    frame = pd.DataFrame([{**r, "spec_hash": "h", "endpoint": "http://a" if r["score"] == 3.0 else "http://b"}
                          for r in rows])
    assert set(estimate(frame, labels)["model"]) == {"m @http://a", "m @http://b"}


@pytest.mark.slow
def test_report_page_gets_an_estimates_section() -> None:
    from scijudge.metrics.calibration import calibrate
    from scijudge.report.calibration import render_html

    judgments, labels, groups, _ = _systems(np.random.default_rng(2), n=30, n_labeled=12)
    judgments = judgments.assign(score=judgments["score"].clip(1, 5).round())
    table = estimate(judgments, labels, groups=groups)
    page = render_html(calibrate(judgments, labels, n_boot=0), estimates=table)
    assert "Estimates of the mean human score" in page and "human-only" in page
    assert "Estimates of the mean human score" not in render_html(calibrate(judgments, labels, n_boot=0))
