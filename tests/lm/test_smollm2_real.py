"""What only real weights show: SmolLM2-135M-Instruct's chat template, its 49,152-token vocabulary under
grammar-constrained JSON, decision levels that are real single tokens, LoRA level rows on a real base whose
input and output embeddings are tied (the distiller's output layer, merged or not), and distillation on the real
base: a short training run on four claim prompts whose adapter, served by the engine, moves the model's decision
probabilities towards the experts' levels.

One engine for the module (one model load); the converted folder is the session's ``smollm2`` fixture."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.needs_extra("smollm2")]

CLAIMS = Path(__file__).resolve().parents[2] / "datasets" / "expertqa" / "claims.jsonl"


@pytest.fixture(scope="module")
def lm(smollm2: Path) -> Iterator[object]:
    from scijudge.lm.local import local_lm

    made = local_lm("hf:smollm2", max_tokens=120, max_string_chars=200)
    yield made
    made.engine.close()


def _claims(n: int) -> list[object]:
    from scijudge.data import load_items

    items, _ = load_items(CLAIMS)
    return items[:n]


def test_the_chat_template_is_smollm2s_and_the_judges_system_prompt_replaces_its_default(lm: object) -> None:
    runtime = lm.engine._runtime  # type: ignore[attr-defined]
    text, ids = runtime.chat_prompt([{"role": "system", "content": "Rate claims."}, {"role": "user", "content": "Hi"}])
    assert text == "<|im_start|>system\nRate claims.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    assert "SmolLM" not in text  # the template's own default system prompt is not added beside the judge's
    assert runtime.tokenizer.convert_ids_to_tokens(ids[:1]) == ["<|im_start|>"]
    assert runtime.stop_ids == [2] and runtime.tokenizer.convert_ids_to_tokens([2]) == ["<|im_end|>"]


def test_constrained_json_over_the_49k_vocabulary_parses_and_stays_on_the_scale(lm: object) -> None:
    from scijudge.judges.build import build_judge
    from scijudge.spec.judge_spec import get_spec

    runtime = lm.engine._runtime  # type: ignore[attr-defined]
    assert len(runtime.tokenizer) == 49152 and lm.engine.grammar_backend == "llguidance"  # type: ignore[attr-defined]
    judge = build_judge(get_spec("expertqa.claim_correctness"), lm=lm)
    result = judge.judge_one(_claims(1)[0])
    assert result.status == "ok", result.reason
    assert result.score in {1.0, 2.0, 3.0, 4.0, 5.0}
    attempt = result.attempts[-1]
    assert attempt.strategy == "json_schema" and attempt.outcome == "ok"
    output = lm.history[-1]["outputs"][0]  # type: ignore[attr-defined]
    answer = json.loads(output["text"] if isinstance(output, dict) else output)["judgment"]  # the schema's wrapper
    assert set(answer) == {"rationale", "rating"} and isinstance(answer["rationale"], str) and answer["rationale"]


def test_decision_levels_are_single_real_tokens_and_their_probabilities_are_the_models(lm: object) -> None:
    from scijudge.judges.build import build_judge
    from scijudge.lm.decision import level_paths
    from scijudge.spec.judge_spec import get_spec

    runtime = lm.engine._runtime  # type: ignore[attr-defined]
    context = runtime.chat_prompt([{"role": "user", "content": "Rate it."}])[0] + '{"rating": '
    paths = level_paths(runtime.encode_text, ["1", "2", "3", "4", "5"], context)
    assert all(len(p) == 1 for p in paths) and [runtime.token_text(p[0]) for p in paths] == ["1", "2", "3", "4", "5"]
    judge = build_judge(get_spec("expertqa.claim_support"), lm=lm)
    judge.use_mode("decision")
    results = [judge.judge_one(item) for item in _claims(2)]
    for result in results:
        assert result.status == "ok", result.reason
        assert set(result.probs) == {"1", "2", "3"} and math.isclose(sum(result.probs.values()), 1.0, rel_tol=1e-6)
        assert math.isclose(result.score, sum(int(k) * p for k, p in result.probs.items()), rel_tol=1e-9)
    # a real model's distribution, not a uniform or one-hot placeholder, and it depends on the item
    assert all(0.01 < p < 0.99 for p in results[0].probs.values()) and results[0].probs != results[1].probs


def test_level_rows_on_the_tied_real_base_are_served_unmerged_with_their_trained_logits(smollm2: Path) -> None:
    import peft
    import torch
    import transformers

    from scijudge.distillation._train import TrainConfig, attach_lora, level_rows_param
    from scijudge.lm._runtime import mergeable

    base = transformers.AutoModelForCausalLM.from_pretrained(smollm2, dtype=torch.float32).eval()
    assert base.config.tie_word_embeddings and base.lm_head.weight.data_ptr() == base.model.embed_tokens.weight.data_ptr()
    tokenizer = transformers.AutoTokenizer.from_pretrained(smollm2)
    levels = [tokenizer.convert_tokens_to_ids(d) for d in "123"]
    model = attach_lora(base, TrainConfig(lora_r=2), levels).eval()
    torch.manual_seed(0)
    with torch.no_grad():
        level_rows_param(model).add_(torch.randn(len(levels), base.config.hidden_size) * 0.05)
    prompt = torch.tensor([tokenizer("Rate 1, 2 or 3. Rating:")["input_ids"]])  # the level tokens occur in it
    with torch.no_grad():
        trained = model(input_ids=prompt).logits[0, -1, levels]
    out = smollm2.parent / ".test-tied-adapter"  # beside the cache: the adapter names its base by this path
    try:
        model.save_pretrained(out)
        fresh = transformers.AutoModelForCausalLM.from_pretrained(smollm2, dtype=torch.float32)
        served = peft.PeftModel.from_pretrained(fresh, str(out), adapter_name="a").eval()
        assert mergeable(served, "a") is False  # merging would write the level rows into the input embeddings
        with torch.no_grad():
            assert torch.allclose(served(input_ids=prompt).logits[0, -1, levels], trained, atol=1e-4)
    finally:
        import shutil

        shutil.rmtree(out, ignore_errors=True)


def test_bf16_decision_probabilities_on_the_real_weights_stay_close_to_float32(lm: object) -> None:
    """The CPU default is bf16 where the CPU has it natively (scijudge.lm._models.dtype_name): on the real weights
    its decision distribution stays near float32's (this module's engine is float32: the suite pins it)."""
    from scijudge.judges.build import build_judge
    from scijudge.lm.local import local_lm
    from scijudge.spec.judge_spec import get_spec

    item = _claims(1)[0]
    made = {}
    bf16 = local_lm("hf:smollm2", max_tokens=120, max_string_chars=200, dtype="bfloat16")
    try:
        for name, model in (("float32", lm), ("bfloat16", bf16)):
            judge = build_judge(get_spec("expertqa.claim_support"), lm=model)
            judge.use_mode("decision")
            made[name] = judge.judge_one(item)
    finally:
        bf16.engine.close()
    fp32, half = made["float32"].probs, made["bfloat16"].probs
    assert '"dtype":"bfloat16"' in made["bfloat16"].decoding and '"dtype"' not in made["float32"].decoding
    assert set(fp32) == set(half) and max(abs(fp32[k] - half[k]) for k in fp32) < 0.05, (fp32, half)



def test_distillation_on_the_real_base_moves_the_served_decisions_towards_the_experts(lm: object, smollm2: Path,
                                                                                     tmp_path: Path) -> None:
    import torch

    from scijudge.distillation._data import encode, judge_messages, label_targets, level_token_ids, render
    from scijudge.distillation._train import Encoded, TrainConfig, train
    from scijudge.judges.build import build_judge
    from scijudge.lm.local import local_lm
    from scijudge.spec.judge_spec import get_spec

    spec = get_spec("expertqa.claim_support")
    judge = build_judge(spec, lm=lm)
    levels = ["1", "2", "3"]
    targets = label_targets(CLAIMS.parent / "labels.jsonl", spec.name, levels)
    runtime = lm.engine._runtime  # type: ignore[attr-defined]
    tokenizer = runtime.tokenizer
    # the four labelled claims with the shortest prompts, two levels at least (a constant target teaches a bias only)
    from scijudge.data import load_items

    items, _ = load_items(CLAIMS)
    prompts = {it.id: render(tokenizer, judge_messages(judge, it, levels, decision=True)) for it in items
               if it.id in targets}
    chosen = sorted(prompts, key=lambda i: len(prompts[i]))[:4]
    assert len({max(range(3), key=targets[i].__getitem__) for i in chosen}) >= 2
    data = Encoded([encode(tokenizer, prompts[i]) for i in chosen], targets=[targets[i] for i in chosen],
                   level_ids=level_token_ids(tokenizer, prompts[chosen[0]], levels))
    cfg = TrainConfig(lr=1e-3, lr_search=False, epochs=1, batch_size=4, threads=2, tokens_per_pass=256)
    out = tmp_path / "student"
    threads = torch.get_num_threads()
    trained = train(smollm2, data, out, cfg, identity={"test": "real-base"})
    assert torch.get_num_threads() == threads  # the process's thread count is the caller's again
    recipe = trained.extra["recipe"]
    assert trained.steps == 1 and len(trained.losses) == 1 and not trained.interrupted  # one step: the suite's budget
    assert trained.extra["shared_prefix"] > 500  # the judge's system prompt, run once per batch
    # the probe's fit of the level rows lowers the training loss before the step; the step's loss is measured there
    assert recipe["loss_after_probe"] < recipe["loss_before"]
    assert trained.losses[0] == pytest.approx(recipe["loss_after_probe"], rel=1e-3)

    by_id = {it.id: it for it in items}
    base_judge = build_judge(spec, lm=lm, mode="decision")
    served = local_lm(f"hf:{out}", dtype="float32")  # the module engine (the base) is float32 too
    try:
        student_judge = build_judge(spec, lm=served, mode="decision")
        before = [base_judge.judge_one(by_id[i]) for i in chosen]
        after = [student_judge.judge_one(by_id[i]) for i in chosen]
    finally:
        served.engine.close()
    assert all(r.status == "ok" for r in before + after)

    def expected_log_prob(results: list[object]) -> float:  # the training objective, on the served probabilities
        return sum(sum(t * math.log(max(r.probs[lev], 1e-12)) for t, lev in zip(targets[i], levels))  # type: ignore[attr-defined]
                   for i, r in zip(chosen, results)) / len(chosen)

    assert expected_log_prob(after) > expected_log_prob(before) + 0.05
