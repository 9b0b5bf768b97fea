"""Distillation on the real SmolLM2-135M-Instruct: peak resident memory and time of one training step of a batch of
8 ExpertQA claim prompts (``expertqa.claim_support``, decision form), by tokens per pass, side by side in one run.

Each setting runs in a fresh subprocess (so one setting's freed memory cannot lower or raise another's peak) and
does exactly what ``distill`` does for one step: the shared system prompt once, then the rows in passes of at most
``--tokens-per-pass`` padded tokens, the gradients accumulated, then glibc's freed memory handed back. A pass size
larger than the batch (``whole``) is the one-pass step distillation took before passes existed. Peak RSS is sampled
every 20 ms; "above the model" subtracts the RSS measured just before the step (the model and tokenizer loaded).
Every setting must give the same loss and gradient norm (the same batch, the same gradients), and the script
checks it. ``--checkpointing`` adds the gradient-checkpointing rows (whole rows, no shared prefix). A setting whose
RSS passes ``--limit-gb`` is stopped and reported as such.

    python benchmarks/bench_distill_memory.py                      # whole, 512 and 256 tokens a pass
    python benchmarks/bench_distill_memory.py --passes whole 1024 512 256 128 --checkpointing
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "true")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
WHOLE = 1_000_000


def one_step(tokens_per_pass: int, checkpointing: bool, threads: int, limit_gb: float) -> dict[str, float]:
    """One distillation step in this process; its peak RSS above the loaded model, its time, loss and grad norm."""
    import threading
    import time

    import psutil
    import torch

    from scijudge.data import load_items
    from scijudge.distillation import _train as tr
    from scijudge.distillation._data import build_dataset, encode_examples
    from scijudge.judges import load_judge
    from scijudge.lm.smollm2 import converted_folder

    proc, peak = psutil.Process(), {"rss": 0}

    def sample() -> None:
        while True:
            rss = proc.memory_info().rss
            peak["rss"] = max(peak["rss"], rss)
            if rss > limit_gb * 2 ** 30:
                print(json.dumps({"stopped_at_gb": rss / 2 ** 30}), flush=True)
                os._exit(3)
            time.sleep(0.02)

    threading.Thread(target=sample, daemon=True).start()
    torch.set_num_threads(threads)
    items, _ = load_items(ROOT / "datasets" / "expertqa" / "claims.jsonl")
    short = sorted((it for it in items if len(it.inputs["evidence"]) <= 700), key=lambda it: it.id)[:24]
    cfg = tr.TrainConfig(gradient_checkpointing=checkpointing, tokens_per_pass=tokens_per_pass)
    device = torch.device("cpu")
    tok, model = tr.load_base(converted_folder(), device)
    data = build_dataset(load_judge("expertqa.claim_support"), short, tok, form="decision",
                         labels=ROOT / "datasets" / "expertqa" / "labels.jsonl", teacher=None, teacher_model=None,
                         held_out=0.3, seed=0)
    enc = encode_examples(tok, data.train, data.levels, "decision")
    peft_model = tr.attach_lora(model, cfg, enc.level_ids).eval()
    if checkpointing:
        tr.checkpoint_layers_in_eval(peft_model)
    shared = 0 if checkpointing else tr.shared_prefix(enc.ids)
    levels, targets = torch.tensor(enc.level_ids), torch.tensor(enc.targets)
    tr.release_memory()
    before = proc.memory_info().rss
    peak["rss"] = before
    started = time.perf_counter()
    loss = tr.batch_loss(peft_model, enc, list(range(8)), shared, tok.pad_token_id, levels, targets, torch, device,
                         None, tokens_per_pass, True)
    seconds = time.perf_counter() - started
    grads = [p.grad.flatten() for p in peft_model.parameters() if p.grad is not None]
    return {"peak_above_gb": (peak["rss"] - before) / 2 ** 30, "peak_gb": peak["rss"] / 2 ** 30,
            "model_gb": before / 2 ** 30, "seconds": seconds, "loss": loss,
            "grad_norm": float(torch.cat(grads).norm()), "shared_prefix": shared,
            "suffix_tokens": [len(enc.ids[i]) - shared for i in range(8)]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passes", nargs="+", default=["whole", "512", "256"])
    parser.add_argument("--checkpointing", action="store_true")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--limit-gb", type=float, default=6.0)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        tpp, ckpt = args.child.split(":")
        print(json.dumps(one_step(int(tpp), ckpt == "1", args.threads, args.limit_gb)), flush=True)
        return
    settings = [(WHOLE if p == "whole" else int(p), False) for p in args.passes]
    if args.checkpointing:
        settings += [(1024, True), (WHOLE, True)]
    print(f"load average before: {os.getloadavg()[0]:.2f}; torch threads {args.threads}")
    rows = []
    for tpp, ckpt in settings:
        done = subprocess.run([sys.executable, __file__, "--child", f"{tpp}:{int(ckpt)}", "--threads",
                               str(args.threads), "--limit-gb", str(args.limit_gb)], capture_output=True, text=True)
        last = [line for line in done.stdout.splitlines() if line.startswith("{")]
        result = json.loads(last[-1]) if last else {"error": done.stderr.strip().splitlines()[-1:]}
        name = ("whole batch" if tpp == WHOLE else f"{tpp} tokens/pass") + (", checkpointing" if ckpt else "")
        rows.append((name, result))
        if "peak_above_gb" in result:
            print(f"{name:32s} peak {result['peak_gb']:.2f} GB ({result['peak_above_gb']:.2f} above the model's "
                  f"{result['model_gb']:.2f}), {result['seconds']:.1f} s, loss {result['loss']:.6f}, "
                  f"grad norm {result['grad_norm']:.6f}", flush=True)
        else:
            print(f"{name:32s} {result}", flush=True)
    ok = [r for _, r in rows if "peak_above_gb" in r]
    if len(ok) >= 2:
        ref_name, ref = next((name, r) for name, r in rows if "peak_above_gb" in r)
        for name, r in rows:
            if "peak_above_gb" in r and r is not ref:
                print(f"{name}: peak above the model {r['peak_above_gb'] / ref['peak_above_gb']:.2f}x, time "
                      f"{r['seconds'] / ref['seconds']:.2f}x of {ref_name}'s")
        assert max(abs(r["loss"] - ref["loss"]) for r in ok) < 1e-4, "the settings gave different losses"
        assert max(abs(r["grad_norm"] - ref["grad_norm"]) / ref["grad_norm"] for r in ok) < 1e-4, "different gradients"
        print("same loss and gradient norm in every setting")
    print(f"suffix tokens beyond the shared prefix: {ok[0]['suffix_tokens'] if ok else '?'}")


if __name__ == "__main__":
    main()
