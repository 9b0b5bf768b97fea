"""A base whose input and output embeddings are tied (GPT-2 here, and many small released models): the trained level
rows of the output layer must judge the same merged (as the local engine serves a lone adapter) as unmerged.

Known failure (issue 38, found with benchmarks/bench_distill_bases.py --zero-positions): peft's merge of the
trainable-token delta on a tied ``lm_head`` writes it into the shared matrix, so the level tokens' INPUT embeddings
change too (they occur in the judge's prompt: "one of 1, 2, 3, 4, 5"), and the merged student judges otherwise than
it was trained. Strict xfail: it turns into a failure, to remove the marker, once the merge is fixed."""

from __future__ import annotations

import pytest

# slow: importing torch and peft to collect this module cost each fast-subset worker ~9 s (the tests themselves
# take under 2 s); the full suite (CI) runs them
pytestmark = pytest.mark.slow
torch = pytest.importorskip("torch")
pytest.importorskip("peft")


TIED_BUG = "peft merges a tied lm_head's trainable-token delta into the input embeddings"


@pytest.mark.parametrize("tied", [pytest.param(True, marks=pytest.mark.xfail(strict=True, reason=TIED_BUG)), False],
                         ids=["tied", "untied"])
def test_level_rows_give_the_same_logits_merged_and_unmerged(tied):
    import transformers

    from scijudge.distillation._train import TrainConfig, attach_lora, level_rows_param

    torch.manual_seed(0)
    base = transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=40, n_embd=16, n_layer=1, n_head=2,
                                                                n_positions=64, tie_word_embeddings=tied)).eval()
    levels = [5, 6, 7]
    model = attach_lora(base, TrainConfig(lora_r=2), levels).eval()
    with torch.no_grad():
        level_rows_param(model).add_(torch.randn(len(levels), 16))  # what the probe and training write there
    prompt = torch.tensor([[1, 5, 9, 6, 12, 7, 3]])  # the level tokens occur in the prompt, as in a judge's
    with torch.no_grad():
        unmerged = model(input_ids=prompt).logits[0, -1, levels]
        model.base_model.merge_adapter()
        merged = model(input_ids=prompt).logits[0, -1, levels]
    assert torch.allclose(unmerged, merged, atol=1e-5), (unmerged, merged)


@pytest.mark.parametrize("tied", [True, False], ids=["tied", "untied"])
def test_the_engine_never_merges_level_rows_on_a_tied_base_and_serves_what_was_trained(tied, tmp_path):
    """The local engine's runtime merges a lone adapter unless ``mergeable`` says the merge would change the model:
    an adapter trained on a tied base's level rows is served unmerged, with the logits it had in training."""
    import peft
    import transformers

    from scijudge.distillation._train import TrainConfig, attach_lora, level_rows_param
    from scijudge.lm._runtime import mergeable

    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=40, n_embd=16, n_layer=1, n_head=2, n_positions=64,
                                     tie_word_embeddings=tied)
    base = transformers.GPT2LMHeadModel(config).eval()
    base.save_pretrained(tmp_path / "base")
    levels = [5, 6, 7]
    model = attach_lora(base, TrainConfig(lora_r=2), levels).eval()
    with torch.no_grad():
        level_rows_param(model).add_(torch.randn(len(levels), 16))
    prompt = torch.tensor([[1, 5, 9, 6, 12, 7, 3]])
    with torch.no_grad():
        trained = model(input_ids=prompt).logits[0, -1, levels]
    model.save_pretrained(tmp_path / "adapter")
    served = peft.PeftModel.from_pretrained(transformers.GPT2LMHeadModel.from_pretrained(tmp_path / "base"),
                                            str(tmp_path / "adapter"), adapter_name="a").eval()
    assert mergeable(served, "a") is (not tied)
    if mergeable(served, "a"):
        served.base_model.merge_adapter()
    with torch.no_grad():
        assert torch.allclose(served(input_ids=prompt).logits[0, -1, levels], trained, atol=1e-5)
