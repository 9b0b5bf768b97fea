"""Build a tiny random Llama-architecture model and LoRA adapter offline, for tests, benchmarks and the demo.

The weights are random: every score such a model gives is meaningless. What it exercises is the whole local
path (tokenizer with a chat template, safetensors weights, a PEFT adapter whose config names its base) with no
download. The base model is nudged so that under a JSON grammar it closes strings and objects after a few
tokens, which keeps constrained answers short enough for small token budgets.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from scijudge.errors import ModelError

_CLOSING_BONUS = 4  # lm_head weight on the constant feature; tuned so constrained strings end after a few tokens
_SPECIALS = ("<|bos|>", "<|end|>", "<|pad|>", "<|start|>")
_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}<|start|>{{ message['role'] }}\n"
    "{{ message['content'] }}<|end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|start|>assistant\n{% endif %}"
)

# A few kilobytes written for this project: judge-style prose and JSON answers, so the byte-level BPE learns
# merges for the words and punctuation that prompts and answers use.
_CORPUS_LINES = (
    "You are a careful reviewer of scientific writing. Read the research question, the paper abstracts and the",
    "synthesis, then rate one quality of the synthesis on a scale from 1 to 5 and explain the rating briefly.",
    "A rating of 1 means the quality is missing; 3 means it is adequate with clear gaps; 5 means it is excellent.",
    "The synthesis should answer the research question, stay faithful to the abstracts and cite them correctly.",
    "Correctness: every claim agrees with the cited papers. Completeness: the answer covers the main findings.",
    "Informativeness: the answer gives useful detail. Coherence: the ideas connect in a logical order.",
    "Integration: sources are combined into one account rather than listed. Relevancy: nothing is off topic.",
    "Cohesion: sentences flow and refer back clearly. Conciseness: no padding or repetition. Readability: plain",
    "language with correct grammar. Respond with a JSON object that has the fields rationale and rating.",
    '{"rationale": "The synthesis answers the question and cites both papers.", "rating": 4}',
    '{"rationale": "Several claims are not supported by the abstracts.", "rating": 2}',
    '{"rationale": "Clear, complete and faithful to the sources.", "rating": 5}',
    '{"rationale": "The answer lists findings without connecting them.", "rating": 3}',
    '{"rationale": "Off topic.", "rating": 1}',
    '{"verdict": "satisfied", "confidence": 0.8, "reasoning": "The report names the dataset and its size."}',
    '{"verdict": "not satisfied", "confidence": 0.6, "reasoning": "No limitation is discussed."}',
    "[[ ## question ## ]] [[ ## abstracts ## ]] [[ ## answer ## ]] [[ ## rationale ## ]] [[ ## rating ## ]]",
    "[[ ## completed ## ]] Your input fields are: Your output fields are: All interactions will be structured",
    "in the following way, with the appropriate values filled in. Inputs will have the following structure.",
    "Outputs will be a JSON object with the following fields. In adhering to this structure, your objective is:",
    "The material was synthesised by a solid state reaction at 900 C for 12 hours under argon, then annealed.",
    "Precursors: lithium carbonate, iron oxalate and ammonium phosphate were mixed in a ball mill for 4 hours.",
    "The report compares three methods, measures accuracy on a held out set, and discusses the limitations.",
    "Large language models can judge text, but their scores drift; calibration against human labels helps.",
    "Agreement is measured with Spearman correlation, Cohen kappa and Krippendorff alpha on ordinal scales.",
    "0 1 2 3 4 5 6 7 8 9 10 0.5 1.5 2.5 3.5 4.5 true false null { } [ ] : , \" \\n",
)


def _require() -> tuple[Any, Any, Any, Any]:
    """Import torch, transformers, peft and tokenizers, or say which extra installs them."""
    try:
        import peft
        import tokenizers
        import torch
        import transformers
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ModelError(
            f"building the tiny local model needs torch, transformers and peft ({exc.name} is missing): "
            "pip install 'scijudge[local]'"
        ) from exc
    return torch, transformers, peft, tokenizers


def _build_tokenizer() -> Any:
    """Train a small byte-level BPE tokenizer on the built-in corpus and wrap it with a chat template."""
    _, transformers, _, tokenizers = _require()
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    # Digits stay single tokens (as in Llama 3), so a 1-5 rating is one token whose alternatives are ratings.
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=640,
        special_tokens=list(_SPECIALS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(_CORPUS_LINES) * 4, trainer=trainer)
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|bos|>",
        eos_token="<|end|>",
        pad_token="<|pad|>",
        model_max_length=32768,
        padding_side="left",
    )
    fast.chat_template = _CHAT_TEMPLATE
    return fast


def _nudge_towards_closing(model: Any, tokenizer: Any, torch: Any, strength: float) -> None:
    """Give the tokens that close a JSON string, and end-of-turn, a prompt-independent logit bonus.

    Random weights make every token about equally likely, so a constrained string would run until the token
    budget is spent.
    """
    bonus = [token_id for token, token_id in tokenizer.get_vocab().items()
             if tokenizer.convert_tokens_to_string([token]).startswith('"')]
    bonus.append(tokenizer.eos_token_id)
    bias_tokens(model, tokenizer, torch, bonus, strength, sample_text=" ".join(_CORPUS_LINES[:4]))


def bias_tokens(model: Any, tokenizer: Any, torch: Any, token_ids: list[int], logits: float, *,
                sample_text: str) -> None:
    """Add about ``logits`` to the logit of each of ``token_ids``, whatever the prompt (random Llama models).

    Residual dimension 0 is made a constant feature (every embedding holds 1.0 there and no layer writes to
    it), so after the final RMSNorm it is a roughly constant input of lm_head, measured on ``sample_text``;
    lm_head's column for that dimension then acts as a per-token bias.
    """
    with torch.no_grad():
        model.get_input_embeddings().weight[:, 0] = 1.0
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight[0, :] = 0.0
            layer.mlp.down_proj.weight[0, :] = 0.0
        head = model.get_output_embeddings().weight
        head[:, 0] = 0.0
        device = model.get_input_embeddings().weight.device
        sample = tokenizer(sample_text, return_tensors="pt")["input_ids"].to(device)
        seen: dict[str, Any] = {}  # what lm_head reads (after the final norm), whatever the transformers version
        hook = model.get_output_embeddings().register_forward_pre_hook(lambda _m, a: seen.setdefault("x", a[0]))
        model(sample)
        hook.remove()
        feature = float(seen["x"][0, :, 0].float().mean())
        head[token_ids, 0] = logits / feature


def tiny_llama(vocab_size: int, *, seed: int = 0, init_range: float = 0.2, **token_ids: int | None) -> Any:
    """The tiny random Llama of ``build_tiny_model`` in memory, without a tokenizer or files (fast tests that feed
    token ids; ``token_ids``: bos/eos/pad_token_id)."""
    from scijudge.lm._extra import require_torch

    torch, transformers = require_torch()
    torch.manual_seed(seed)
    config = transformers.LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=32768,  # rotary positions: a long context costs no parameters
        initializer_range=init_range,
        tie_word_embeddings=False,
        **token_ids,
    )
    return transformers.LlamaForCausalLM(config).to(torch.float32).eval()


def build_tiny_model(folder: str | Path, *, seed: int = 0, with_adapter: bool = True, init_range: float = 0.2,
                     closing_bias: bool = True) -> dict[str, Path]:
    """Build and save a tiny random Llama model (and a LoRA adapter naming it) under ``folder``; no downloads.

    ``init_range`` is the weights' standard deviation: 0.2 (default) gives near one-hot random attention, which a
    LoRA adapter cannot move in a short training run; 0.06 gives a base that a test can distil a rubric into
    (``scijudge.distill``, in ``scijudge.distillation``). ``closing_bias`` nudges the model to close JSON strings
    (generated answers stay short).

    Returns:
        ``{"base": <folder>/base, "adapter": <folder>/adapter}`` (no ``adapter`` key when ``with_adapter`` is
        False). Load them with ``local_lm("hf:<base>")`` or ``local_lm("hf:<adapter>")``.
    """
    torch, transformers, peft, _ = _require()
    root = Path(folder)
    base_dir = root / "base"
    base_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = _build_tokenizer()
    model = tiny_llama(len(tokenizer), seed=seed, init_range=init_range, bos_token_id=tokenizer.bos_token_id,
                       eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    if closing_bias:
        _nudge_towards_closing(model, tokenizer, torch, strength=_CLOSING_BONUS)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(base_dir)
    tokenizer.save_pretrained(base_dir)
    paths = {"base": base_dir}
    if with_adapter:
        adapter_dir = root / "adapter"
        lora = peft.LoraConfig(
            r=4,
            lora_alpha=8,
            target_modules=["q_proj", "v_proj"],
            lora_dropout=0.0,
            init_lora_weights=False,  # random A and B, so the adapter visibly changes the outputs
            task_type="CAUSAL_LM",
        )
        torch.manual_seed(seed + 1)
        peft_model = peft.get_peft_model(model, lora)
        peft_model.peft_config["default"].base_model_name_or_path = str(base_dir.resolve())
        peft_model.save_pretrained(adapter_dir)
        config_file = adapter_dir / "adapter_config.json"
        data = json.loads(config_file.read_text(encoding="utf-8"))
        data["base_model_name_or_path"] = str(base_dir.resolve())
        config_file.write_text(json.dumps(data, indent=2), encoding="utf-8")
        paths["adapter"] = adapter_dir
    return paths
