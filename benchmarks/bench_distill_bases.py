"""The default `scijudge.distill` recipe on two families of tiny random bases built here (issue 38): held-out exact
agreement of the base and of the student, side by side, on the same single-cue rubric.

- ``llama``: a Llama (RoPE, RMSNorm, 2 layers, hidden 64, std 0.02), a 600-token byte-level BPE trained on stdlib
  docstrings, no chat template (the issue's case);
- ``gpt2``: a GPT-2 (learned absolute position embeddings, LayerNorm, tied input/output embeddings, 3 layers,
  hidden 48, std 0.05), a 900-token Metaspace BPE, a chat template of its own.

The rubric: 250 short reviews "Overall <verdict>. <filler>. <filler>." whose rating is fixed by the verdict word
(dismal 1 ... superb 5); one human label each; 30% held out (by the distill split). Each base is distilled with
``scijudge.distill(...)`` at its defaults (10 epochs, LR range test, probe, all-linear LoRA), then the held-out
split is judged by the base and the student in decision mode (the evaluation ``distill`` runs itself).

    python benchmarks/bench_distill_bases.py                  # both families (CPU, ~4 min each on one thread)
    python benchmarks/bench_distill_bases.py --family gpt2 --lr 5e-3 --no-lr-search --no-probe   # a variant
    python benchmarks/bench_distill_bases.py --family gpt2 --cue tokens      # verdicts that are one token each
    python benchmarks/bench_distill_bases.py --family gpt2 --zero-positions  # GPT-2 without position embeddings

``--no-probe`` keeps the level rows trainable but skips their linear-probe start (it replaces
``_train.probe_level_rows`` for this process: a benchmark switch, not a recipe option).
"""

from __future__ import annotations

import argparse
import inspect
import json
import random
import tempfile
import time
from pathlib import Path
from typing import Any

VERDICTS = {1: "dismal", 2: "weak", 3: "fair", 4: "strong", 5: "superb"}  # several BPE pieces each
TOKEN_VERDICTS = {1: "error", 2: "file", 3: "module", 4: "class", 5: "default"}  # one token each in the gpt2 vocabulary
FILLER = ("the study method data results were reported clearly and the authors describe a sample with several "
          "limitations that future work should address while discussion of prior work is brief").split()
SPEC = '''name = "review.verdict"
family = "likert"
description = "How good the reviewer says the paper is."
output = "likert"
instructions = "Rate the paper from 1 to 5 as the review judges it."

[scale]
min = 1
max = 5
step = 1

[[inputs]]
name = "answer"
description = "A short review."
'''


def _corpus() -> list[str]:
    import argparse as a
    import calendar
    import collections
    import difflib
    import email
    import json as j
    import textwrap

    lines: list[str] = []
    for module in (email, j, collections, a, textwrap, difflib, calendar):
        for _, obj in inspect.getmembers(module):
            doc = inspect.getdoc(obj)
            if doc:
                lines.extend(doc.splitlines())
    return [line for line in lines if line.strip()]


def build_base(family: str, folder: Path, seed: int = 0) -> Path:
    """A tiny random base of ``family`` (llama | gpt2) with a tokenizer trained here; saved under ``folder``."""
    import torch
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    if family == "llama":
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        tok.train_from_iterator(_corpus(), trainer=trainers.BpeTrainer(
            vocab_size=600, special_tokens=["<s>", "</s>", "<pad>"], show_progress=False,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
        fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                                                   pad_token="<pad>")
        model: Any = transformers.LlamaForCausalLM(transformers.LlamaConfig(
            vocab_size=len(fast), hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=4, max_position_embeddings=4096, bos_token_id=fast.bos_token_id,
            eos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id))
    else:
        tok = Tokenizer(models.BPE(unk_token="<unk>"))
        tok.pre_tokenizer = pre_tokenizers.Metaspace()
        tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                         decoders.Strip(" ", 1, 0)])
        tok.train_from_iterator(_corpus()[::-1], trainer=trainers.BpeTrainer(
            vocab_size=900, special_tokens=["<unk>", "<|im_start|>", "<|im_end|>", "<pad>"], show_progress=False,
            initial_alphabet=[chr(c) for c in range(32, 127)]))
        fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<|im_start|>",
                                                   eos_token="<|im_end|>", pad_token="<pad>")
        fast.chat_template = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
                              "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
        model = transformers.GPT2LMHeadModel(transformers.GPT2Config(
            vocab_size=len(fast), n_embd=48, n_layer=3, n_head=4, n_positions=4096, initializer_range=0.05,
            bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id))
    model.save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


