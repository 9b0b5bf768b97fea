"""Judgments/s of the local engine per prompt layout, side by side in one run, on random Llama-shaped weights.

Layouts (every judgment: the same item tokens, a rubric made of boilerplate shared by all rubrics plus the
rubric's own text, a Likert JSON answer of ``--out-tokens`` tokens):

* ``source path``     the source method: one request at a time, unmerged LoRA, ``generate`` of 150 free tokens,
                      then a second call to read a rating from them (bf16 on a GPU; few judgments, it is slow)
* ``separate, no reuse``  rubric first, every prompt prefilled in full (prefix sharing off)
* ``separate``        rubric first ([boilerplate][rubric][item]), rubric-major: rows of one rubric share a prefix
* ``item-first``      item first ([item][boilerplate][rubric]), item-major: the rubrics of one item share it
* ``fused``           one prompt per item with every rubric ([item][boilerplate][rubric 1..n]) and one answer
                      holding n ratings; counted as n judgments

The model has random weights and is pushed away from closing its strings, so every answer writes its rationale
until the engine's forced closing ends the JSON inside the token budget: each judgment costs ``--out-tokens`` output
tokens (fused: n times that per call), and every answer is checked to be valid JSON with ratings in 1-5.

Only torch, transformers, peft, numpy (and llguidance for constrained decoding) are needed: scijudge's engine
modules are imported without the package's ``__init__`` (which imports DSPy).

    python benchmarks/bench_layouts.py --shape tiny                    # CPU, a tiny shape (about a minute)
    python benchmarks/bench_layouts.py --device cuda --shape llama-8b  # one H200: see benchmarks/gpu_h200.sh
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/, also when run by runpy
from _gpu_shapes import LLAMA_8B, scijudge_without_init, tiny

QUALITIES = ["correctness", "completeness", "informativeness", "coherence", "integration",
             "relevancy", "cohesion", "conciseness", "readability"]
TINY = tiny(4096)
# Prompt parts in tokens. 8B: 1,800-token prompts = 1,100 item + 400 boilerplate + 300 rubric (the split that
# matches the FLOP estimates: ~1.7x from rubric sharing, ~2.2x from item sharing).
SIZES = {"llama-8b": dict(items=64, item=1100, boilerplate=400, rubric=300, batch=128, fused_batch=64),
         "tiny": dict(items=8, item=220, boilerplate=80, rubric=60, batch=36, fused_batch=8)}


def import_engine() -> types.SimpleNamespace:
    """scijudge's engine modules without ``scijudge/__init__`` (which imports DSPy, absent on the GPU machine)."""
    scijudge_without_init()
    import scijudge.lm._decode as decode
    from scijudge.lm._grammar import GrammarSpec
    from scijudge.lm._runtime import Runtime

    return types.SimpleNamespace(decode=decode, GrammarSpec=GrammarSpec, Runtime=Runtime)


def train_tokenizer(vocab_size: int, corpus_chars: int) -> Any:
    """A byte-level BPE learnt offline from this Python's standard library source (no download)."""
    import random
    import sysconfig

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    files = sorted(Path(sysconfig.get_paths()["stdlib"]).rglob("*.py"))
    random.Random(0).shuffle(files)
    texts, size = [], 0
    for file in files:
        try:
            texts.append(file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            continue
        size += len(texts[-1])
        if size > corpus_chars:
            break
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|bos|>", "<|end|>", "<|pad|>"],
                                  min_frequency=2, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|bos|>", eos_token="<|end|>",
                                   pad_token="<|pad|>", model_max_length=1 << 20, padding_side="left")


def build_model(shape: dict, tokenizer: Any, device: str, seed: int) -> tuple[Any, Any]:
    """Random weights of ``shape`` built on ``device`` (bf16 on CUDA) and a random LoRA adapter on q/v (unmerged)."""
    import peft
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(**{**shape, "vocab_size": max(shape["vocab_size"], len(tokenizer))},
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=False)
    torch.manual_seed(seed)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = LlamaForCausalLM(config).eval()
    finally:
        torch.set_default_dtype(default)
    _discourage_closing(model, tokenizer, torch)
    lora = peft.LoraConfig(r=16, lora_alpha=32, target_modules=["q_proj", "v_proj"], init_lora_weights=False,
                           task_type="CAUSAL_LM")
    return peft.get_peft_model(model, lora).eval(), config


