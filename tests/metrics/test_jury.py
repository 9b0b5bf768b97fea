"""Juries over run stores: expected numbers from plain pandas groupbys, a hand-worked and an independent
Dawid–Skene, scipy's paired t-test and statsmodels' Holm; weighted juries never see their evaluation items."""

from __future__ import annotations

import math
from fractions import Fraction as F

import numpy as np
import pandas as pd
import pytest

from scijudge.errors import InputError
from scijudge.metrics.jury import dawid_skene, jury, jury_vs_best_member
from scijudge.metrics.jury.members import Member
from scijudge.records import JudgeResult
from scijudge.run.store import Run

UNIT = ["item_id", "judge", "part"]
MEMBERS = ["gpt-4o", "llama-3-70b", "qwen-72b", "mistral-large"]
JUDGES = ("yescieval.qa.cohesion", "yescieval.qa.correctness")


def random_judgments(n_items: int = 80, seed: int = 0, p_abstain: float = 0.15, p_missing: float = 0.08):
    """Members rate items 1..5 around a latent quality; some abstain, some rows are missing; 3 annotators."""
    rng = np.random.default_rng(seed)
    rows, labels = [], []
    bias = dict(zip(MEMBERS, rng.normal(0, 0.4, len(MEMBERS))))
    noise = dict(zip(MEMBERS, rng.uniform(0.4, 1.2, len(MEMBERS))))
    for i in range(n_items):
        item = f"item{i:04d}"
        for judge in JUDGES:
            q = rng.uniform(1, 5)
            for a in range(3):
                labels.append({"item_id": item, "judge": judge, "part": "", "annotator": f"h{a}",
                               "score": float(np.clip(np.rint(q + rng.normal(0, 0.5)), 1, 5))})
            for m in MEMBERS:
                if rng.random() < p_missing:
                    continue
                abstained = rng.random() < p_abstain
                score = float(np.clip(np.rint(q + bias[m] + rng.normal(0, noise[m])), 1, 5))
                rows.append({"item_id": item, "judge": judge, "family": "likert", "spec_hash": "spec123", "model": m,
                             "status": "abstained" if abstained else "ok", "score": None if abstained else score,
                             "reason": "parse_error" if abstained else None, "input_hash": f"in-{item}",
                             "cost": 0.001 * (1 + MEMBERS.index(m)), "tokens_in": 100, "tokens_out": 10})
    return pd.DataFrame(rows), pd.DataFrame(labels)


def write_store(path, frame: pd.DataFrame) -> None:
    with Run(path) as run:
        for r in frame.to_dict("records"):
            run.record(JudgeResult(**{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}))


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """One run store per member, written through Run.record, as `scijudge judge` would leave them."""
    base = tmp_path_factory.mktemp("jury")
    df, labels = random_judgments()
    paths = []
    for model, group in df.groupby("model"):
        write_store(base / f"{model}.sqlite", group)
        paths.append(base / f"{model}.sqlite")
    return paths, df, labels, base


def expected(df: pd.DataFrame, method: str, n_members: int) -> pd.Series:
    """The independent computation: plain pandas groupbys over the answered rows."""
    units = df[UNIT[:2]].drop_duplicates().assign(part="").set_index(UNIT).index
    ok = df[df["status"] == "ok"].assign(part="")
    g = ok.groupby(UNIT)["score"]
    n_ok = g.size().reindex(units, fill_value=0)
    quorum = n_members // 2 + 1
    if method == "mean":
        return g.mean().reindex(units).where(n_ok >= quorum)
    if method == "median":
        return g.median().reindex(units).where(n_ok >= quorum)
    votes = ok.groupby([*UNIT, "score"]).size().rename("n").reset_index()
    top = votes.sort_values("n", ascending=False).drop_duplicates(UNIT).set_index(UNIT)
    return top["score"].where(top["n"] * 2 > n_members).reindex(units)  # abstainers stay in the denominator


