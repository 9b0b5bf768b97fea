"""Decision vs generated judgments/s of the local engine, side by side in one run, on random Llama-shaped weights.

Every judgment reads the same item-first prompt ([item][boilerplate][rubric]; 9 rubrics per item share the item):

* ``decision``      ``scijudge.lm.decision.decide_batch``: one prefill pass, the item's prefix computed once for
                    its rubrics, the distribution over 5 level tokens read at the answer position (no decoding)
* ``generate N``    the engine's own batched decoder (``scijudge.lm._decode.decode_batch``, the same prefix
                    sharing) writing exactly N tokens per judgment (stop tokens off), N = 40 and 150
* ``hf forward``    the plain transformers reference for decision (``--reference``, on by default): each batch's
                    full prompts left-padded into one ``model(...)`` call (no prefix sharing), the last position's
                    logits read (``logits_to_keep=1``)
* ``hf generate N`` the plain transformers reference for generation: ``model.generate`` on the same batches,
                    greedy, exactly N new tokens (``min_new_tokens=max_new_tokens=N``), for the first N only

Rounds are interleaved (decision, generate 40, generate 150, repeated) so machine load hits every mode alike; the
table gives the median judgments/s per mode, the ratios, and peak memory (CPU: peak RSS of the process; CUDA:
``torch.cuda.max_memory_allocated`` per mode). Weights are random (bf16 on CUDA, float32 on CPU) with a random
LoRA adapter (r=16 on q/v) merged into them, as the engine does for a single adapter. Only torch, transformers
and peft are needed: scijudge's engine modules are imported without the package's ``__init__`` (DSPy).

    python benchmarks/bench_decision.py                                  # CPU, tiny shape (about a minute)
    python benchmarks/bench_decision.py --device cuda --shape llama-8b   # one H200 (see benchmarks/gpu_h200.sh)
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
import types
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/, also when run by runpy
from _gpu_shapes import LLAMA_8B, scijudge_without_init, tiny

TINY = tiny(640)
# tokens: 8B = 1,800-token prompts (1,100 item + 400 boilerplate + 300 rubric), as in bench_layouts.py
SIZES = {"llama-8b": dict(items=64, item=1100, boilerplate=400, rubric=300, batch_items=8),
         "tiny": dict(items=4, item=300, boilerplate=40, rubric=40, batch_items=4)}


def import_engine() -> types.SimpleNamespace:
    """scijudge's engine modules without ``scijudge/__init__`` (which imports DSPy, absent on the GPU machine)."""
    scijudge_without_init()
    import scijudge.lm._decode as decode
    import scijudge.lm.decision as decision

    return types.SimpleNamespace(decode=decode, decision=decision)


