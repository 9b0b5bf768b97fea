"""Selective judging and cascades (issue 37): fixed-sequence thresholds against an independent implementation and
a hand-checked case, the guarantee in a simulation with known truth, and ``scijudge.cascade`` over frames."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from scijudge.errors import InputError
from scijudge.metrics.selective import cascade, cost_per_item
from scijudge.metrics.selective.fst import cascade_core, fixed_sequence
from scijudge.run.cascade import Threshold, confidence_of
from scijudge.testing.cascade_sim import population, simulate


def _n0(target: float, delta: float) -> int:
    n0 = 1
    while target ** n0 > delta:
        n0 += 1
    return n0


def _walk_plainly(rows: list[tuple[float, int, int]], target: float, delta: float) -> int | None:
    """rows: (candidate, kept, agreeing) strictest first; start at the first keeping n0; the exact p-value from
    scipy's binomial; stop at the first p > delta. Returns the index of the last rejected candidate."""
    chosen = None
    started = False
    for i, (_, n, x) in enumerate(rows):
        if n < _n0(target, delta):
            continue
        started = True
        if stats.binom.sf(x - 1, n, target) > delta:
            break
        chosen = i
    assert started or chosen is None
    return chosen


def independent_fst(conf: list[float], agree: list[bool], target: float, delta: float
                    ) -> tuple[tuple[float, float] | None, int]:
    """Fixed-sequence testing written plainly: candidates are the distinct confidences, each keeping every
    judgment at or above it (whole tie groups)."""
    rows = [(c, sum(1 for d in conf if d >= c), sum(1 for d, a in zip(conf, agree) if d >= c and a))
            for c in sorted(set(conf), reverse=True)]
    i = _walk_plainly(rows, target, delta)
    return (None, 0) if i is None else ((rows[i][0], 0.0), rows[i][1])


def independent_whole(conf: np.ndarray, agree: np.ndarray, target: float, risk: float) -> list[float | None]:
    """The whole-cascade path written plainly: every member's threshold lowered together through the distinct
    confidences; a unit is kept by the first member at or above the threshold and counts that member's agreement.
    Returns each member's threshold (its least confidence at or above the chosen common value)."""
    k_members, n_units = conf.shape
    rows = []
    for s in sorted({float(c) for c in conf.ravel() if np.isfinite(c)}, reverse=True):
        n = x = 0
        for u in range(n_units):
            for k in range(k_members):
                if np.isfinite(conf[k, u]) and conf[k, u] >= s:
                    n, x = n + 1, x + int(agree[k, u] > 0.5)
                    break
        rows.append((s, n, x))
    i = _walk_plainly(rows, target, risk)
    if i is None:
        return [None] * k_members
    s = rows[i][0]
    return [min((float(c) for c in conf[k] if np.isfinite(c) and c >= s), default=None) for k in range(k_members)]


def test_hand_checked_case() -> None:
    # target 0.5, delta 0.25: n0 = 2 (0.5**2 = 0.25 <= 0.25; 0.5**1 > 0.25), so the first candidate keeps 2.
    # Confidences 0.9 > 0.8 > 0.7 > 0.6 > 0.5 with agreement 1, 1, 1, 0, 0:
    #   n=2, x=2: p = P(Bin(2, .5) >= 2) = 1/4   = 0.25   <= 0.25 reject
    #   n=3, x=3: p = P(Bin(3, .5) >= 3) = 1/8   = 0.125  reject
    #   n=4, x=3: p = P(Bin(4, .5) >= 3) = 5/16  = 0.3125 > 0.25 stop
    # -> threshold 0.7 (keeps 3, all agree, p = 0.125).
    fst = fixed_sequence(np.array([0.6, 0.9, 0.5, 0.8, 0.7]), np.array([0, 1, 0, 1, 1], bool), target=0.5, delta=0.25)
    assert fst.threshold == (0.7, 0.0) and fst.n_kept == 3 and fst.n_agree == 3
    assert fst.p_value == pytest.approx(0.125)
    assert independent_fst([0.6, 0.9, 0.5, 0.8, 0.7], [False, True, False, True, True], 0.5, 0.25) == ((0.7, 0.0), 3)
    # the most confident two cannot be rejected: nothing is trusted, with the reason
    none = fixed_sequence(np.array([0.9, 0.8, 0.7]), np.array([0, 1, 1], bool), target=0.5, delta=0.25)
    assert none.threshold is None and "no threshold" in none.reason