def write_world(folder: Path, n: int = 250, seed: int = 1, verdicts: dict[int, str] = VERDICTS) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    items, labels = [], []
    for i in range(n):
        level = rng.randint(1, 5)
        a = " ".join(rng.choice(FILLER) for _ in range(rng.randint(6, 12)))
        b = " ".join(rng.choice(FILLER) for _ in range(rng.randint(4, 8)))
        items.append({"id": f"r{i:04d}", "answer": f"Overall {verdicts[level]}. {a.capitalize()}. {b.capitalize()}."})
        labels.append({"item_id": f"r{i:04d}", "judge": "review.verdict", "score": level, "annotator": "h"})
    paths = {"spec": folder / "review.verdict.toml", "items": folder / "items.jsonl", "labels": folder / "labels.jsonl"}
    paths["spec"].write_text(SPEC, encoding="utf-8")
    paths["items"].write_text("".join(json.dumps(x) + "\n" for x in items), encoding="utf-8")
    paths["labels"].write_text("".join(json.dumps(x) + "\n" for x in labels), encoding="utf-8")
    return paths


def zero_positions(base: Path) -> None:
    """Set a GPT-2 base's learned position embeddings to zero (what is left: a base with no position signal)."""
    import torch
    import transformers

    model: Any = transformers.AutoModelForCausalLM.from_pretrained(str(base))
    with torch.no_grad():
        model.transformer.wpe.weight.zero_()
    model.save_pretrained(base)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--family", choices=["llama", "gpt2", "both"], default="both")
    parser.add_argument("--epochs", type=int, default=10, help="distill's default")
    parser.add_argument("--items", type=int, default=250)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--lr", type=float, default=5e-3, help="distill's default (the range test's largest)")
    parser.add_argument("--no-lr-search", action="store_true", help="train at --lr (no range test)")
    parser.add_argument("--lora-r", type=int, default=8)
    parser.add_argument("--targets", default=None, help="comma-separated LoRA modules (default all-linear)")
    parser.add_argument("--no-probe", action="store_true", help="level rows trained from the base's rows")
    parser.add_argument("--cue", choices=["words", "tokens"], default="words")
    parser.add_argument("--zero-positions", action="store_true", help="gpt2: position embeddings set to 0")
    args = parser.parse_args()
    import scijudge
    from scijudge.distillation import _train

    if args.no_probe:
        _train.probe_level_rows = lambda *a, **k: {}

    families = ["llama", "gpt2"] if args.family == "both" else [args.family]
    with tempfile.TemporaryDirectory() as tmp:
        world = write_world(Path(tmp) / "world", n=args.items,
                            verdicts=TOKEN_VERDICTS if args.cue == "tokens" else VERDICTS)
        for family in families:
            base = build_base(family, Path(tmp) / f"base-{family}")
            if args.zero_positions and family == "gpt2":
                zero_positions(base)
            t0 = time.perf_counter()
            result = scijudge.distill(str(world["spec"]), world["items"], labels=world["labels"], base=f"hf:{base}",
                                      out=Path(tmp) / f"student-{family}", epochs=args.epochs, threads=args.threads,
                                      resume=False, n_boot=200, lr=args.lr, lr_search=not args.no_lr_search,
                                      lora_r=args.lora_r, targets=args.targets.split(",") if args.targets else None)
            seconds = time.perf_counter() - t0
            agree = result.evaluation.get("exact_agreement", {})
            recipe = json.loads(result.card.read_text(encoding="utf-8")).get("recipe", {}) if result.card else {}
            cell = {k: f"{v['value']:.3f} [{v['ci'][0]:.3f}, {v['ci'][1]:.3f}]" for k, v in agree.items()}
            n = next(iter(agree.values()))["n"] if agree else 0
            print(f"{family}: held-out exact agreement base {cell.get('base')} -> student {cell.get('student')} "
                  f"({n} items); loss {result.loss['start']:.3f} -> {result.loss['end']:.3f}; "
                  f"lr {recipe.get('lr')}; {result.steps} steps, {seconds:.0f} s; flags {result.flags or 'none'}",
                  flush=True)


if __name__ == "__main__":
    main()
