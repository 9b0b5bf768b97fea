"""A synthetic rubric whose rating is fixed by a cue word closing the answer, and a tiny random base to learn it."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

# One cue word per level: single tokens of scijudge's tiny tokenizer, never used as filler.
CUES = {1: "topic", 2: "hours", 3: "list", 4: "faithful", 5: "clear"}
FILLER = ("the synthesis answer question papers paper abstracts sources findings report research quality claim with "
          "them then will connect measure limitation structure object fields following means abstract discuss "
          "correct finding").split()
REPEATS = 6
SPEC = '''name = "synthetic.cue"
family = "likert"
description = "A synthetic rubric: the word after 'Overall:' fixes the rating."
output = "likert"
instructions = "Rate the answer from 1 to 5."

[scale]
min = 1
max = 5
step = 1

[[inputs]]
name = "answer"
description = "The answer to rate."
'''


def synthetic_items(n: int, seed: int) -> tuple[list[dict], list[dict]]:
    """``n`` items (levels balanced, so a constant rater agrees on 1/5) and one human label each."""
    rng = random.Random(seed)
    items, labels = [], []
    for i in range(n):
        level = 1 + i % 5
        words = [rng.choice(FILLER) for _ in range(rng.randint(16, 28))]
        for _ in range(REPEATS):  # the cue recurs through the answer, and closes it
            words.insert(rng.randrange(len(words) + 1), CUES[level])
        words += ["Overall:", CUES[level] + "."]
        items.append({"id": f"syn-{i:04d}", "answer": " ".join(words)})
        labels.append({"item_id": f"syn-{i:04d}", "judge": "synthetic.cue", "score": level, "annotator": "a1"})
    order = list(range(n))
    rng.shuffle(order)
    return [items[i] for i in order], [labels[i] for i in order]


def write_world(folder: Path, n: int = 240, seed: int = 0) -> dict[str, Path]:
    """Spec, items and labels files of the synthetic rubric under ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    items, labels = synthetic_items(n, seed)
    paths = {"spec": folder / "synthetic.cue.toml", "items": folder / "items.jsonl", "labels": folder / "labels.jsonl"}
    paths["spec"].write_text(SPEC, encoding="utf-8")
    paths["items"].write_text("".join(json.dumps(x) + "\n" for x in items), encoding="utf-8")
    paths["labels"].write_text("".join(json.dumps(x) + "\n" for x in labels), encoding="utf-8")
    return paths


@pytest.fixture(scope="session")
def tiny_base(tmp_path_factory) -> Path:
    """A tiny random Llama whose weights (std 0.06) let LoRA move attention onto the cue."""
    from scijudge.lm.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("base"), with_adapter=False, init_range=0.06,
                            closing_bias=False)["base"]


@pytest.fixture()
def world(tmp_path) -> dict[str, Path]:
    return write_world(tmp_path / "world")


# ------------------------------------------------------------------------------------------ a base scijudge did not build
# The distillation recipe was developed on a tiny Llama with a byte-level BPE tokenizer (no chat template, weights
# of std 0.02). This base differs in every one of those: a Metaspace BPE vocabulary trained here on other text,
# a chat template of its own, weights of std 0.035, another seed; and its rubric is keyed by one word, once.
FOREIGN_VERDICTS = {1: "awful", 2: "shaky", 3: "passable", 4: "convincing", 5: "outstanding"}
FOREIGN_FILLER = ("sample cohort baseline model estimate variance trial dose outcome cohort protocol figure table "
                  "appendix measurement error replication effect").split()
FOREIGN_SPEC = '''name = "review.verdict"
family = "likert"
description = "How good the reviewer says the work is."
output = "likert"
instructions = "Rate the work from 1 to 5 as the review judges it."

[scale]
min = 1
max = 5
step = 1

[[inputs]]
name = "answer"
description = "A short review."
'''


def _foreign_corpus() -> list[str]:
    import fractions
    import functools
    import inspect
    import statistics
    import string

    lines: list[str] = []
    for mod in (functools, string, statistics, fractions):
        for _, obj in inspect.getmembers(mod):
            doc = inspect.getdoc(obj)
            if doc:
                lines.extend(doc.splitlines())
    return [line for line in lines if line.strip()]


def build_foreign_base(folder: Path, seed: int = 7) -> Path:
    """A tiny random Llama built with transformers and tokenizers directly (none of scijudge's helpers)."""
    import torch
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    # SentencePiece-style decoding (as Llama 2 / Mistral tokenizers write it); a bare Metaspace decoder is not
    # one that the engine's grammar library (llguidance) can read
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    trainer = trainers.BpeTrainer(vocab_size=520, special_tokens=["<unk>", "<|s|>", "<|eot|>", "<|pad|>"],
                                  initial_alphabet=[chr(c) for c in range(32, 127)], show_progress=False)
    tok.train_from_iterator(_foreign_corpus(), trainer=trainer)
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<|s|>",
                                               eos_token="<|eot|>", pad_token="<|pad|>")
    fast.chat_template = ("{{ bos_token }}{% for m in messages %}### {{ m['role'] }}:\n{{ m['content'] }}<|eot|>\n"
                          "{% endfor %}{% if add_generation_prompt %}### assistant:\n{% endif %}")
    torch.manual_seed(seed)
    config = transformers.LlamaConfig(vocab_size=len(fast), hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, initializer_range=0.035,
                                      max_position_embeddings=4096, bos_token_id=fast.bos_token_id,
                                      eos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id)
    model = transformers.LlamaForCausalLM(config)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


def write_foreign_world(folder: Path, n: int = 150, seed: int = 3) -> dict[str, Path]:
    """Reviews of 3-5 filler sentences with one 'Verdict: <word>.' sentence at a random place; one label each."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    items, labels = [], []
    for i in range(n):
        level = 1 + i % 5
        sentences = [" ".join(rng.choice(FOREIGN_FILLER) for _ in range(rng.randint(4, 9))).capitalize() + "."
                     for _ in range(rng.randint(3, 5))]
        sentences.insert(rng.randrange(len(sentences) + 1), f"Verdict: {FOREIGN_VERDICTS[level]}.")
        items.append({"id": f"rev-{i:04d}", "answer": " ".join(sentences)})
        labels.append({"item_id": f"rev-{i:04d}", "judge": "review.verdict", "score": level, "annotator": "h1"})
    order = list(range(n))
    rng.shuffle(order)
    paths = {"spec": folder / "review.verdict.toml", "items": folder / "items.jsonl", "labels": folder / "labels.jsonl"}
    paths["spec"].write_text(FOREIGN_SPEC, encoding="utf-8")
    paths["items"].write_text("".join(json.dumps(items[k]) + "\n" for k in order), encoding="utf-8")
    paths["labels"].write_text("".join(json.dumps(labels[k]) + "\n" for k in order), encoding="utf-8")
    return paths


@pytest.fixture(scope="session")
def foreign_base(tmp_path_factory) -> Path:
    return build_foreign_base(tmp_path_factory.mktemp("foreign") / "base")