def test_ties_are_tested_as_whole_groups() -> None:
    # target 0.5, delta 0.25 (n0 = 2). Confidences 0.9, 0.8, 0.8, 0.8, 0.7 with agreement 1, 1, 0, 0, 1.
    # The candidates are 0.9 (keeps 1: untestable), 0.8 (keeps 4, 2 agree: p = P(Bin(4, .5) >= 2) = 11/16 > 0.25).
    # Cutting inside the 0.8 group (keeping 0.9 and the agreeing 0.8: 2 of 2, p = 1/4) is no longer possible.
    fst = fixed_sequence(np.array([0.9, 0.8, 0.8, 0.8, 0.7]), np.array([1, 1, 0, 0, 1], bool), target=0.5,
                         delta=0.25)
    assert fst.threshold is None and fst.n_kept == 4 and fst.p_value == pytest.approx(11 / 16)
    assert independent_fst([0.9, 0.8, 0.8, 0.8, 0.7], [True, True, False, False, True], 0.5, 0.25) == (None, 0)


def test_whole_cascade_hand_checked() -> None:
    # two members, four units; target 0.5, risk 0.3 (n0 = 2: 0.5**2 = 0.25 <= 0.3).
    #   cheap:  0.9 (agrees), 0.8 (no), 0.7 (agrees), 0.6 (no)
    #   strong: 0.95 (agrees), 0.5 (agrees), 0.85 (agrees), 0.7 (agrees)
    # Along the common threshold s: 0.95 keeps u0 (by strong): 1 kept, untestable; 0.9: u0 (now cheap): 1;
    # 0.85: u0, u2 (strong): 2 of 2, p = 1/4 <= 0.3 reject; 0.8: + u1 (cheap, disagrees): 2 of 3,
    # p = P(Bin(3, .5) >= 2) = 1/2 > 0.3 stop. -> s = 0.85: cheap trusts >= 0.9, strong >= 0.85.
    conf = np.array([[0.9, 0.8, 0.7, 0.6], [0.95, 0.5, 0.85, 0.7]])
    agree = np.array([[1, 0, 1, 0], [1, 1, 1, 1.0]])
    core = cascade_core(conf, agree, target=0.5, risk=0.3)
    assert [t.threshold for t in core.tests] == [(0.9, 0.0), (0.85, 0.0)]
    assert list(core.decided) == [0, -1, 1, -1]
    assert core.joint is not None and (core.joint.n_kept, core.joint.n_agree) == (2, 2)
    assert core.joint.p_value == pytest.approx(0.25)
    assert independent_whole(conf, agree, 0.5, 0.3) == [0.9, 0.85]
    # Bonferroni at 0.15 each (n0 = 3): cheap's top three give 2 of 3 (p = 1/2): none; strong then sees all four,
    # 3 of 3 (p = 1/8) and 4 of 4 (p = 1/16): it trusts everything from 0.5.
    bonf = cascade_core(conf, agree, target=0.5, risk=0.3, split="bonferroni")
    assert [t.threshold for t in bonf.tests] == [None, (0.5, 0.0)] and list(bonf.decided) == [1, 1, 1, 1]


@pytest.mark.parametrize("seed", range(40))
def test_thresholds_equal_an_independent_fixed_sequence_test(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 120))
    conf = np.round(rng.uniform(0.3, 1.0, n), int(rng.integers(1, 4)))  # rounding makes ties
    agree = rng.random(n) < np.clip(conf + rng.normal(0, 0.1, n), 0, 1)
    target, delta = float(rng.choice([0.5, 0.6, 0.7, 0.8])), float(rng.choice([0.05, 0.1, 0.2]))
    fst = fixed_sequence(conf, agree, target=target, delta=delta)
    want, kept = independent_fst(list(conf), list(agree), target, delta)
    assert fst.threshold == want
    if want is not None:
        assert fst.n_kept == kept