def _discourage_closing(model: Any, tokenizer: Any, torch: Any) -> None:
    """Make tokens that hold a quote, and end-of-turn, very unlikely (about -50 logits): a random model then
    never ends its rationale by chance, so every layout writes exactly its token budget (the engine's forced
    closing, which reads the grammar's mask and not the logits, still ends the JSON)."""
    from scijudge.lm.tiny import bias_tokens

    bad = [i for t, i in tokenizer.get_vocab().items() if '"' in tokenizer.convert_tokens_to_string([t])]
    bad.append(tokenizer.eos_token_id)
    bias_tokens(model, tokenizer, torch, bad, -50.0, sample_text="def judge(answer):\n    return rating")


# ------------------------------------------------------------------------------------------------ prompts


def _text_tokens(tokenizer: Any, seed_text: str, n: int) -> list[int]:
    ids = tokenizer(seed_text * (n // 8 + 4), add_special_tokens=False)["input_ids"]
    return ids[:n]


def likert_schema() -> dict:
    return {"type": "object", "properties": {"rationale": {"type": "string"},
                                             "rating": {"type": "integer", "minimum": 1, "maximum": 5}},
            "required": ["rationale", "rating"], "additionalProperties": False}


def fused_schema(n: int) -> dict:
    props = {QUALITIES[r % 9] + ("" if r < 9 else str(r)): {"$ref": "#/$defs/Likert"} for r in range(n)}
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False,
            "$defs": {"Likert": likert_schema()}}


def build_prompts(tokenizer: Any, items: int, rubrics: int, sizes: dict) -> dict[str, Any]:
    """Token ids of every prompt part: items, the shared boilerplate, each rubric's own text, the answer cue."""
    bos = [tokenizer.bos_token_id]
    boiler = _text_tokens(tokenizer, "You judge one quality of a scientific synthesis. Inputs: question, papers, "
                          "answer. Reply with a JSON object with a rationale and an integer rating. ",
                          sizes["boilerplate"])
    rubric = [_text_tokens(tokenizer, f"Quality {QUALITIES[r % 9]} (rubric {r}): what earns each rating. ",
                           sizes["rubric"]) for r in range(rubrics)]
    item = [_text_tokens(tokenizer, f"Item {i}: does doping change the conductivity of sample {i * 7}? Paper "
                         f"{i}: garnet electrolytes conduct better after hot pressing. ", sizes["item"])
            for i in range(items)]
    cue = tokenizer("\nAnswer:", add_special_tokens=False)["input_ids"]
    return {"bos": bos, "boiler": boiler, "rubric": rubric, "item": item, "cue": cue}


def layout_rows(parts: dict, layout: str, items: int, rubrics: int) -> list[tuple[list[int], str]]:
    """(input ids, prefix key) per request, in submission order (rubric-major or item-major)."""
    b, bo, ru, it, cue = parts["bos"], parts["boiler"], parts["rubric"], parts["item"], parts["cue"]
    if layout == "fused":
        every = [t for r in range(rubrics) for t in ru[r]]
        return [(b + it[i] + bo + every + cue, f"item{i}") for i in range(items)]
    if layout == "item-first":
        return [(b + it[i] + bo + ru[r] + cue, f"item{i}") for i in range(items) for r in range(rubrics)]
    return [(b + bo + ru[r] + it[i] + cue, f"rubric{r}") for r in range(rubrics) for i in range(items)]


# ----------------------------------------------------------------------------------------------- running


def run_layout(engine: types.SimpleNamespace, runtime: Any, backend: Any, rows: list[tuple[list[int], str]],
               schema: dict, max_new: int, batch: int, judgments_per_row: int) -> dict[str, Any]:
    """Submit every row to the engine's batcher at once and wait; judgments/s, validity, output tokens."""
    spec = engine.GrammarSpec.from_response_format({"type": "json_schema", "schema": schema})
    reserve = backend.closer.reserve(spec, backend) if backend is not None else 0
    start_batches = len(runtime.batcher.batch_sizes)
    started = time.perf_counter()
    futures = [runtime.batcher.submit(
        engine.decode.Row(input_ids=ids, max_new_tokens=max_new, grammar=spec if backend else None,
                          backend=backend, reserve=reserve),
        group=None, prefix_key=key, max_batch_size=batch, max_wait_s=0.05) for ids, key in rows]
    results = [f.result() for f in futures]
    _sync()
    elapsed = time.perf_counter() - started
    valid = sum(_valid(r.text, judgments_per_row) for r in results)
    sizes = runtime.batcher.batch_sizes[start_batches:]
    return {"jps": len(rows) * judgments_per_row / elapsed, "seconds": elapsed, "n": len(rows) * judgments_per_row,
            "valid": valid * judgments_per_row, "truncated": sum(r.finish_reason == "length" for r in results),
            "out_tokens": statistics.mean(len(r.token_ids) for r in results) / judgments_per_row,
            "mean_batch": statistics.mean(sizes) if sizes else 0}


def _valid(text: str, n: int) -> bool:
    try:
        value = json.loads(text)
    except ValueError:
        return False
    ratings = [value] if n == 1 else list(value.values())
    return len(ratings) == n and all(isinstance(v.get("rating"), int) and 1 <= v["rating"] <= 5 for v in ratings)


def _sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def run_source_path(model: Any, tokenizer: Any, rows: list[tuple[list[int], str]], device: str) -> dict[str, Any]:
    """The source method: one judgment at a time, unmerged LoRA, 150 free-text tokens, then a parse call."""
    import re

    import torch

    def generate(ids: list[int], new: int, exact: bool) -> str:
        tensor = torch.tensor([ids], device=device)
        with torch.inference_mode():
            out = model.generate(input_ids=tensor, attention_mask=torch.ones_like(tensor), max_new_tokens=new,
                                 min_new_tokens=new if exact else 0, do_sample=False,
                                 pad_token_id=tokenizer.pad_token_id)
        return tokenizer.decode(out[0, len(ids):], skip_special_tokens=True)

    generate(rows[0][0][:64], 2, False)
    parsed = 0
    started = time.perf_counter()
    for ids, _ in rows:
        text = generate(ids, 150, True)
        ask = tokenizer("Reply with only the rating (1-5) given in this evaluation:\n\n" + text,
                        add_special_tokens=False)["input_ids"]
        parsed += re.search(r"[1-5]", generate([tokenizer.bos_token_id, *ask], 8, False)) is not None
    _sync()
    elapsed = time.perf_counter() - started
    return {"jps": len(rows) / elapsed, "seconds": elapsed, "n": len(rows), "valid": parsed, "truncated": 0,
            "out_tokens": 150.0, "mean_batch": 1}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--shape", choices=["tiny", "llama-8b"], default="tiny")
    parser.add_argument("--rubrics", type=int, default=9)
    parser.add_argument("--items", type=int, default=None)
    parser.add_argument("--out-tokens", type=int, nargs="+", default=[40, 150],
                        help="output tokens per judgment; later values are skipped when time runs short")
    parser.add_argument("--batch", type=int, default=None, help="most rows per batch (default per shape)")
    parser.add_argument("--source-judgments", type=int, default=2)
    parser.add_argument("--time-budget", type=float, default=420,
                        help="seconds from the start: a round of measurements that would end later is skipped")
    parser.add_argument("--out", type=Path, default=None, help="also write the table here")
    parser.add_argument("--corpus-chars", type=int, default=None, help="tokenizer training text (default per shape)")
    parser.add_argument("--item-tokens", type=int, default=None, help="item tokens per prompt (default per shape)")
    args = parser.parse_args()
    t0 = time.perf_counter()
    sizes = dict(SIZES[args.shape])
    if args.item_tokens:
        sizes["item"] = args.item_tokens
    items = args.items or sizes["items"]
    batch = args.batch or sizes["batch"]
    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("--device cuda: no CUDA device here")
    engine = import_engine()
    shape = LLAMA_8B if args.shape == "llama-8b" else TINY
    corpus = args.corpus_chars or (40_000_000 if args.shape == "llama-8b" else 3_000_000)
    tokenizer = train_tokenizer(shape["vocab_size"], corpus)
    peft_model, _ = build_model(shape, tokenizer, args.device, seed=0)
    setup = time.perf_counter() - t0
    parts = build_prompts(tokenizer, items, args.rubrics, sizes)
    prompt_len = len(layout_rows(parts, "separate", 1, 1)[0][0])
    lines = [f"local engine, {args.shape} shape random weights + random LoRA (r=16, q/v), device={args.device} "
             f"({torch.cuda.get_device_name(0) if args.device == 'cuda' else 'cpu'}), torch {torch.__version__}, "
             f"transformers {transformers.__version__}",
             f"{items} items x {args.rubrics} rubrics = {items * args.rubrics} judgments; prompt {prompt_len} tokens "
             f"(item {sizes['item']}, shared boilerplate {sizes['boilerplate']}, rubric {sizes['rubric']}); "
             f"max batch {batch} rows (fused {sizes['fused_batch']}); set-up {setup:.0f} s"]
    table: list[str] = []

    def emit(text: str) -> None:
        print(text, flush=True)
        table.append(text)
        if args.out is not None:  # written as it grows: a run cut short keeps what it measured
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text("\n".join(table) + "\n", encoding="utf-8")

    def measure(name: str, *call: Any) -> dict | None:
        try:
            return run_layout(*call)
        except Exception as exc:
            emit(f"{name}: FAILED {type(exc).__name__}: {str(exc)[:200]}")
            return None

    for line in lines:
        emit(line)
    source_rows = layout_rows(parts, "separate", 1, args.rubrics)[: args.source_judgments]
    source = run_source_path(peft_model, tokenizer, source_rows, args.device) if args.source_judgments else None
    model = peft_model.merge_and_unload().eval()  # the engine merges a lone adapter the same way
    with tempfile.TemporaryDirectory() as folder:
        runtime = engine.Runtime(Path(folder), "bfloat16" if args.device == "cuda" else "float32", None,
                                 preloaded=(model, tokenizer))
        try:
            backend = runtime.grammar(None)
        except Exception as exc:
            emit(f"no grammar backend ({exc}); decoding unconstrained")
            backend = None
        emit(f"grammar backend: {backend.name if backend else 'none'}")
        warm = layout_rows(parts, "separate", 1, 1)
        run_layout(engine, runtime, backend, warm, likert_schema(), 8, batch, 1)
        header = f"{'layout':<22} {'out tok':>7} {'mean out':>8} {'judgments/s':>11} {'x source':>8} {'x separate':>10} " \
                 f"{'valid':>9} {'trunc':>5} {'batch':>5} {'seconds':>7}"
        last_round = None  # (output tokens, seconds) of the previous round, to predict the next one
        for out_tokens in args.out_tokens:
            elapsed = time.perf_counter() - t0
            predicted = last_round[1] * out_tokens / last_round[0] * 1.2 if last_round else 0.0
            if elapsed + predicted > args.time_budget:
                emit(f"(skipped {out_tokens} output tokens: predicted to end after the {args.time_budget:.0f} s budget)")
                continue
            round_start = time.perf_counter()
            emit("")
            emit(header)
            results: dict[str, dict] = {}
            if source is not None:
                results["source path"] = source
            sharing = engine.decode.MIN_SHARED_PREFIX
            engine.decode.MIN_SHARED_PREFIX = 1 << 30
            try:
                results["separate, no reuse"] = measure(
                    "separate, no reuse", engine, runtime, backend, layout_rows(parts, "separate", items, args.rubrics),
                    likert_schema(), out_tokens, batch, 1)
            finally:
                engine.decode.MIN_SHARED_PREFIX = sharing
            for name in ("separate", "item-first"):
                results[name] = measure(name, engine, runtime, backend, layout_rows(parts, name, items, args.rubrics),
                                        likert_schema(), out_tokens, batch, 1)
            results["fused"] = measure("fused", engine, runtime, backend,
                                       layout_rows(parts, "fused", items, args.rubrics), fused_schema(args.rubrics),
                                       out_tokens * args.rubrics, sizes["fused_batch"], args.rubrics)
            base = results.get("separate")
            for name, r in results.items():
                if r is None:
                    continue
                x_source = f"{r['jps'] / source['jps']:.1f}" if source else "-"
                x_sep = f"{r['jps'] / base['jps']:.2f}" if base else "-"
                shown = 150 if name == "source path" else out_tokens
                emit(f"{name:<22} {shown:>7} {r['out_tokens']:>8.1f} {r['jps']:>11.2f} {x_source:>8} {x_sep:>10} "
                     f"{r['valid']:>4}/{r['n']:<4} {r['truncated']:>5} {r['mean_batch']:>5.0f} {r['seconds']:>7.1f}")
            last_round = (out_tokens, time.perf_counter() - round_start)
        emit(f"total {time.perf_counter() - t0:.0f} s")
    if args.out is not None:
        print(f"table written to {args.out}")


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
