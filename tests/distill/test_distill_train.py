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
    kw = dict(labels=w["labels"], base=f"hf:{tiny_base}", **{**SMALL, "epochs": 1})
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