def build_model(shape: dict[str, Any], device: str, seed: int) -> Any:
    """Random Llama weights of ``shape`` on ``device`` plus a random LoRA adapter on q/v, merged."""
    import peft
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    config = LlamaConfig(**shape, tie_word_embeddings=False)
    with torch.device(device):
        model = LlamaForCausalLM(config).to(dtype)
    lora = peft.LoraConfig(r=16, lora_alpha=32, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    return peft.get_peft_model(model, lora).merge_and_unload().eval()


def prompts(sizes: dict[str, int], vocab: int, rubrics: int, seed: int) -> list[list[list[int]]]:
    """Items -> rubrics -> token ids, item first: [bos][item][boilerplate][rubric]."""
    import random

    rng = random.Random(seed)
    boiler = [rng.randrange(10, vocab) for _ in range(sizes["boilerplate"])]
    texts = [[rng.randrange(10, vocab) for _ in range(sizes["rubric"])] for _ in range(rubrics)]
    out = []
    for _ in range(sizes["items"]):
        item = [rng.randrange(10, vocab) for _ in range(sizes["item"])]
        out.append([[1, *item, *boiler, *text] for text in texts])
    return out


def _left_padded(rows: list[list[int]], device: str) -> tuple[Any, Any]:
    """A batch of token-id rows left-padded with 0, and its attention mask."""
    import torch

    width = max(len(r) for r in rows)
    ids = torch.zeros((len(rows), width), dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for n, row in enumerate(rows):
        ids[n, width - len(row):] = torch.tensor(row)
        mask[n, width - len(row):] = 1
    return ids.to(device), mask.to(device)


def hf_forward(model: Any, groups: list[list[list[int]]], per_batch: int, device: str) -> tuple[int, float]:
    """Plain transformers, decision: each batch's full prompts in one forward pass, the last logits read."""
    import torch

    n, t0 = 0, time.perf_counter()
    with torch.inference_mode():
        for start in range(0, len(groups), per_batch):
            rows = [p for g in groups[start:start + per_batch] for p in g]
            ids, mask = _left_padded(rows, device)
            logits = model(input_ids=ids, attention_mask=mask, logits_to_keep=1).logits[:, -1, 2:7]
            probs = torch.softmax(logits.float(), dim=-1)
            assert probs.shape == (len(rows), 5)
            n += len(rows)
    if device == "cuda":
        torch.cuda.synchronize()
    return n, time.perf_counter() - t0


def hf_generate(model: Any, groups: list[list[list[int]]], per_batch: int, tokens: int,
                device: str) -> tuple[int, float]:
    """Plain transformers, generation: ``model.generate`` per batch, greedy, exactly ``tokens`` new tokens."""
    import torch

    n, t0 = 0, time.perf_counter()
    with torch.inference_mode():
        for start in range(0, len(groups), per_batch):
            rows = [p for g in groups[start:start + per_batch] for p in g]
            ids, mask = _left_padded(rows, device)
            out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=tokens, min_new_tokens=tokens,
                                 do_sample=False, pad_token_id=0)
            assert out.shape[1] == ids.shape[1] + tokens
            n += len(rows)
    if device == "cuda":
        torch.cuda.synchronize()
    return n, time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--shape", choices=["tiny", "llama-8b"], default="tiny")
    parser.add_argument("--rubrics", type=int, default=9)
    parser.add_argument("--items", type=int, default=None)
    parser.add_argument("--out-tokens", type=int, nargs="+", default=[40, 150])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--generate-items", type=int, default=None,
                        help="items per generated round (default: all on CPU, one batch of items on CUDA)")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads (1: the ratio is steadier on a busy box)")
    parser.add_argument("--out", type=Path, default=None, help="also append the table here")
    parser.add_argument("--reference", action=argparse.BooleanOptionalAction, default=True,
                        help="also time plain transformers (forward for decision, generate for the first N)")
    args = parser.parse_args()
    import torch

    if args.device == "cpu":
        torch.set_num_threads(args.threads)
    engine = import_engine()
    sizes = dict(SIZES[args.shape])
    if args.items:
        sizes["items"] = args.items
    shape = LLAMA_8B if args.shape == "llama-8b" else TINY
    started = time.perf_counter()
    model = build_model(shape, args.device, seed=0)
    built = time.perf_counter() - started
    groups = prompts(sizes, shape["vocab_size"], args.rubrics, seed=1)
    plan = engine.decision.plan_levels([(k,) for k in range(2, 7)], end_id=None)  # 5 single-token levels
    per_batch = sizes["batch_items"]

    def decide() -> tuple[int, float]:
        n, t0 = 0, time.perf_counter()
        for start in range(0, len(groups), per_batch):
            rows = [engine.decision.DecideRow(p, plan) for g in groups[start:start + per_batch] for p in g]
            scores = engine.decision.decide_batch(model, rows, pad_id=0, max_batch_tokens=1 << 30)
            assert all(abs(sum(s.probs) - 1.0) < 1e-6 for s in scores)
            n += len(scores)
        if args.device == "cuda":
            torch.cuda.synchronize()
        return n, time.perf_counter() - t0

    gen_items = args.generate_items or (len(groups) if args.device == "cpu" else per_batch)

    def generate(tokens: int) -> tuple[int, float]:
        n, t0 = 0, time.perf_counter()
        for start in range(0, gen_items, per_batch):
            rows = [engine.decode.Row(input_ids=p, max_new_tokens=tokens)
                    for g in groups[start:min(start + per_batch, gen_items)] for p in g]
            results = engine.decode.decode_batch(model, rows, stop_ids=[], pad_id=0, detokenize=lambda ids: "")
            assert all(len(r.token_ids) == tokens for r in results)
            n += len(results)
        if args.device == "cuda":
            torch.cuda.synchronize()
        return n, time.perf_counter() - t0

    modes: dict[str, Any] = {"decision": decide}
    for tokens in args.out_tokens:
        modes[f"generate {tokens}"] = (lambda t: (lambda: generate(t)))(tokens)
    if args.reference:
        modes["hf forward"] = lambda: hf_forward(model, groups, per_batch, args.device)
        first = args.out_tokens[0]
        modes[f"hf generate {first}"] = lambda: hf_generate(model, groups[:gen_items], per_batch, first, args.device)
    rates: dict[str, list[float]] = {name: [] for name in modes}
    peaks: dict[str, float] = dict.fromkeys(modes, 0.0)
    decide()  # warm-up (kernels, allocator)
    for _ in range(args.rounds):
        for name, run in modes.items():
            if args.device == "cuda":
                torch.cuda.reset_peak_memory_stats()
            n, seconds = run()
            rates[name].append(n / seconds)
            if args.device == "cuda":
                peaks[name] = max(peaks[name], torch.cuda.max_memory_allocated() / 2**30)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB -> GiB
    lines = [f"decision vs generated, local engine, {args.shape} shape random weights + merged random LoRA (r=16, q/v), "
             f"device={args.device}, {sizes['items']} items x {args.rubrics} rubrics item-first, prompt "
             f"{1 + sizes['item'] + sizes['boilerplate'] + sizes['rubric']} tokens, {per_batch} items per batch, "
             f"{args.rounds} interleaved rounds (model built in {built:.0f} s)",
             f"{'mode':<14} {'judgments/s (median)':>21} {'rounds':>30} {'x generate':>11} {'peak GiB':>9}"]
    decision = statistics.median(rates["decision"])
    for name in modes:
        median = statistics.median(rates[name])
        ratio = "" if name == "decision" or name.startswith("hf ") else f"{decision / median:.1f}"
        peak = f"{peaks[name]:.1f}" if args.device == "cuda" else ""
        lines.append(f"{name:<14} {median:>21.1f} {' '.join(f'{r:.1f}' for r in rates[name]):>30} {ratio:>11} "
                     f"{peak:>9}")
    if args.reference:
        first = args.out_tokens[0]
        generated = statistics.median(rates[f"generate {first}"]) / statistics.median(rates[f"hf generate {first}"])
        lines.append(f"scijudge / plain transformers: decision {decision / statistics.median(rates['hf forward']):.2f}x "
                     f"(hf forward), generate {first} {generated:.2f}x (hf generate {first})")
    if args.device == "cpu":
        lines.append(f"peak RSS of the process: {rss:.2f} GiB (imports and weights; the decision tensors are small)")
    text = "\n".join(lines)
    print(text)
    if args.out is not None:
        with args.out.open("a", encoding="utf-8") as handle:
            handle.write(text + "\n")


if __name__ == "__main__":
    main()