@pytest.mark.parametrize("method", ["mean", "median", "majority"])
def test_jury_scores_equal_a_pandas_computation_on_stored_judgments(stores, method, tmp_path):
    paths, df, _, _ = stores
    out = tmp_path / "jury.sqlite"
    result = jury(paths, MEMBERS, method=method, name="panel", out=out, scale="1,5,1")
    with Run(out, create=False) as run:
        got = run.to_pandas().assign(part=lambda f: f["part"].fillna("")).set_index(UNIT)
        meta = run.meta()
    want = expected(df, method, len(MEMBERS))
    got = got.reindex(want.index)
    assert ((got["status"] == "ok") == want.notna()).all()
    both = want.notna()
    assert np.allclose(got.loc[both, "score"].astype(float), want[both])
    assert (got["model"] == "jury:panel").all() and len(result.results) == len(want)
    assert meta["juries"]["panel"]["method"] == method
    assert meta["scales"]["yescieval.qa.cohesion"] == ("1,5,1,continuous" if method != "majority" else "1,5,1")


def test_each_row_keeps_its_members_scores_and_abstentions_and_says_why_it_abstained(stores):
    paths, df, _, _ = stores
    rows = jury(paths, MEMBERS, method="mean", name="panel", scale="1,5,1").rows
    for row in rows.to_dict("records")[:40]:
        mine = df[(df["item_id"] == row["item_id"]) & (df["judge"] == row["judge"])].set_index("model")
        for entry in row["result"]["members"]:
            m = entry["member"]
            if m not in mine.index:
                assert entry["status"] == "missing"
            elif mine.loc[m, "status"] == "abstained":
                assert entry["status"] == "abstained" and entry["reason"] == "parse_error"
            else:
                assert entry["status"] == "ok" and entry["score"] == mine.loc[m, "score"]
        assert math.isclose(row["cost"], mine["cost"].sum())
    abstained = rows[rows["status"] == "abstained"]
    assert len(abstained) and abstained["reason"].str.startswith("quorum not met: ").all()
    assert abstained["score"].isna().all()
    maj = jury(paths, MEMBERS, method="majority", name="m", scale="1,5,1").rows
    no_major = maj[maj["status"] == "abstained"]["reason"]
    assert no_major.str.startswith("no strict majority of 4 members: votes ").all()


@pytest.mark.slow
def test_quorum_option_and_identity_a_rejudged_member_gives_a_new_key(stores, tmp_path):
    paths, df, _, _ = stores
    one = jury(paths, MEMBERS, method="mean", name="p", scale="1,5,1", quorum=1).rows
    units_with_an_answer = df[df["status"] == "ok"][["item_id", "judge"]].drop_duplicates()
    assert (one["status"] == "ok").sum() == len(units_with_an_answer)
    # a member re-judged with another spec: the jury judgment of that unit gets a new key, the old becomes history
    changed = df[df["model"] == "gpt-4o"].assign(spec_hash="spec124", score=lambda f: f["score"])
    p2 = tmp_path / "gpt-4o.sqlite"
    write_store(p2, changed)
    out = tmp_path / "j.sqlite"
    jury(paths, MEMBERS, method="mean", name="p", scale="1,5,1", out=out)
    jury([p2, *paths[1:]] if paths[0].stem == "gpt-4o" else [p2, *[p for p in paths if p.stem != "gpt-4o"]],
         MEMBERS, method="mean", name="p", scale="1,5,1", out=out)
    with Run(out, create=False) as run:
        hist = run.to_pandas(history=True)
    assert (~hist["current"]).sum() > 0 and hist["current"].sum() == len(one)


