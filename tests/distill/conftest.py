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