@pytest.mark.parametrize("seed", range(30))
def test_whole_cascade_equals_an_independent_path_test(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    k, n = int(rng.integers(1, 4)), int(rng.integers(5, 60))
    conf = np.round(rng.uniform(0.3, 1.0, (k, n)), int(rng.integers(1, 3)))
    conf[rng.random((k, n)) < 0.1] = np.nan  # some members gave no confidence
    agree = (rng.random((k, n)) < np.clip(np.nan_to_num(conf, nan=0.5) + 0.1, 0, 1)).astype(float)
    agree[:, rng.random(n) < 0.15] = np.nan  # unlabelled units
    target, risk = float(rng.choice([0.5, 0.6, 0.7])), float(rng.choice([0.1, 0.2]))
    core = cascade_core(conf, agree, target=target, risk=risk)
    labelled = np.isfinite(agree).any(axis=0)
    want = independent_whole(conf[:, labelled], agree[:, labelled], target, risk)
    assert [None if t.threshold is None else t.threshold[0] for t in core.tests] == want


@pytest.mark.slow
def test_guarantee_coverage_and_cheap_share_in_a_simulation_with_known_truth() -> None:
    got = simulate(200)  # scijudge.testing.cascade_sim: over-confident cheap member, calibrated strong member
    assert got["naive"] < 0.8 - 0.05  # trusting the over-confident judge's own numbers fails the target
    assert got["violation"] <= 0.1 + got["mc"]  # measured: 0.045
    assert got["coverage"] >= 0.8 * got["oracle"]  # measured: 0.72 against the oracle's 0.88
    assert got["cheap"] >= 0.1  # the cheap member decides a real share (measured: 0.26; the oracle: 0.42)


def _frames(n: int, rng: np.random.Generator) -> tuple[pd.DataFrame, pd.DataFrame]:
    conf, p = population(rng, n)
    rows, labels = [], []
    for i in range(n):
        truth = 3
        labels.append({"item_id": f"i{i}", "judge": "j", "annotator": "a", "score": truth})
        labels.append({"item_id": f"i{i}", "judge": "j", "annotator": "b", "score": truth})
        for k, model in enumerate(("cheap", "strong")):
            agree = rng.random() < p[k, i]
            score = truth if agree else 4
            rows.append({"item_id": f"i{i}", "judge": "j", "model": model, "status": "ok", "score": float(score),
                         "probs": {f"{score}": float(conf[k, i]), "1": 0.0}, "cost": 1.0 if k == 0 else 20.0})
    return pd.DataFrame(rows), pd.DataFrame(labels)


@pytest.mark.parametrize(("split", "calibrated"), [("whole", False), ("whole", True), ("bonferroni", False)])
def test_cascade_over_frames_is_the_core_rule(split: str, calibrated: bool) -> None:
    from scijudge.metrics.selective.scale import calibrated_scale, fit_units

    judgments, labels = _frames(400, np.random.default_rng(3))
    result = cascade(judgments, labels, members=["cheap", "strong"], target=0.8, risk=0.1, split=split,
                     calibrated=calibrated)
    assert list(result.decisions.columns[:7]) == ["item_id", "judge", "part", "member", "score", "confidence",
                                                  "trusted"]
    units = sorted(set(judgments["item_id"]))
    wide = judgments.pivot(index="item_id", columns="model", values="probs").loc[units]
    scores = judgments.pivot(index="item_id", columns="model", values="score").loc[units]
    conf = np.array([[round(max(p.values()), 12) for p in wide[m]] for m in ("cheap", "strong")])  # 12 decimals
    agree = np.array([(scores[m] == 3).to_numpy(float) for m in ("cheap", "strong")])
    scale, test = None, None
    if calibrated:
        fit = fit_units([(u, "j", "") for u in units], 0.5)
        scale, test = calibrated_scale(conf, agree, fit), ~fit
    core = cascade_core(conf, agree, target=0.8, risk=0.1, split=split, scale=scale, test=test)
    got = result.decisions.set_index("item_id").loc[units]
    want = np.array(["cheap", "strong", ""])[core.decided]  # -1 -> ""
    assert list(got["member"]) == list(want)
    assert (got["trusted"] == (core.decided >= 0)).all()
    assert got["trusted"].any() or not calibrated  # raw whole path: the over-confident cheap member stops it early
    th = result.thresholds.set_index("member")
    share = 0.05 if split == "bonferroni" else 0.1
    assert th.loc["cheap", "risk_share"] == th.loc["strong", "risk_share"] == pytest.approx(share)
    for k, m in enumerate(("cheap", "strong")):
        t = core.tests[k].threshold
        assert (math.isnan(th.loc[m, "threshold"]) and t is None) or th.loc[m, "threshold"] == t[0]
        # the thresholds are on the members' own confidences: judge time trusts exactly the units decided here
        if t is not None:
            mine = got["member"] == m
            assert all(Threshold(t[0]).trusts(c, 0.0) for c in conf[k][mine.to_numpy()])
    assert (len(result.joint) == 1) == (split == "whole")
    trusted = got[got["trusted"]]
    assert trusted.empty or trusted["agree"].mean() >= 0.8  # on the calibration items themselves
    costs = cost_per_item(result).iloc[0]
    assert costs["last_cost"] == pytest.approx(20.0)


def test_result_is_the_same_for_every_seed_with_ties() -> None:
    # pairwise verdicts with vote-share confidences: many equal confidences; the seed used to cut ties by a hash
    rows, labels = [], []
    rng = np.random.default_rng(5)
    for i in range(300):
        truth = "A" if i % 2 else "B"
        labels.append({"item_id": f"p{i}", "judge": "pair", "annotator": "h", "verdict": truth})
        for model, share in (("cheap", float(rng.choice([2 / 3, 1.0]))), ("strong", float(rng.choice([0.6, 0.8, 1.0])))):
            right = rng.random() < (0.95 if share == 1.0 else 0.7)
            verdict = truth if right else ("B" if truth == "A" else "A")
            rows.append({"item_id": f"p{i}", "judge": "pair", "model": model, "status": "ok", "score": None,
                         "verdict": verdict, "probs": {verdict: share, "tie": 0.0}})
    frame, lab = pd.DataFrame(rows), pd.DataFrame(labels)
    results = [cascade(frame, lab, members=["cheap", "strong"], target=0.8, risk=0.1, seed=seed)
               for seed in (0, 1, 7, 12345)]
    first = results[0].decisions
    assert first["trusted"].sum() > 0
    for other in results[1:]:
        pd.testing.assert_frame_equal(other.decisions, first)
        pd.testing.assert_frame_equal(other.thresholds, results[0].thresholds)


def test_unlabelled_units_and_rater_ties_are_not_disagreements() -> None:
    # 40 labelled units where the verdict judge agrees, 40 unlabelled, 20 whose two raters disagree (no majority):
    # only the 40 labelled ones are calibration units (they used to count the 60 others as disagreements)
    rows = [{"item_id": f"i{i}", "judge": "v", "model": "m", "status": "ok", "score": None, "verdict": "yes",
             "probs": {"yes": 0.9, "no": 0.1}} for i in range(100)]
    labels = [{"item_id": f"i{i}", "judge": "v", "annotator": "a", "verdict": "yes"} for i in range(40)]
    labels += [{"item_id": f"i{i}", "judge": "v", "annotator": a, "verdict": v}
               for i in range(80, 100) for a, v in (("a", "yes"), ("b", "no"))]
    result = cascade(pd.DataFrame(rows), pd.DataFrame(labels), members=["m"], target=0.8, risk=0.1,
                     calibrated=False)
    row = result.thresholds.iloc[0]
    assert row["n_calibration"] == 40 and row["n_agree"] == 40
    assert result.decisions["trusted"].all()
    assert int(result.decisions["labelled"].sum()) == 40


def test_a_stored_confidence_column_is_used() -> None:
    rows = [{"item_id": f"i{i}", "judge": "j", "model": "m", "status": "ok", "score": 3.0,
             "confidence": 0.9 if i < 40 else 0.2} for i in range(60)]
    labels = [{"item_id": f"i{i}", "judge": "j", "annotator": "a", "score": 3 if i < 40 else 1} for i in range(60)]
    result = cascade(pd.DataFrame(rows), pd.DataFrame(labels), members=["m"], target=0.8, risk=0.1,
                     calibrated=False)
    assert result.thresholds.iloc[0]["threshold"] == pytest.approx(0.9)
    assert int(result.decisions["trusted"].sum()) == 40
    assert result.members[0]["confidence"] == "stored"
    with pytest.raises(InputError, match="no rating probabilities"):
        cascade(pd.DataFrame(rows), pd.DataFrame(labels), members=["m"], target=0.8, confidence="probs")


def test_confidence_is_the_probability_of_the_level_given() -> None:
    assert confidence_of(4.0, None, {"3": 0.2, "4": 0.7, "5": 0.1}) == 0.7
    assert confidence_of(3.8, None, {"3": 0.2, "4": 0.7, "5": 0.1}) == 0.7  # expected score: its nearest level
    assert confidence_of(None, "yes", {"yes": 0.9, "no": 0.1}) == 0.9
    assert confidence_of(4.0, None, None) is None
    assert Threshold(0.7, 0.5).trusts(0.7, 0.6) and not Threshold(0.7, 0.5).trusts(0.7, 0.4)
    assert Threshold(0.7, 0.5).trusts(0.71, 0.0) and not Threshold(0.7, 0.0).trusts(None, 1.0)


def test_refusals_are_one_line() -> None:
    judgments, labels = _frames(20, np.random.default_rng(0))
    no_probs = judgments.assign(probs=[None if m == "strong" else p for m, p in zip(judgments["model"],
                                                                                     judgments["probs"])])
    with pytest.raises(InputError, match="member 'strong' has no rating probabilities"):
        cascade(no_probs, labels, members=["cheap", "strong"], target=0.8)
    with pytest.raises(InputError, match="target must be between 0 and 1"):
        cascade(judgments, labels, members=["cheap"], target=1.5)
    with pytest.raises(InputError, match="has no judgment"):
        cascade(judgments, labels, members=["nobody"], target=0.8)


def test_several_raters_are_averaged_and_tolerance_widens_agreement() -> None:
    judgments = pd.DataFrame([{"item_id": f"i{i}", "judge": "j", "model": "m", "status": "ok", "score": 3.0,
                               "probs": {"3": 0.9}} for i in range(30)])
    labels = pd.DataFrame([{"item_id": f"i{i}", "judge": "j", "annotator": a, "score": s}
                           for i in range(30) for a, s in (("a", 3), ("b", 4))])  # mean 3.5
    exact = cascade(judgments, labels, members=["m"], target=0.8, risk=0.1)
    assert not exact.decisions["trusted"].any()  # |3 - 3.5| > 0
    loose = cascade(judgments, labels, members=["m"], target=0.8, risk=0.1, tolerance=0.5)
    assert loose.decisions["trusted"].all()  # 30 of 30 agree: p = 0.8**30 = 0.0012 <= 0.1


def test_a_majority_jury_carries_its_vote_shares_as_probs() -> None:
    from scijudge.metrics.jury import jury

    rows = [{"item_id": "i1", "judge": "j", "model": m, "status": "ok", "score": s}
            for m, s in (("a", 4.0), ("b", 4.0), ("c", 2.0))]
    rows.append({"item_id": "i2", "judge": "j", "model": "a", "status": "ok", "score": 3.0})
    rows += [{"item_id": "i2", "judge": "j", "model": m, "status": "ok", "score": 3.0} for m in ("b",)]
    rows.append({"item_id": "i2", "judge": "j", "model": "c", "status": "abstained", "score": None})
    result = jury(pd.DataFrame(rows), ["a", "b", "c"], name="p", method="majority", scale="1,5,1").rows
    by_item = result.set_index("item_id")
    assert by_item.loc["i1", "probs"] == pytest.approx({"4": 2 / 3, "2": 1 / 3})
    assert by_item.loc["i2", "probs"] == pytest.approx({"3": 2 / 3})  # the abstaining member counts against
    assert confidence_of(by_item.loc["i1", "score"], None, by_item.loc["i1", "probs"]) == pytest.approx(2 / 3)


def test_cascade_is_a_lazy_user_verb() -> None:
    import scijudge

    assert "cascade" in scijudge.__all__ and scijudge.cascade is cascade