@pytest.mark.slow
def test_mixed_scales_are_refused_in_one_line_unless_mapped(stores, tmp_path):
    paths, df, _, base = stores
    ten = df[df["model"] == "llama-3-70b"].assign(score=lambda f: f["score"] * 2)
    p10 = tmp_path / "llama10.sqlite"
    write_store(p10, ten)
    with Run(p10) as run:
        run.set_meta(scales={j: "1,10,1" for j in JUDGES})
    others = [p for p in paths if p.stem != "llama-3-70b"]
    with pytest.raises(InputError) as caught:
        jury([*others, p10], MEMBERS, method="mean", name="p")
    assert "members use different scales" in str(caught.value) and "\n" not in str(caught.value)
    mapped = jury([*others, p10], MEMBERS, method="mean", name="p", scale_map={"llama-3-70b": "1,5,1"}).rows
    plain = jury(paths, MEMBERS, method="mean", name="p").rows
    # 1..10 -> 1..5 linearly is 1 + (s - 1) * 4/9: the llama member's mapped score, computed here by hand
    entry = [e for e in mapped["result"].iloc[0]["members"] if e["member"] == "llama-3-70b"][0]
    orig = ten[(ten["item_id"] == mapped["item_id"].iloc[0]) & (ten["judge"] == mapped["judge"].iloc[0])]
    if entry["status"] == "ok":
        assert math.isclose(entry["score"], 1 + (orig["score"].iloc[0] - 1) * 4 / 9)
    assert len(mapped) == len(plain)
    with pytest.raises(InputError, match="outside the scale"):  # an undeclared 1..10 member among 1..5 ones
        jury([*others, p10], MEMBERS, method="mean", name="p", scale="1,5,1")


def test_member_syntax():
    assert Member.parse("claude-3-5-sonnet@20240620") == Member("claude-3-5-sonnet@20240620")
    assert Member.parse("openai/llama@http://h:8000/v1/#yescieval.qa") == Member("openai/llama", "http://h:8000/v1",
                                                                                "yescieval.qa")
    assert Member.parse("qwen#yescieval.qa.cohesion").covers_judge("yescieval.qa.cohesion")
    assert not Member.parse("qwen#yescieval.qa.cohesion").covers_judge("yescieval.qa.correctness")


def test_member_narrowed_to_a_judge_only_votes_on_that_judge(stores):
    paths, _, _, _ = stores
    res = jury(paths, ["gpt-4o", "llama-3-70b#yescieval.qa.cohesion", "qwen-72b"], method="mean", name="p",
               scale="1,5,1")
    rows = res.rows
    n_members = rows.groupby("judge")["result"].first().map(lambda r: r["jury"]["n_members"])
    assert n_members.to_dict() == {"yescieval.qa.cohesion": 3, "yescieval.qa.correctness": 2}


# ---- weighted ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fit", ["inverse_mse", "ridge"])
def test_weighted_jury_never_sees_its_evaluation_items(stores, fit, tmp_path):
    paths, _, labels, _ = stores
    dev = labels[labels["item_id"] < "item0060"]  # 60 labelled items, 20 unlabelled
    out = tmp_path / "w.sqlite"
    res = jury(paths, MEMBERS, method="weighted", name="w", labels=dev, fit=fit, folds=5, scale="1,5,1", quorum=1,
               out=out)
    folds = res.folds
    assert folds["labelled"].sum() == dev[["item_id", "judge"]].drop_duplicates().shape[0]
    assert not any(r.item_id in r.fit_items for r in folds.itertuples() if r.labelled)
    assert (folds.loc[~folds["labelled"], "fit_items"].map(len) == 60).all()
    # perturb one held-out item's labels: its own jury scores do not move, other units' do
    target = "item0007"
    dev2 = dev.assign(score=np.where(dev["item_id"] == target, np.where(dev["score"] < 3, 5.0, 1.0), dev["score"]))
    res2 = jury(paths, MEMBERS, method="weighted", name="w", labels=dev2, fit=fit, folds=5, scale="1,5,1", quorum=1)
    a = res.rows.set_index(UNIT)["score"].astype(float)
    b = res2.rows.set_index(UNIT)["score"].astype(float)
    assert np.allclose(a.xs(target, level="item_id"), b.xs(target, level="item_id"), equal_nan=True)
    assert (~np.isclose(a.fillna(-9), b.fillna(-9))).sum() > 0
    # what calibrate needs: per row held_out/fold, per store the out-of-fold items
    with Run(out, create=False) as run:
        meta = run.meta()["juries"]["w"]
        rows = run.to_pandas()
    held = meta["held_out"]["yescieval.qa.cohesion"]
    assert set(held["out_of_fold"]) == set(dev[dev["judge"] == "yescieval.qa.cohesion"]["item_id"])
    assert len(held["unlabelled"]) == 20 and held["folds"] == 5
    info = rows["result"].map(lambda r: r["jury"])
    assert info.map(lambda j: j["held_out"]).sum() == folds["labelled"].sum()


