"""Distillation on a GPU: training steps/s and held-out exact agreement of the default recipe (issue 38), on
random Llama-shaped weights (Llama-3.1-8B shape in bf16 on CUDA; a tiny shape in float32 on CPU for a dry run).

The task is the one the recipe must learn on any base: 500 items, each a shared judge-like boilerplate, then an
item of random tokens holding ONE cue token (one of 5) at a random place, then a fixed closing line; the level is
the cue. 30% are held out. The student is trained by ``scijudge.distillation._train.train`` with its defaults
(LoRA on every linear layer, the level rows of the output layer started from a linear probe, the LR range test,
shared-prefix batching), then the held-out items are scored by the level tokens' logits at the answer position,
before (the base) and after (the student). Steps/s counts the training loop's steps only (the probe and the range
test are timed apart). Only torch, transformers and peft are needed: scijudge's modules are imported without the
package's ``__init__`` (DSPy), as in bench_decision.py.

    python benchmarks/bench_distill.py                                   # CPU, tiny shape: the dry run (~1 min)
    python benchmarks/bench_distill.py --device cuda --shape llama-8b    # one H200 (see benchmarks/gpu_h200.sh)
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/, also when run by runpy
from _gpu_shapes import LLAMA_8B, scijudge_without_init, tiny

TINY = tiny(640)
SIZES = {"llama-8b": dict(boilerplate=400, item=300, closing=40, epochs=2),
         "tiny": dict(boilerplate=120, item=40, closing=12, epochs=2)}
LEVELS = (20, 21, 22, 23, 24)  # the level tokens ("1".."5")
CUES = (40, 41, 42, 43, 44)  # one of these, once per item, fixes its level


def import_training() -> Any:
    """scijudge's training loop without ``scijudge/__init__`` (which imports DSPy, absent on the GPU machine)."""
    scijudge_without_init()
    import scijudge.distillation._train as train

    return train


def task(n: int, sizes: dict[str, int], vocab: int, seed: int) -> tuple[list[list[int]], list[int]]:
    """Prompts (token ids) and their levels (0-4)."""
    rng = random.Random(seed)
    filler = range(100, vocab)
    boiler = [rng.choice(filler) for _ in range(sizes["boilerplate"])]
    closing = [rng.choice(filler) for _ in range(sizes["closing"])]
    rows, levels = [], []
    for i in range(n):
        level = i % 5
        item = [rng.choice(filler) for _ in range(sizes["item"] - 1)]
        item.insert(rng.randrange(len(item) + 1), CUES[level])
        rows.append([1, *boiler, *item, *closing])
        levels.append(level)
    return rows, levels


def agreement(train: Any, model: Any, rows: list[list[int]], levels: list[int], torch: Any, device: Any,
              batch: int) -> float:
    hits = 0
    with torch.no_grad(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
        for i in range(0, len(rows), batch):
            chunk = rows[i:i + batch]
            logits = train.answer_logits(model, chunk, train.shared_prefix(chunk) if len(chunk) > 1 else 0, 0,
                                         torch, device)
            pred = logits[:, list(LEVELS)].argmax(-1).tolist()
            hits += sum(int(p == t) for p, t in zip(pred, levels[i:i + batch]))
    return hits / len(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--shape", choices=["tiny", "llama-8b"], default="tiny")
    parser.add_argument("--items", type=int, default=500)
    parser.add_argument("--epochs", type=int, default=None)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1, help="CPU threads")
    parser.add_argument("--out", type=Path, default=None, help="also append the table here")
    args = parser.parse_args()
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    train = import_training()
    if args.device == "cpu":
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    shape = LLAMA_8B if args.shape == "llama-8b" else TINY
    sizes = SIZES[args.shape]
    epochs = args.epochs or sizes["epochs"]
    started = time.perf_counter()
    torch.manual_seed(0)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32  # as load_base holds the base
    with torch.device(device):
        model = LlamaForCausalLM(LlamaConfig(**shape, tie_word_embeddings=False)).to(dtype).eval()
    built = time.perf_counter() - started
    rows, levels = task(args.items, sizes, shape["vocab_size"], seed=1)
    order = list(range(len(rows)))
    random.Random(2).shuffle(order)
    cut = int(0.3 * len(rows))
    held, fit = order[:cut], order[cut:]
    base_agreement = agreement(train, model, [rows[i] for i in held], [levels[i] for i in held], torch, device,
                               args.batch_size)
    data = train.Encoded([rows[i] for i in fit], targets=[[float(k == levels[i]) for k in range(5)] for i in fit],
                         level_ids=list(LEVELS))
    cfg = train.TrainConfig(epochs=epochs, batch_size=args.batch_size, device=args.device,
                            threads=args.threads if device.type == "cpu" else None)
    stamps: list[float] = []
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()

    def on_step(step: int, total: int, loss: float) -> None:
        if device.type == "cuda":
            torch.cuda.synchronize()
        stamps.append(time.perf_counter())

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        result = train.train(Path(tmp), data, Path(tmp) / "student", cfg, identity={}, resume=False,
                             on_step=on_step, loaded=(types.SimpleNamespace(pad_token_id=0), model), device=device)
        total_s = time.perf_counter() - t0
    student = model  # peft injected the trained LoRA layers and level rows into the base's own modules
    loop_s = stamps[-1] - stamps[0] if len(stamps) > 1 else float("nan")
    steps_per_s = (len(stamps) - 1) / loop_s if len(stamps) > 1 else float("nan")
    recipe = result.extra["recipe"]
    student_agreement = agreement(train, student, [rows[i] for i in held], [levels[i] for i in held], torch, device,
                                  args.batch_size)
    tail = max(1, len(result.losses) // 10)
    lines = [f"distillation, {args.shape} ({'bf16' if dtype == torch.bfloat16 else 'fp32'}) on {args.device}: "
             f"{len(fit)} train / {len(held)} held-out items of {len(rows[0])} tokens, batch {args.batch_size}, "
             f"{epochs} epochs, weights built in {built:.1f} s",
             f"  training loop: {result.steps} steps in {loop_s:.1f} s = {steps_per_s:.2f} steps/s "
             f"({steps_per_s * args.batch_size:.1f} examples/s); probe + LR range test + saving: "
             f"{total_s - loop_s:.1f} s; peak lr chosen {recipe['lr']:g}",
             f"  training loss {recipe.get('loss_before', float('nan')):.4f} at the start, "
             f"{sum(result.losses[-tail:]) / tail:.4f} at the end",
             f"  held-out exact agreement: base {base_agreement:.3f}, student {student_agreement:.3f} "
             f"(chance 0.200, {len(held)} items)"]
    if device.type == "cuda":
        lines.append(f"  peak GPU memory {torch.cuda.max_memory_allocated() / 2 ** 30:.1f} GiB")
    text = "\n".join(lines)
    print(text)
    if args.out is not None:
        with open(args.out, "a", encoding="utf-8") as f:
            f.write(text + "\n\n")


if __name__ == "__main__":
    main()
