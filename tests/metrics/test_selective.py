"""Selective judging and cascades (issue 37): fixed-sequence thresholds against an independent implementation and
a hand-checked case, the guarantee in a simulation with known truth, and ``scijudge.cascade`` over frames."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from scijudge.errors import InputError
from scijudge.metrics.selective import cascade, cost_per_item
from scijudge.metrics.selective.fst import cascade_core, fixed_sequence
from scijudge.run.cascade import Threshold, confidence_of, tie_key


def independent_fst(conf: list[float], tie: list[float], agree: list[bool], target: float, delta: float,
                    start: float = 0.1) -> tuple[tuple[float, float] | None, int]:
    """Fixed-sequence testing written plainly: sort by (confidence, tie) descending; for n = n_start, n_start+1, ...
    the exact p-value sum_{j >= x} C(n, j) t^j (1-t)^(n-j); stop at the first p > delta; the threshold is the
    last rejected candidate, with tie 0 when it closes its confidence group."""
    rows = sorted(zip(conf, tie, agree), key=lambda r: (r[0], r[1]), reverse=True)
    n0 = 1
    while target ** n0 > delta:
        n0 += 1
    n_start = max(n0, math.ceil(start * len(rows)))
    chosen, kept = None, 0
    for n in range(n_start, len(rows) + 1):
        x = sum(1 for r in rows[:n] if r[2])
        p = sum(math.comb(n, j) * target ** j * (1 - target) ** (n - j) for j in range(x, n + 1))
        if p > delta:
            break
        closes = n == len(rows) or rows[n][0] < rows[n - 1][0]
        chosen, kept = (rows[n - 1][0], 0.0 if closes else rows[n - 1][1]), n
    return chosen, kept


def test_hand_checked_case() -> None:
    # target 0.5, delta 0.25: n0 = 2 (0.5**2 = 0.25 <= 0.25; 0.5**1 > 0.25); 10% of 5 is 1, so the first candidate
    # keeps 2. Confidences 0.9 > 0.8 > 0.7 > 0.6 > 0.5 with agreement 1, 1, 1, 0, 0:
    #   n=2, x=2: p = P(Bin(2, .5) >= 2) = 1/4   = 0.25   <= 0.25 reject
    #   n=3, x=3: p = P(Bin(3, .5) >= 3) = 1/8   = 0.125  reject
    #   n=4, x=3: p = P(Bin(4, .5) >= 3) = 5/16  = 0.3125 > 0.25 stop
    # -> threshold 0.7 (keeps 3, all agree, p = 0.125).
    fst = fixed_sequence(np.array([0.6, 0.9, 0.5, 0.8, 0.7]), np.zeros(5), np.array([0, 1, 0, 1, 1], bool),
                         target=0.5, delta=0.25)
    assert fst.threshold == (0.7, 0.0) and fst.n_kept == 3 and fst.n_agree == 3
    assert fst.p_value == pytest.approx(0.125)
    assert independent_fst([0.6, 0.9, 0.5, 0.8, 0.7], [0.0] * 5, [False, True, False, True, True], 0.5, 0.25) == (
        (0.7, 0.0), 3)
    # the most confident alone cannot be rejected at n0: nothing is trusted, with the reason
    none = fixed_sequence(np.array([0.9, 0.8, 0.7]), np.zeros(3), np.array([0, 1, 1], bool), target=0.5, delta=0.25)
    assert none.threshold is None and "no threshold" in none.reason


@pytest.mark.parametrize("seed", range(40))
def test_thresholds_equal_an_independent_fixed_sequence_test(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 120))
    conf = np.round(rng.uniform(0.3, 1.0, n), int(rng.integers(1, 4)))  # rounding makes ties
    tie = rng.random(n)
    agree = rng.random(n) < np.clip(conf + rng.normal(0, 0.1, n), 0, 1)
    target, delta = float(rng.choice([0.5, 0.6, 0.7, 0.8])), float(rng.choice([0.05, 0.1, 0.2]))
    fst = fixed_sequence(conf, tie, agree, target=target, delta=delta)
    want, kept = independent_fst(list(conf), list(tie), list(agree), target, delta)
    assert fst.threshold == want
    if want is not None:
        assert fst.n_kept == kept


def _population(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Known truth per unit: humans give the true level with probability q in (0.9, 1), another level uniformly
    otherwise; each judge gives the true level with probability a (lower on harder items). The cheap judge is
    over-confident (it reports 1 - 0.4 (1 - a), plus noise); the strong one is calibrated (it reports its
    agreement probability). Returns confidences (2 x n), each judgment's probability to agree with a human label
    (2 x n: q if it gave the true level, (1 - q) / 4 otherwise) and tie keys."""
    q = rng.uniform(0.9, 1.0, n)
    d = rng.uniform(0, 1, n)
    conf, p_agree = [], []
    for a, cheap in ((0.99 - 0.7 * d, True), (0.995 - 0.25 * d, False)):
        right = rng.random(n) < a
        p_agree.append(np.where(right, q, (1 - q) / 4))
        conf.append(np.clip(1 - 0.4 * (1 - a) + rng.normal(0, 0.02, n), 0, 1) if cheap else a * q + (1 - a) * (1 - q) / 4)
    return np.array(conf), np.array(p_agree), rng.random(n)