def test_weighted_needs_labels():
    with pytest.raises(InputError, match="labels"):
        jury(pd.DataFrame(), MEMBERS, method="weighted", name="w")


# ---- Dawid–Skene ---------------------------------------------------------------------------------------------
def test_dawid_skene_equals_a_hand_worked_first_iteration():
    # 4 units, members A B C, 2 classes: u1 0 0 0, u2 1 1 1, u3 0 0 1, u4 1 1 0. Vote shares T = (1,0), (0,1),
    # (2/3,1/3), (1/3,2/3); priors (1/2,1/2); theta_A = theta_B = [[5/6,1/6],[1/6,5/6]], theta_C = [[2/3,1/3],[1/3,2/3]]
    # E-step: u1 ∝ (5/6·5/6·2/3, 1/6·1/6·1/3) -> 50/51; u3 ∝ (5/6·5/6·1/3, 1/6·1/6·2/3) -> 25/27
    fit = dawid_skene(np.array([[0, 0, 0], [1, 1, 1], [0, 0, 1], [1, 1, 0]]), 2, max_iter=1)
    hand = [F(50, 51), F(1, 51), F(25, 27), F(2, 27)]
    assert np.allclose(fit.posterior[:, 0], [float(h) for h in hand], atol=1e-12)
    assert np.allclose(fit.confusion[2], [[2 / 3, 1 / 3], [1 / 3, 2 / 3]])
    assert np.allclose(fit.confusion[0], [[5 / 6, 1 / 6], [1 / 6, 5 / 6]])


def _plain_dawid_skene(obs: list[list[int]], k: int, n_iter: int, smoothing: float) -> list[list[float]]:
    """An independent, loop-by-loop Dawid–Skene (same initialisation and order: M-step, then E-step)."""
    n, m = len(obs), len(obs[0])
    t = []
    for row in obs:
        counts = [sum(1 for v in row if v == c) for c in range(k)]
        t.append([c / sum(counts) for c in counts])
    for _ in range(n_iter):
        prior = [sum(t[i][c] for i in range(n)) / n for c in range(k)]
        theta = [[[smoothing] * k for _ in range(k)] for _ in range(m)]
        for i in range(n):
            for j in range(m):
                if obs[i][j] >= 0:
                    for c in range(k):
                        theta[j][c][obs[i][j]] += t[i][c]
        for j in range(m):
            for c in range(k):
                total = sum(theta[j][c])
                theta[j][c] = [v / total if total else 1 / k for v in theta[j][c]]
        for i in range(n):
            like = []
            for c in range(k):
                p = prior[c]
                for j in range(m):
                    if obs[i][j] >= 0:
                        p *= theta[j][c][obs[i][j]]
                like.append(p)
            t[i] = [v / sum(like) for v in like]
    return t


def test_dawid_skene_equals_an_independent_implementation_with_missing_answers():
    rng = np.random.default_rng(5)
    truth = rng.integers(0, 4, 60)
    obs = np.where(rng.random((60, 4)) < 0.7, truth[:, None], rng.integers(0, 4, (60, 4)))
    obs[rng.random((60, 4)) < 0.15] = -1
    obs[obs.max(axis=1) < 0, 0] = truth[obs.max(axis=1) < 0]
    for smoothing in (0.0, 0.1):
        ours = dawid_skene(obs, 4, max_iter=15, tol=-np.inf, smoothing=smoothing).posterior
        plain = np.array(_plain_dawid_skene(obs.tolist(), 4, 15, smoothing))
        assert np.abs(ours - plain).max() < 1e-9


