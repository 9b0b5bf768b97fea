"""Training on a tiny random base: resume equals an uninterrupted run, checkpointing changes nothing, refusals."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from conftest import write_world  # noqa: E402

from scijudge.errors import InputError  # noqa: E402

SMALL = dict(epochs=2, batch_size=8, threads=1, checkpoint_every=5, evaluate=False, lr=5e-3)


def _adapter(folder):
    from safetensors.torch import load_file

    return load_file(str(folder / "adapter_model.safetensors"))


def test_a_resumed_run_ends_where_an_uninterrupted_one_does(tmp_path, tiny_base):
    import scijudge

    w = write_world(tmp_path / "w", n=60)
    args = (str(w["spec"]), w["items"])
    kw = dict(labels=w["labels"], base=f"hf:{tiny_base}", **SMALL)
    whole = scijudge.distill(*args, out=tmp_path / "whole", **kw)
    assert not whole.interrupted and whole.steps == whole.total_steps > 8
    cut = scijudge.distill(*args, out=tmp_path / "cut", stop_after_step=7, **kw)
    assert cut.interrupted and cut.steps == 7 and not (tmp_path / "cut" / "adapter_config.json").exists()
    assert (tmp_path / "cut" / "checkpoint" / "state.pt").is_file()
    with pytest.raises(InputError, match="lr"):  # a resume with other settings is refused, naming them
        scijudge.distill(*args, out=tmp_path / "cut", **{**kw, "lr": 1e-2})
    resumed = scijudge.distill(*args, out=tmp_path / "cut", **kw)
    assert resumed.resumed_from == 7 and resumed.steps == whole.steps
    assert resumed.losses == pytest.approx(whole.losses, abs=1e-6)
    a, b = _adapter(tmp_path / "whole"), _adapter(tmp_path / "cut")
    assert sorted(a) == sorted(b) and len(a) > 0
    assert max(float((a[k] - b[k]).abs().max()) for k in a) <= 1e-6
    card = (tmp_path / "cut" / "card.json").read_text()
    assert '"resumed_from": 7' in card


def test_gradient_checkpointing_and_the_shared_prefix_change_no_loss(tmp_path, tiny_base):
    import scijudge

    w = write_world(tmp_path / "w", n=40)
    # an LR in the range the range test picks after the probe (a larger one makes the loss, and float noise, explode)
    kw = dict(labels=w["labels"], base=f"hf:{tiny_base}", lr_search=False, **{**SMALL, "epochs": 1, "lr": 5e-6})
    plain = scijudge.distill(str(w["spec"]), w["items"], out=tmp_path / "a", stop_after_step=3, **kw)
    ckpt = scijudge.distill(str(w["spec"]), w["items"], out=tmp_path / "b", stop_after_step=3,
                            gradient_checkpointing=True, **kw)
    assert len(plain.losses) == len(ckpt.losses) == 3
    assert plain.losses == pytest.approx(ckpt.losses, abs=1e-5)  # shared prefix (plain) vs whole rows (ckpt)


def test_an_adapter_is_refused_as_base_and_a_non_likert_judge_is_refused(tmp_path, tiny_base):
    import scijudge
    from scijudge.lm.tiny import build_tiny_model

    adapter = build_tiny_model(tmp_path / "m")["adapter"]
    w = write_world(tmp_path / "w", n=20)
    with pytest.raises(InputError, match="adapter"):
        scijudge.distill(str(w["spec"]), w["items"], labels=w["labels"], base=f"hf:{adapter}", out=tmp_path / "o")
    with pytest.raises(InputError, match="Likert"):
        scijudge.distill("researchrubrics.checklist", w["items"], labels=w["labels"], base=f"hf:{tiny_base}",
                         out=tmp_path / "o2")


def _teacher_run(path, labels_file, soft: bool):
    """A teacher's run store built from the labels: probs peaked on the labelled level (or none), JSON answers."""
    import json

    from scijudge.records import JudgeResult
    from scijudge.run.store import Run

    with Run(path) as store:
        for line in labels_file.read_text().splitlines():
            label = json.loads(line)
            level = int(label["score"])
            probs = {str(v): (0.8 if v == level else 0.05) for v in range(1, 6)} if soft else None
            store.record(JudgeResult(item_id=label["item_id"], judge="synthetic.cue", family="likert", spec_hash="t",
                                     model="teacher/big", status="ok", score=float(level), probs=probs,
                                     result={"rationale": "ok", "rating": level}))


def test_a_teacher_run_trains_the_student_in_decision_and_generated_form(tmp_path, tiny_base):
    import json

    import scijudge

    w = write_world(tmp_path / "w", n=40)
    teacher = tmp_path / "teacher.sqlite"
    _teacher_run(teacher, w["labels"], soft=True)
    kw = dict(base=f"hf:{tiny_base}", teacher=teacher, lr_search=False, **{**SMALL, "epochs": 1})
    soft = scijudge.distill(str(w["spec"]), w["items"], out=tmp_path / "kl", **kw)
    card = json.loads((tmp_path / "kl" / "card.json").read_text())
    assert card["source"].startswith("teacher:") and "teacher/big" in card["source"] and soft.steps == len(soft.losses)
    # the loss is CE against the teacher's soft targets: never below their entropy (KL >= 0)
    entropy = -(0.8 * torch.log(torch.tensor(0.8)) + 4 * 0.05 * torch.log(torch.tensor(0.05))).item()
    assert min(soft.losses) >= entropy - 1e-6
    gen = scijudge.distill(str(w["spec"]), w["items"], out=tmp_path / "gen", form="generated", **kw)
    assert (tmp_path / "gen" / "adapter_config.json").is_file() and gen.losses[-1] < gen.losses[0]
