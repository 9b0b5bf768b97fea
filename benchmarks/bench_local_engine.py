"""Local judge throughput: scijudge's engine against the seed's path, side by side on the same model and prompts.

scijudge's engine: one ``dspy.LM`` call per judgment with a ``json_schema`` response format (constrained
decoding), dynamic batching, LoRA merged, shared system-prompt prefix computed once per batch.
The seed's path: float32, the LoRA adapter left unmerged, one request at a time, 150 free-text tokens with
``model.generate``, then a second generation that turns the text into a rating.

    python benchmarks/bench_local_engine.py --quick          # CPU, tiny random model, 8 judgments per path
    python benchmarks/bench_local_engine.py                  # CPU, 24 judgments per path
    python benchmarks/bench_local_engine.py --grammar-backends --shape small --quick   # grammar backends, 128k vocab
    python benchmarks/bench_local_engine.py --shape mid --items 8 --rubrics 2 --prompt-tokens 1500 \\
        --system-tokens 1000 --seed-judgments 2 --skip-sequential --prefix-ablation --repeats 1   # prefix reuse
    # GPU (H200), per prompt layout, without DSPy: bash benchmarks/gpu_h200.sh (see bench_layouts.py)

Weights are random, so ratings are meaningless; the model is nudged (as the tiny test model is) to close JSON
strings after a few tokens, so constrained answers have a realistic short length. The figure is judgments/s.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "true")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

LIKERT_SCHEMA = {
    "type": "object",
    "properties": {"rationale": {"type": "string"}, "rating": {"type": "integer", "minimum": 1, "maximum": 5}},
    "required": ["rationale", "rating"],
    "additionalProperties": False,
}
QUALITIES = [
    "correctness", "completeness", "informativeness", "coherence", "integration",
    "relevancy", "cohesion", "conciseness", "readability",
]
FILLER = (
    "The study measured ionic conductivity of doped garnet electrolytes between 25 and 150 C and reported an "
    "Arrhenius activation energy near 0.35 eV; a second paper compared sintering routes and found that hot "
    "pressing raised the relative density to 97 percent while reducing lithium loss. "
)

# Llama-3.1-8B's shape (random weights).
LLAMA_8B = dict(
    vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
    num_key_value_heads=8, max_position_embeddings=8192, rope_theta=500000.0, rms_norm_eps=1e-5,
)
# A small shape with the same 128k vocabulary: exercises the large-model code path on a CPU.
SMALL = dict(
    vocab_size=128256, hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=2, max_position_embeddings=4096, rope_theta=500000.0, rms_norm_eps=1e-5,
)
# Big enough on a CPU for prefill to dominate, as it does for an 8B model with 1,800-token prompts.
MID = dict(
    vocab_size=32000, hidden_size=512, intermediate_size=1536, num_hidden_layers=4, num_attention_heads=8,
    num_key_value_heads=4, max_position_embeddings=4096, rope_theta=500000.0, rms_norm_eps=1e-5,
)


def _fit_tokens(tokenizer: Any, text: str, n: int) -> str:
    """Text of about ``n`` tokens, cut from repeated ``text``."""
    ids = tokenizer(text * (n // 20 + 2), add_special_tokens=False)["input_ids"][: max(1, n)]
    return tokenizer.decode(ids)


def _prompts(tokenizer: Any, items: int, rubrics: int, prompt_tokens: int, system_tokens: int,
             order: str = "item-major") -> list[list[dict]]:
    """items x rubrics chat prompts: the system prompt is the rubric (shared across items), the user turn the item.

    ``item-major`` submits an item's rubrics together (little shared prefix among neighbours);
    ``rubric-major`` submits one rubric over all items, then the next (neighbours share the system prompt).
    """
    systems = []
    for r in range(rubrics):
        head = (f"You judge the {QUALITIES[r % len(QUALITIES)]} of a scientific synthesis on a 1-5 scale "
                f"(rubric {r}). Answer in JSON with a short rationale and an integer rating. ")
        systems.append(head + _fit_tokens(tokenizer, FILLER, max(0, system_tokens - 40)))
    user_tokens = max(16, prompt_tokens - system_tokens)
    users = []
    for i in range(items):
        body = f"Item {i}. Question: how does doping change conductivity in sample {i * 7}? Synthesis: "
        users.append(body + _fit_tokens(tokenizer, FILLER[i % 50 :] + FILLER, user_tokens - 30))
    pairs = ([(i, r) for i in range(items) for r in range(rubrics)] if order == "item-major"
             else [(i, r) for r in range(rubrics) for i in range(items)])
    return [[{"role": "system", "content": systems[r]}, {"role": "user", "content": users[i]}] for i, r in pairs]


# ------------------------------------------------------------------------------------------- the two paths


def _request(model: str, messages: list[dict], max_tokens: int) -> Any:
    from dspy.lm15 import Config, Message, Request

    return Request(
        model=model, system=messages[0]["content"], messages=(Message.user(messages[1]["content"]),),
        config=Config(max_tokens=max_tokens, temperature=0.0,
                      response_format={"type": "json_schema", "name": "Likert", "schema": LIKERT_SCHEMA}),
    )


def run_engine(lm: Any, prompts: list[list[dict]], *, max_tokens: int, concurrency: int) -> dict[str, Any]:
    """scijudge's engine: every judgment one constrained call; ``concurrency`` calls in flight (1 = sequential)."""
    requests = [_request(lm.model, messages, max_tokens) for messages in prompts]
    before = len(lm.engine.batch_sizes)
    start = time.perf_counter()
    if concurrency == 1:
        responses = [lm(request) for request in requests]
    else:
        with ThreadPoolExecutor(concurrency) as pool:
            responses = list(pool.map(lm, requests))
    elapsed = time.perf_counter() - start
    valid = 0
    for response in responses:
        try:
            value = json.loads(response.text)
            valid += isinstance(value.get("rating"), int) and 1 <= value["rating"] <= 5
        except (ValueError, AttributeError):
            pass
    sizes = lm.engine.batch_sizes[before:]
    return {"jps": len(prompts) / elapsed, "seconds": elapsed, "valid": valid, "n": len(prompts),
            "mean_batch": statistics.mean(sizes) if sizes else 0.0,
            "mean_out_tokens": statistics.mean(r.usage.output_tokens for r in responses)}