def test_dawid_skene_jury_rows_carry_the_posterior(stores):
    paths, _, _, _ = stores
    rows = jury(paths, MEMBERS, method="dawid-skene", name="ds", scale="1,5,1").rows
    ok = rows[rows["status"] == "ok"]
    probs = ok["probs"].map(lambda p: [p[str(c)] for c in range(1, 6)])
    assert np.allclose(probs.map(sum), 1.0)
    assert (ok["score"] == probs.map(lambda p: float(np.argmax(p) + 1))).all()
    assert np.allclose(ok["confidence"], probs.map(max))


def test_verdict_majority(tmp_path):
    rows = []
    votes = {"i1": ["yes", "yes", "no"], "i2": ["yes", "no", None], "i3": ["no", "no", "no"]}
    for item, vs in votes.items():
        for m, v in zip(["a", "b", "c"], vs):
            rows.append({"item_id": item, "judge": "j", "family": "verdict", "spec_hash": "s", "model": m,
                         "status": "ok" if v else "abstained", "verdict": v, "score": None})
    res = jury(pd.DataFrame(rows), ["a", "b", "c"], method="majority", name="v").rows.set_index("item_id")
    assert res.loc["i1", "verdict"] == "yes" and math.isclose(res.loc["i1", "confidence"], 2 / 3)
    assert res.loc["i2", "status"] == "abstained" and res.loc["i3", "verdict"] == "no"
    with pytest.raises(InputError, match="verdicts"):
        jury(pd.DataFrame(rows), ["a", "b", "c"], method="mean", name="v")


# ---- jury vs its members -------------------------------------------------------------------------------------
@pytest.mark.slow
def test_jury_vs_best_member_equals_scipy_paired_t_and_statsmodels_holm(stores):
    from scipy import stats
    from statsmodels.stats.multitest import multipletests

    paths, df, labels, _ = stores
    jrows = jury(paths, MEMBERS, method="mean", name="panel", scale="1,5,1").rows
    frame = pd.concat([df.assign(part="", endpoint="", result=None), jrows], ignore_index=True)
    table = jury_vs_best_member(frame, labels)
    human = labels.groupby(["item_id", "judge"])["score"].median().rename("h")
    js = jrows[jrows["status"] == "ok"].set_index(["item_id", "judge"])["score"].rename("j")
    ps = []
    for m in MEMBERS:
        ms = df[(df["model"] == m) & (df["status"] == "ok")].set_index(["item_id", "judge"])["score"].rename("m")
        both = pd.concat([js, ms, human], axis=1, join="inner").reset_index()
        both["em"], both["ej"] = (both["m"] - both["h"]).abs(), (both["j"] - both["h"]).abs()
        per_item = both.groupby("item_id")[["em", "ej"]].mean()
        t = stats.ttest_rel(per_item["em"], per_item["ej"])
        ci = t.confidence_interval(0.95)
        row = table[table["member"] == m].iloc[0]
        assert row["n_items"] == len(per_item) and row["n_units"] == len(both)
        assert math.isclose(row["diff"], (per_item["em"] - per_item["ej"]).mean(), abs_tol=1e-12)
        assert math.isclose(row["p"], t.pvalue, rel_tol=1e-9)
        assert math.isclose(row["diff_lo"], ci.low, rel_tol=1e-9) and math.isclose(row["diff_hi"], ci.high, rel_tol=1e-9)
        assert math.isclose(row["mae_member"], both["em"].mean())
        assert math.isclose(row["cost_member"], df[df["model"] == m]["cost"].mean())
        ps.append(t.pvalue)
    assert np.allclose(table.set_index("member").loc[MEMBERS, "p_holm"], multipletests(ps, method="holm")[1])
    assert table["best_member"].sum() == 1
    best = table.loc[table["mae_member"].idxmin(), "member"]
    assert table.loc[table["best_member"], "member"].iloc[0] == best
    assert math.isclose(table["cost_jury"].iloc[0], jrows["cost"].mean())
    verdict = table.attrs["beats_every_member"]["jury:panel"]
    assert verdict["intersection_union"] == bool(((table["diff"] > 0) & (table["p"] < 0.05)).all())


def test_scijudge_jury_is_the_user_verb():
    import scijudge

    assert "jury" in scijudge.__all__ and scijudge.jury is jury