def _apply(core, conf: np.ndarray, tie: np.ndarray) -> np.ndarray:
    decided = np.full(conf.shape[1], -1)
    open_ = np.ones(conf.shape[1], bool)
    for k, fst in enumerate(core.tests):
        if fst.threshold is not None:
            value, cut = fst.threshold  # the documented rule: (confidence, tie) >= (value, cut)
            trusted = open_ & ((conf[k] > value) | ((conf[k] == value) & (tie >= cut)))
            decided[trusted] = k
            open_ &= ~trusted
    return decided


def _oracle(conf: np.ndarray, p: np.ndarray, tie: np.ndarray, target: float) -> np.ndarray:
    """Each member keeps the longest most-confident prefix of what reaches it whose TRUE agreement is >= target."""
    decided = np.full(conf.shape[1], -1)
    open_ = np.ones(conf.shape[1], bool)
    for k in range(conf.shape[0]):
        idx = np.where(open_)[0]
        ordered = idx[np.lexsort((-tie[idx], -conf[k, idx]))]
        running = np.cumsum(p[k, ordered]) / np.arange(1, ordered.size + 1)
        good = np.where(running >= target)[0]
        if good.size:
            decided[ordered[:good.max() + 1]] = k
            open_[ordered[:good.max() + 1]] = False
    return decided


def test_guarantee_coverage_and_cheap_share_in_a_simulation_with_known_truth() -> None:
    target, risk, reps = 0.8, 0.1, 200
    rng = np.random.default_rng(7)
    test_conf, test_p, test_tie = _population(rng, 20000)
    naive = test_conf[0] >= target  # trusting the over-confident judge's own numbers fails the target
    assert test_p[0][naive].mean() < target - 0.05
    violations, coverage, cheap = [], [], []
    for _ in range(reps):
        conf, p, tie = _population(rng, 1000)
        agree = (rng.random(p.shape) < p).astype(float)  # one human label per calibration unit
        core = cascade_core(conf, tie, agree, target=target, risk=risk)
        decided = _apply(core, test_conf, test_tie)
        kept = decided >= 0
        truth = np.where(decided == 0, test_p[0], test_p[1])[kept].mean() if kept.any() else 1.0
        violations.append(truth < target)
        coverage.append(kept.mean())
        cheap.append((decided == 0).mean())
    mc = 3 * math.sqrt(risk * (1 - risk) / reps)
    assert np.mean(violations) <= risk + mc  # measured: 0.045 (Bonferroni over two members)
    oracle = _oracle(test_conf, test_p, test_tie, target)
    assert np.mean(coverage) >= 0.7 * (oracle >= 0).mean()  # measured: 0.67 against the oracle's 0.88
    assert np.mean(cheap) >= 0.1  # the cheap member decides a real share (measured: 0.22; the oracle: 0.42)


def _frames(n: int, rng: np.random.Generator) -> tuple[pd.DataFrame, pd.DataFrame]:
    conf, p, _ = _population(rng, n)
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


def test_cascade_over_frames_is_the_core_rule_with_the_seeded_tie_keys() -> None:
    judgments, labels = _frames(400, np.random.default_rng(3))
    result = cascade(judgments, labels, members=["cheap", "strong"], target=0.8, risk=0.1, seed=5)
    assert list(result.decisions.columns[:7]) == ["item_id", "judge", "part", "member", "score", "confidence",
                                                  "trusted"]
    units = sorted(set(judgments["item_id"]))
    wide = judgments.pivot(index="item_id", columns="model", values="probs").loc[units]
    scores = judgments.pivot(index="item_id", columns="model", values="score").loc[units]
    conf = np.array([[max(p.values()) for p in wide[m]] for m in ("cheap", "strong")])
    agree = np.array([(scores[m] == 3).to_numpy(float) for m in ("cheap", "strong")])
    tie = np.array([tie_key(5, u, "j", "") for u in units])
    core = cascade_core(conf, tie, agree, target=0.8, risk=0.1)
    got = result.decisions.set_index("item_id").loc[units]
    want = np.array(["cheap", "strong", ""])[core.decided]  # -1 -> ""
    assert list(got["member"]) == list(want)
    assert (got["trusted"] == (core.decided >= 0)).all()
    th = result.thresholds.set_index("member")
    assert th.loc["cheap", "risk_share"] == th.loc["strong", "risk_share"] == pytest.approx(0.05)
    for k, m in enumerate(("cheap", "strong")):
        t = core.tests[k].threshold
        assert (math.isnan(th.loc[m, "threshold"]) and t is None) or th.loc[m, "threshold"] == t[0]
    trusted = got[got["trusted"]]
    assert trusted["agree"].mean() >= 0.8  # on the calibration items themselves
    costs = cost_per_item(result).iloc[0]
    assert costs["last_cost"] == pytest.approx(20.0)
    calls = np.where(core.decided == 0, 1, 2) if core.tests[0].threshold is not None else np.ones(len(units))
    assert costs["cascade_calls"] == pytest.approx(calls.mean())


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