def grammar_mask_costs(tokenizer: Any, vocab_size: int, names: list[str], rows: int = 64) -> None:
    """Per backend: tokenizer set-up, Likert-schema compile, mask+accept per token (1 row, then ``rows`` rows)."""
    import torch

    from scijudge.lm._grammar import GrammarSpec, make_backend

    spec = GrammarSpec.from_response_format({"type": "json_schema", "schema": LIKERT_SCHEMA})
    answer = ('{"rationale": "The synthesis answers the question and cites both papers, but it omits the limitation '
              'reported in the second abstract and overstates the effect of doping.", "rating": 4}')
    ids = tokenizer(answer, add_special_tokens=False)["input_ids"]
    print(f"grammar masks: vocabulary {vocab_size}, a {len(ids)}-token Likert answer")
    print(f"{'backend':>14} {'set-up s':>9} {'compile ms':>11} {'us/token':>9} {'ms/step x' + str(rows):>13}")
    for name in names:
        start = time.perf_counter()
        backend = make_backend(name, tokenizer, vocab_size, [tokenizer.eos_token_id])
        setup = time.perf_counter() - start
        start = time.perf_counter()
        try:
            backend.compiled(spec)
        except ValueError as exc:
            print(f"{name:>14} cannot compile the schema: {exc}")
            continue
        compile_ms = (time.perf_counter() - start) * 1000
        bitmask = torch.full((rows, (vocab_size + 31) // 32), -1, dtype=torch.int32)
        matcher = backend.matcher(spec)
        start = time.perf_counter()
        for token in ids:
            matcher.fill_mask(bitmask, 0)
            matcher.accept(token)
        single = (time.perf_counter() - start) / len(ids) * 1e6
        matchers = [backend.matcher(spec) for _ in range(rows)]
        start = time.perf_counter()
        for token in ids:
            backend.fill_masks([(m, k) for k, m in enumerate(matchers)], bitmask)
            for m in matchers:
                m.accept(token)
        batched = (time.perf_counter() - start) / len(ids) * 1000
        print(f"{name:>14} {setup:9.2f} {compile_ms:11.1f} {single:9.0f} {batched:13.2f}")


def _engine_lm(model: str, *, max_batch_size: int, grammar: str | None) -> Any:
    from scijudge.lm.local import local_lm

    lm = local_lm(model, cache=False, max_batch_size=max_batch_size, max_wait_ms=20, grammar=grammar)
    lm(_request(lm.model, [{"content": "warm up"}, {"content": "warm up"}], 8))  # grammar backend, kernels
    return lm


def _best(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The median run by judgments/s (the machine may be shared; medians resist a noisy neighbour)."""
    return sorted(results, key=lambda r: r["jps"])[len(results) // 2]


def run_seed_path(model: Any, tokenizer: Any, prompts: list[list[dict]], device: str) -> dict[str, Any]:
    """The seed's path: one request at a time, 150 free-text tokens, then a second call to get a rating."""
    import torch

    def generate(messages: list[dict], new_tokens: int, exact: bool) -> str:
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        ids = tokenizer(text, return_tensors="pt", add_special_tokens=False).to(device)
        with torch.inference_mode():
            out = model.generate(**ids, max_new_tokens=new_tokens, min_new_tokens=new_tokens if exact else 0,
                                 do_sample=False, pad_token_id=tokenizer.pad_token_id)
        return tokenizer.decode(out[0, ids["input_ids"].shape[1]:], skip_special_tokens=True)

    generate(prompts[0], 4, False)  # warm up
    ratings = 0
    start = time.perf_counter()
    for messages in prompts:
        free_text = generate(messages, 150, True)  # the seed generated 150 tokens of free text
        ask = "Reply with only the rating (1-5) given in this evaluation:\n\n"
        parse = [{"role": "user", "content": ask + free_text}]
        answer = generate(parse, 8, False)
        ratings += re.search(r"[1-5]", answer) is not None
    elapsed = time.perf_counter() - start
    return {"jps": len(prompts) / elapsed, "seconds": elapsed, "n": len(prompts), "parsed": ratings}


# ----------------------------------------------------------------------------------------------- models


def _trained_tokenizer(vocab_size: int, corpus_chars: int = 40_000_000) -> Any:
    """A byte-level BPE tokenizer of about ``vocab_size`` entries, trained offline on this Python's stdlib source.

    Grammar-mask cost depends on the vocabulary's size and shape, so a Llama-3-sized vocabulary learnt from
    real text (code and English) is needed for a representative GPU figure. (A vocabulary of random merges
    is not: it made llguidance's masks ~10x slower than on this one.) ~20 s on 2 cores.
    """
    import random
    import sysconfig

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from scijudge.lm.tiny import _CHAT_TEMPLATE, _SPECIALS

    files = sorted(Path(sysconfig.get_paths()["stdlib"]).rglob("*.py"))
    random.Random(0).shuffle(files)
    texts, size = [], 0
    for file in files:
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        texts.append(text)
        size += len(text)
        if size > corpus_chars:
            break
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=False), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(_SPECIALS), min_frequency=2,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|bos|>", eos_token="<|end|>",
                                   pad_token="<|pad|>", model_max_length=1 << 20, padding_side="left")
    fast.chat_template = _CHAT_TEMPLATE
    return fast


def build_large(folder: Path, shape: dict, device: str, seed: int) -> tuple[str, Any, Any]:
    """Random weights of ``shape`` in memory (bf16 on CUDA, fp32 on CPU) for the engine, a saved LoRA adapter,
    and the seed path's model: a float32 copy of the same weights with the adapter unmerged.

    Returns (model string for the engine, tokenizer, seed-path model).
    """
    import copy

    import peft
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from scijudge.lm.local import preload
    from scijudge.lm.tiny import _nudge_towards_closing

    base, adapter = folder / "base", folder / "adapter"
    base.mkdir(parents=True, exist_ok=True)
    tokenizer = _trained_tokenizer(shape["vocab_size"])
    tokenizer.save_pretrained(base)
    config = LlamaConfig(**shape, bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=False)
    config.save_pretrained(base)
    torch.manual_seed(seed)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # build in the engine's dtype directly: 16 GB, not 32 GB then a cast
    try:
        with torch.device(device):
            model = LlamaForCausalLM(config).eval()
    finally:
        torch.set_default_dtype(default)
    _nudge_towards_closing(model, tokenizer, torch, strength=4.0)
    lora = peft.LoraConfig(r=16, lora_alpha=32, target_modules=["q_proj", "v_proj"], init_lora_weights=False,
                           task_type="CAUSAL_LM")
    wrapped = peft.get_peft_model(model, lora)
    wrapped.peft_config["default"].base_model_name_or_path = str(base)
    wrapped.save_pretrained(adapter)
    model = wrapped.unload()  # the plain base again, for the engine
    seed_model = peft.PeftModel.from_pretrained(copy.deepcopy(model).float(), str(adapter)).eval()
    preload(base, model, tokenizer, dtype="bfloat16" if device == "cuda" else "float32")
    return f"hf:{base}+{adapter}", tokenizer, seed_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="4 items x 2 rubrics")
    parser.add_argument("--items", type=int, default=8)
    parser.add_argument("--rubrics", type=int, default=3)
    parser.add_argument("--prompt-tokens", type=int, default=300)
    parser.add_argument("--system-tokens", type=int, default=None, help="rubric system prompt length (default 1/3)")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--shape", choices=["tiny", "small", "mid", "llama-8b"], default="tiny")
    parser.add_argument("--max-batch-size", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=64, help="token budget of a constrained answer")
    parser.add_argument("--seed-judgments", type=int, default=None, help="judgments for the (slow) seed path")
    parser.add_argument("--grammar", default=None,
                        help="llguidance | xgrammar | outlines-core (default: the first installed)")
    parser.add_argument("--grammar-backends", action="store_true", help="compare the grammar backends instead")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repetitions; the median is reported")
    parser.add_argument("--skip-sequential", action="store_true", help="skip the unbatched scijudge measurement")
    parser.add_argument("--order", choices=["item-major", "rubric-major"], default="item-major",
                        help="submission order of the judgments (see _prompts)")
    parser.add_argument("--prefix-ablation", action="store_true",
                        help="also run the batched engine with shared-prefix reuse off, side by side")
    args = parser.parse_args()
    if args.quick:
        args.items, args.rubrics, args.repeats = 4, 2, 1
    system_tokens = args.system_tokens if args.system_tokens is not None else args.prompt_tokens // 3

    import dspy
    import torch
    import transformers


    transformers.logging.set_verbosity_error()
    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("--device cuda: no CUDA device here")
    with tempfile.TemporaryDirectory() as tmp:
        if args.shape == "tiny":
            from peft import PeftModel
            from transformers import AutoModelForCausalLM, AutoTokenizer

            from scijudge.lm.tiny import build_tiny_model

            paths = build_tiny_model(Path(tmp) / "tiny")
            model_string = f"hf:{paths['adapter']}"
            tokenizer = AutoTokenizer.from_pretrained(paths["base"])
            base = AutoModelForCausalLM.from_pretrained(paths["base"], dtype=torch.float32).to(args.device)
            seed_model = PeftModel.from_pretrained(base, str(paths["adapter"])).eval()  # unmerged, fp32
        else:
            shape = {"llama-8b": LLAMA_8B, "small": SMALL, "mid": MID}[args.shape]
            model_string, tokenizer, seed_model = build_large(Path(tmp) / args.shape, shape, args.device, 0)
        prompts = _prompts(tokenizer, args.items, args.rubrics, args.prompt_tokens, system_tokens, args.order)
        print(f"model={args.shape} device={args.device} judgments={len(prompts)} ({args.items} items x "
              f"{args.rubrics} rubrics) prompt~{args.prompt_tokens} tokens (system {system_tokens}) "
              f"max_batch_size={args.max_batch_size} order={args.order} torch={torch.__version__}")
        if args.grammar_backends:
            from scijudge.lm._grammar import installed_backends

            vocab = int(seed_model.get_output_embeddings().weight.shape[0])
            grammar_mask_costs(tokenizer, vocab, installed_backends())
            print("end to end (same prompts, batched engine):")
            print(f"{'backend':>14} {'j/s':>8} {'valid':>7} {'out tok':>8}")
            for name in installed_backends():
                lm = _engine_lm(model_string, max_batch_size=args.max_batch_size, grammar=name)
                runs = [run_engine(lm, prompts, max_tokens=args.max_tokens, concurrency=2 * args.max_batch_size)
                        for _ in range(args.repeats)]
                result = _best(runs)
                print(f"{name:>14} {result['jps']:8.2f} {result['valid']:>3}/{result['n']:<3} "
                      f"{result['mean_out_tokens']:8.1f}")
                lm.engine.close()
            return
        seed_prompts = prompts[: args.seed_judgments] if args.seed_judgments else prompts
        lm = _engine_lm(model_string, max_batch_size=args.max_batch_size, grammar=args.grammar)
        import scijudge.lm._decode as decode

        sharing = decode.MIN_SHARED_PREFIX
        seeds, batched, single, unshared = [], [], [], []
        for _ in range(args.repeats):  # interleaved, so a busy neighbour slows every path alike
            seeds.append(run_seed_path(seed_model, tokenizer, seed_prompts, args.device))
            batched.append(run_engine(lm, prompts, max_tokens=args.max_tokens, concurrency=2 * args.max_batch_size))
            if not args.skip_sequential:
                single.append(run_engine(lm, prompts, max_tokens=args.max_tokens, concurrency=1))
            if args.prefix_ablation:
                decode.MIN_SHARED_PREFIX = 1 << 30  # every prompt prefilled in full
                try:
                    unshared.append(run_engine(lm, prompts, max_tokens=args.max_tokens,
                                               concurrency=2 * args.max_batch_size))
                finally:
                    decode.MIN_SHARED_PREFIX = sharing
        seed, engine = _best(seeds), _best(batched)
        print(f"seed path          : {seed['jps']:9.3f} judgments/s  "
              f"({seed['n']} judgments in {seed['seconds']:.2f} s; "
              f"fp32, unmerged LoRA, one at a time, 150 free tokens + a parse call)")
        if single:
            one = _best(single)
            print(f"scijudge, 1 at once: {one['jps']:9.3f} judgments/s  ({one['n']} in {one['seconds']:.2f} s; "
                  f"constrained JSON, merged LoRA, no batching; {one['mean_out_tokens']:.1f} output tokens)")
        print(f"scijudge, batched  : {engine['jps']:9.3f} judgments/s  ({engine['n']} in {engine['seconds']:.2f} s; "
              f"mean batch {engine['mean_batch']:.1f}; {engine['mean_out_tokens']:.1f} output tokens; "
              f"{engine['valid']}/{engine['n']} valid JSON with a 1-5 rating)")
        if unshared:
            flat = _best(unshared)
            print(f"  without prefix reuse: {flat['jps']:9.3f} judgments/s  (prefix reuse gives "
                  f"{engine['jps'] / flat['jps']:.2f}x)")
        print(f"ratio (batched / seed path): {engine['jps'] / seed['jps']:.1f}x   "
              f"(median of {args.repeats} interleaved runs)")
        lm.engine.close()


if __name__ == "__main__":
    main()
