"""Bounded structured output: a random adapter built like a user's (no closing nudge) still gives short, valid JSON."""

from __future__ import annotations

import json
import time
from importlib.util import find_spec
from pathlib import Path

import pytest

# The local extra is checked without importing it, so that collecting this module stays cheap.
_MISSING = [name for name in ("torch", "transformers", "peft", "llguidance") if find_spec(name) is None]
pytestmark = [pytest.mark.slow,  # builds and runs a tiny random transformers model
              pytest.mark.skipif(bool(_MISSING), reason=f"not installed: {_MISSING} (the local extra)")]

from dspy.lm15 import Config, Message, Request  # noqa: E402

from scijudge.data import Item  # noqa: E402
from scijudge.judges.build import load_judge  # noqa: E402
from scijudge.lm import make_lm  # noqa: E402
from scijudge.lm._grammar import GrammarSpec, bound_strings  # noqa: E402
from scijudge.run.api import judge_items  # noqa: E402

LIKERT = {
    "type": "object",
    "properties": {"rationale": {"type": "string"}, "rating": {"type": "integer", "minimum": 1, "maximum": 5}},
    "required": ["rationale", "rating"],
    "additionalProperties": False,
}


def _user_adapter(folder: Path) -> Path:
    """A tiny random Llama and a random LoRA adapter saved the way a user's fine-tune is: plain random weights,
    no help to close strings (unlike ``scijudge.lm.tiny``, which nudges its base towards closing)."""
    import peft
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from scijudge.lm.tiny import _build_tokenizer  # only the tokenizer (with a chat template) is shared

    base, adapter = folder / "base", folder / "adapter"
    tokenizer = _build_tokenizer()
    tokenizer.save_pretrained(base)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(3)
    LlamaForCausalLM(config).save_pretrained(base)
    lora = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False,
                           task_type="CAUSAL_LM")
    wrapped = peft.get_peft_model(LlamaForCausalLM.from_pretrained(base), lora)
    wrapped.peft_config["default"].base_model_name_or_path = str(base)
    wrapped.save_pretrained(adapter)
    return adapter


@pytest.fixture(scope="module")
def user_adapter(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _user_adapter(tmp_path_factory.mktemp("user_model"))


def _items(n: int) -> list[Item]:
    return [Item(id=f"q{i}", question=f"Does doping raise the conductivity of sample {i}?",
                 papers=[{"title": f"Paper {i}", "abstract": "Doped garnets conduct lithium ions better at 25 C."}],
                 answer=f"Yes: sample {i} conducts twice as well after doping.") for i in range(n)]


def test_four_judgments_with_a_random_user_adapter_are_valid_short_and_never_truncated(user_adapter: Path) -> None:
    lm = make_lm(f"hf:{user_adapter}", cache=False)
    judge = load_judge("yescieval.qa.correctness", lm=lm)
    results = []
    started = time.perf_counter()
    summary = judge_items(_items(4), [judge], concurrency=4, on_result=lambda r, s: results.append(r))
    elapsed = time.perf_counter() - started
    assert summary.ok == 4 and summary.abstained == 0
    assert [a.outcome for r in results for a in r.attempts] == ["ok"] * 4  # one call each: no truncation retry
    for result in results:
        assert 1 <= result.score <= 5
        assert len(result.rationale) <= 800  # the default string cap
        assert result.tokens_out <= 850  # 800 characters + the JSON around them; unbounded: ~2,000 tokens each
    # ~4 s on an idle 2-core CPU (~2,000 tokens each and 19 s before the bounds); generous for a loaded machine
    assert elapsed < 120, f"4 judgments took {elapsed:.1f} s"
    print(f"4 judgments: {elapsed:.1f} s, output tokens {[r.tokens_out for r in results]}")
    lm.engine.close()


def test_a_tight_token_budget_is_closed_not_truncated(user_adapter: Path) -> None:
    lm = make_lm(f"hf:{user_adapter}", cache=False, max_string_chars=None)
    fmt = {"type": "json_schema", "name": "Likert", "schema": LIKERT}
    for budget in (16, 24, 40):
        request = Request(model=lm.model, messages=(Message.user("Rate this synthesis."),),
                          config=Config(max_tokens=budget, temperature=0.0, response_format=fmt))
        response = lm(request)
        value = json.loads(response.text)  # parses: forced closing ended it inside the budget
        assert set(value) == {"rationale", "rating"} and 1 <= value["rating"] <= 5
        assert response.finish_reason == "stop"
        assert response.usage.output_tokens <= budget
        assert response.provider_data["forced_tokens"] > 0  # the random model alone would not have stopped
    lm.engine.close()


def test_without_forced_closing_the_same_budget_is_cut_off(user_adapter: Path) -> None:
    """The control: same model and budget, closing off, gives a truncated answer (so the test above can fail)."""
    lm = make_lm(f"hf:{user_adapter}", cache=False, max_string_chars=None, force_close=False)
    fmt = {"type": "json_schema", "name": "Likert", "schema": LIKERT}
    request = Request(model=lm.model, messages=(Message.user("Rate this synthesis."),),
                      config=Config(max_tokens=20, temperature=0.0, response_format=fmt))
    response = lm(request)
    assert response.finish_reason == "length"
    with pytest.raises(json.JSONDecodeError):
        json.loads(response.text)
    lm.engine.close()


def test_string_caps_reach_refs_and_leave_fixed_strings_alone() -> None:
    schema = {"type": "object", "properties": {"j": {"$ref": "#/$defs/J"}}, "$defs": {"J": {
        "type": "object", "properties": {"why": {"type": "string"}, "v": {"type": "string", "enum": ["a", "b"]},
                                         "short": {"type": "string", "maxLength": 10}}}}}
    bounded = bound_strings(schema, 300)["$defs"]["J"]["properties"]
    assert bounded["why"]["maxLength"] == 300
    assert "maxLength" not in bounded["v"] and bounded["short"]["maxLength"] == 10
    spec = GrammarSpec.from_response_format({"type": "json_schema", "schema": LIKERT}, max_string_chars=50)
    assert json.loads(spec.schema_json)["properties"]["rationale"]["maxLength"] == 50
