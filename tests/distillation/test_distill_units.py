"""Distillation pieces that need no model: split, targets, loss, data hash, intervals, bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest

from scijudge.distillation._data import Example, data_hash, label_targets, split_ids, teacher_targets
from scijudge.errors import InputError

LEVELS = ["1", "2", "3", "4", "5"]


def test_split_is_deterministic_and_an_item_keeps_its_side_when_others_are_added():
    ids = [f"i{k}" for k in range(200)]
    train, test = split_ids(ids, seed=3, held_out=0.3)
    assert sorted(train + test) == sorted(ids) and not set(train) & set(test)
    assert 40 <= len(test) <= 80  # binomial(200, 0.3): mean 60, sd 6.5
    train2, test2 = split_ids(ids + [f"new{k}" for k in range(50)], seed=3, held_out=0.3)
    assert set(test) <= set(test2) and set(train) <= set(train2)
    assert split_ids(ids, seed=4, held_out=0.3)[1] != test
    with pytest.raises(InputError, match="field .split."):
        split_ids(ids, seed=0, held_out=1.5)


def test_data_hash_changes_with_any_prompt_or_target():
    a = [Example("x", "prompt", target=[0, 1, 0, 0, 0])]
    assert data_hash(a) == data_hash([Example("x", "prompt", target=[0, 1, 0, 0, 0])])
    assert data_hash(a) != data_hash([Example("x", "prompt ", target=[0, 1, 0, 0, 0])])
    assert data_hash(a) != data_hash([Example("x", "prompt", target=[0, 0, 1, 0, 0])])


@pytest.mark.slow  # seconds: the fast subset stays under a minute
def test_decision_loss_is_cross_entropy_over_the_level_tokens_and_kl_plus_entropy():
    torch = pytest.importorskip("torch")
    from scipy.special import log_softmax
    from scipy.stats import entropy

    from scijudge.distillation._train import decision_loss

    rng = np.random.default_rng(0)
    logits = rng.normal(size=(3, 11))
    level_ids = [2, 4, 5, 7, 9]
    target = rng.dirichlet(np.ones(5), size=3)
    got = float(decision_loss(torch.tensor(logits), torch.tensor(level_ids), torch.tensor(target), torch))
    logp = log_softmax(logits[:, level_ids], axis=1)
    assert got == pytest.approx(float(np.mean(-(target * logp).sum(1))), rel=1e-9)
    kl_plus_h = np.mean([entropy(t, np.exp(lp)) + entropy(t) for t, lp in zip(target, logp)])
    assert got == pytest.approx(kl_plus_h, rel=1e-9)


def test_human_labels_become_one_hot_or_the_annotators_spread(tmp_path):
    path = tmp_path / "labels.jsonl"
    rows = [{"item_id": "a", "judge": "j", "score": 4, "annotator": "x"},
            {"item_id": "b", "judge": "j", "score": 2, "annotator": "x"},
            {"item_id": "b", "judge": "j", "score": 3, "annotator": "y"},
            {"item_id": "c", "judge": "other", "score": 1, "annotator": "x"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert label_targets(path, "j", LEVELS) == {"a": [0, 0, 0, 1, 0], "b": [0, 0.5, 0.5, 0, 0]}


def test_a_label_off_the_scale_names_its_file_and_line(tmp_path):
    path = tmp_path / "labels.jsonl"
    path.write_text(json.dumps({"item_id": "a", "judge": "j", "score": 4}) + "\n"
                    + json.dumps({"item_id": "b", "judge": "j", "score": 7}) + "\n")
    with pytest.raises(InputError) as info:
        label_targets(path, "j", LEVELS)
    assert "labels.jsonl" in str(info.value) and "2" in str(info.value) and "score" in str(info.value)


def _teacher_store(path, rows):
    from scijudge.records import JudgeResult
    from scijudge.run.store import Run

    with Run(path) as store:
        for r in rows:
            store.record(JudgeResult(**r))


def _row(item, model, score, probs=None, status="ok"):
    return {"item_id": item, "judge": "j", "family": "likert", "spec_hash": "h", "model": model,
            "status": status, "score": score if status == "ok" else None, "probs": probs,
            "abstained_reason": None if status == "ok" else "no answer",
            "result": {"rating": score, "rationale": "r"} if status == "ok" else None}


def test_teacher_probs_are_the_targets_and_a_missing_distribution_falls_back_to_the_score(tmp_path):
    path = tmp_path / "teacher.sqlite"
    _teacher_store(path, [_row("a", "big", 4, {"3": 0.2, "4": 0.6, "5": 0.2}), _row("b", "big", 2),
                          _row("c", "big", None, status="abstained")])
    notes: list[str] = []
    dists, answers, model = teacher_targets(path, "j", LEVELS, None, notes)
    assert model == "big"
    assert dists["a"] == pytest.approx([0, 0, 0.2, 0.6, 0.2]) and dists["b"] == [0, 1, 0, 0, 0]
    assert set(dists) == {"a", "b"} and json.loads(answers["a"]) == {"rating": 4, "rationale": "r"}
    assert any("abstention" in n for n in notes) and any("no probabilities" in n for n in notes)


def test_a_teacher_run_with_several_models_asks_for_one(tmp_path):
    path = tmp_path / "teacher.sqlite"
    _teacher_store(path, [_row("a", "big", 4), _row("a", "other", 3)])
    with pytest.raises(InputError, match="teacher_model"):
        teacher_targets(path, "j", LEVELS, None, [])
    assert teacher_targets(path, "j", LEVELS, "other", [])[0] == {"a": [0, 0, 1, 0, 0]}


def test_exact_agreement_interval_is_wilson_on_the_same_items():
    pd = pytest.importorskip("pandas")
    from statsmodels.stats.proportion import proportion_confint

    from scijudge.distillation._evaluate import _exact

    reference = pd.DataFrame({"item_id": [f"i{k}" for k in range(40)], "score": [1 + k % 5 for k in range(40)]})
    scores = [1 + k % 5 if k < 30 else 1 + (k + 1) % 5 for k in range(40)]
    frame = pd.DataFrame({"item_id": [f"i{k}" for k in range(40)], "score": scores, "status": "ok"})
    frame.loc[39, "status"], frame.loc[39, "score"] = "abstained", None
    got = _exact({"m": frame}, reference)["m"]
    lo, hi = proportion_confint(30, 40, alpha=0.05, method="wilson")
    assert got["value"] == 30 / 40 and got["n"] == 40 and got["abstained"] == 1
    assert got["ci"] == pytest.approx([lo, hi], abs=1e-9)


def test_scijudge_distill_is_the_verb_even_after_the_package_is_imported():
    import scijudge
    import scijudge.distillation._data  # the package is scijudge.distillation: scijudge.distill stays the verb

    assert callable(scijudge.distill) and "distill" in scijudge.__all__
    with pytest.raises(InputError, match="field .lora_r.: must be at least 1"):
        scijudge.distill("x", [], base="hf:/nowhere", out="/tmp/unused", lora_r=0)
    with pytest.raises(InputError, match="field .tokens_per_pass.: must be at least 1"):  # not the default
        scijudge.distill("x", [], base="hf:/nowhere", out="/tmp/unused", tokens_per_pass=0)


def test_the_loss_summary_has_start_end_and_a_smoothed_curve_and_says_whether_it_fell():
    from scijudge.distillation._api import loss_summary

    curve = [1.6] * 5 + [0.4] * 15  # 20 steps: the end is the mean of the last 2, the curve 10 means of 2 steps
    got = loss_summary(1.61, curve)
    assert got["start"] == 1.61 and got["end"] == pytest.approx(0.4) and got["fell"]
    assert got["smoothed"] == pytest.approx([1.6, 1.6, 1.0, 0.4, 0.4, 0.4, 0.4, 0.4, 0.4, 0.4])
    flat = loss_summary(1.59, [1.61, 1.60, 1.60, 1.59, 1.60])  # the case: ln 5 all along
    assert not flat["fell"] and flat["end"] == pytest.approx(1.60) and len(flat["smoothed"]) == 5


def test_no_gain_flags_name_a_flat_loss_and_a_paired_interval_that_includes_zero():
    from scijudge.distillation._api import no_gain_flags

    fell = {"start": 1.6, "end": 0.2, "fell": True}
    flat = {"start": 1.59, "end": 1.60, "fell": False}
    better = {"gain": {"diff": 0.5, "ci": [0.3, 0.7], "n": 50}}
    same = {"gain": {"diff": 0.0, "ci": [-0.1, 0.1], "n": 50}}
    assert no_gain_flags(fell, better) == []
    assert len(no_gain_flags(flat, better)) == 1 and "did not fall" in no_gain_flags(flat, better)[0]
    (line,) = no_gain_flags(fell, same)
    assert "no better than its base" in line and "[-0.100, +0.100]" in line
    assert len(no_gain_flags(flat, same)) == 2
    unclear = {"gain": {"diff": 0.5, "ci": [0.0, 1.0], "n": 2}}  # a positive point, an interval that reaches 0
    (line,) = no_gain_flags(fell, unclear)
    assert "not shown to be better than its base" in line and "no better" not in line and "[+0.000, +1.000]" in line


def test_the_paired_gain_is_the_mean_hit_difference_with_scipys_paired_percentile_interval():
    pd = pytest.importorskip("pandas")
    from scipy.stats import bootstrap

    from scijudge.distillation._evaluate import paired_exact_gain

    rng = np.random.default_rng(1)
    n = 60
    truth = rng.integers(1, 6, size=n)
    student = np.where(rng.random(n) < 0.8, truth, rng.integers(1, 6, size=n))
    base = rng.integers(1, 6, size=n)
    ids = [f"i{k}" for k in range(n)]
    reference = pd.DataFrame({"item_id": ids, "score": truth.astype(float)})
    frame = lambda s: pd.DataFrame({"item_id": ids, "score": s.astype(float), "status": "ok"})  # noqa: E731
    got = paired_exact_gain(frame(student), frame(base), reference, n_boot=4000, seed=0)
    d = (student == truth).astype(float) - (base == truth).astype(float)
    assert got["n"] == n and got["diff"] == pytest.approx(d.mean(), abs=1e-12)
    want = bootstrap((d,), np.mean, n_resamples=4000, method="percentile", random_state=0).confidence_interval
    assert got["ci"] == pytest.approx([want.low, want.high], abs=0.03)  # two Monte Carlo draws of one interval
    same = paired_exact_gain(frame(base), frame(base), reference, n_boot=200, seed=0)
    assert same["diff"] == 0 and same["ci"] == [0.0, 0.0]  # identical contenders: no gain, and it is flagged


@pytest.mark.slow  # seconds: the fast subset stays under a minute
def test_the_lr_range_test_picks_the_candidate_with_the_lowest_loss_and_restores_the_weights():
    torch = pytest.importorskip("torch")
    from scijudge.distillation._train import LR_CANDIDATES, TrainConfig, lr_range_test

    w = torch.nn.Parameter(torch.zeros(3))
    target = torch.tensor([0.9, -1.1, 1.0])

    def loss_of(idx, backward):
        with torch.set_grad_enabled(backward):
            loss = ((w - target) ** 2).sum()
        if backward:
            loss.backward()
        return float(loss)

    # Adam moves each weight by about lr a step: 3 steps of 10 overshoot to ~30, of 0.3 land near 0.9-1.1,
    # of 0.03 and less barely move
    chosen, trials = lr_range_test(None, [w], [[0], [1], [2]], loss_of, TrainConfig(lr=30.0), torch)
    assert [t["lr"] for t in trials[1:]] == pytest.approx([30.0 / 10 ** k for k in range(LR_CANDIDATES)])
    assert trials[0] == {"lr": 0.0, "loss": pytest.approx(float((target ** 2).sum()))}
    assert chosen == pytest.approx(0.3)
    assert torch.equal(w.detach(), torch.zeros(3))


def test_without_bootstrap_intervals_the_point_difference_decides_the_flag():
    from scijudge.distillation._api import no_gain_flags

    fell = {"start": 1.6, "end": 0.2, "fell": True}
    nan = float("nan")
    assert no_gain_flags(fell, {"gain": {"diff": 0.4, "ci": [nan, nan], "n": 50}}) == []
    assert len(no_gain_flags(fell, {"gain": {"diff": 0.0, "ci": [nan, nan], "n": 50}})) == 1
