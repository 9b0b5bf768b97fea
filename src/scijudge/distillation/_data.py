"""Training examples from the judge's own prompt: items + human labels or a teacher's stored judgments.

The student sees exactly what it will be judged with: the messages come from the judge's chain (the same
``chain.format`` of the judge's signature, demos and ``inputs_for(item)``; in decision mode the prompt that
``scijudge.chain.decision`` builds, closed by its rating-only line), rendered with the base tokenizer's chat
template and encoded as the local engine encodes a chat (``add_generation_prompt``, no extra special tokens).
Decision-form targets are distributions over the scale's levels: a human score one-hot (several annotators:
their spread), or the teacher's stored ``probs``; generated-form targets are the teacher's JSON answer.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scijudge.data import Item
from scijudge.errors import InputError


def decision_mode_available() -> bool:
    """Whether this scijudge has decision mode (``load_judge(..., mode="decision")``, issue 25)."""
    import importlib.util

    return importlib.util.find_spec("scijudge.chain.decision") is not None


@dataclass
class Example:
    """One training example: the rendered prompt, its target (decision) or completion (generated)."""

    id: str
    prompt: str
    target: list[float] | None = None
    completion: str | None = None

    def canonical(self) -> dict[str, Any]:
        d: dict[str, Any] = {"id": self.id, "prompt": self.prompt}
        if self.target is not None:
            d["target"] = [round(x, 8) for x in self.target]
        if self.completion is not None:
            d["completion"] = self.completion
        return d


@dataclass
class Dataset:
    """Examples split into train / held-out, with the levels and where the targets came from."""

    train: list[Example]
    held_out: list[Example]
    levels: list[str]
    source: str
    held_out_items: list[Item] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def data_hash(examples: Sequence[Example]) -> str:
    """sha256 of the canonical JSON lines of the examples (id, prompt, target or completion)."""
    h = hashlib.sha256()
    for ex in examples:
        h.update(json.dumps(ex.canonical(), sort_keys=True, ensure_ascii=False).encode("utf-8") + b"\n")
    return h.hexdigest()


def split_ids(ids: Sequence[str], *, seed: int, held_out: float) -> tuple[list[str], list[str]]:
    """Deterministic split by hashing (seed, id): an item's side does not change when others are added."""
    if not 0.0 < held_out < 1.0:
        raise InputError(f"the held-out fraction must be between 0 and 1 (got {held_out})", field="split")

    def key(i: str) -> float:
        return int(hashlib.sha256(f"{seed}:{i}".encode()).hexdigest()[:12], 16) / 16 ** 12

    test = sorted(i for i in ids if key(i) < held_out)
    train = sorted(i for i in ids if key(i) >= held_out)
    return train, test


def scale_levels(judge: Any) -> list[str]:
    """The judge's rating levels as the model writes them ("1" .. "5"); only whole-number Likert scales."""
    from scijudge.vocab import scale_of

    spec = judge.spec
    if spec.family != "likert":
        raise InputError(f"distill trains pointwise Likert judges; {spec.name!r} is a {spec.family} judge",
                         file=spec.source, field="judge")
    scale = scale_of(spec)
    if not scale.integral:
        raise InputError(f"distill needs a whole-number scale; {spec.name!r} has steps of {scale.step:g}",
                         file=spec.source, field="scale")
    return [f"{v:g}" for v in scale.levels()]


def judge_messages(judge: Any, item: Item, levels: list[str], *, decision: bool) -> list[dict[str, str]]:
    """The chat messages the judge sends for ``item`` (system first), as the local engine templates them."""
    from scijudge.chain.chain import to_lm15

    inputs = judge.inputs_for(item, "")
    native = getattr(getattr(judge, "preset", None), "decision_messages", None)
    if decision and callable(native):  # a prompt preset decides inside its native answer (prefilled)
        system, chat = to_lm15(native(judge.spec, inputs, prefill=True))
    elif decision and decision_mode_available():
        from scijudge.chain.decision import decision_messages, rating_only_instruction

        system, chat = decision_messages(judge.chain, judge.signature, judge.demos, inputs,
                                         rating_only_instruction(levels, "rating"))
    else:
        present = {k: v for k, v in inputs.items() if v not in (None, "")}
        signature = judge.signature
        for name in [n for n in signature.input_fields if n not in present]:
            signature = signature.delete(name)
        system, chat = to_lm15(judge.chain.format(signature, judge.demos, present))
    messages = [{"role": "system", "content": system}] if system is not None else []
    for message in chat:
        messages.append({"role": message.role, "content": "".join(getattr(p, "text", "") or "" for p in message.parts)})
    return messages


def render(tokenizer: Any, messages: list[dict[str, str]]) -> str:
    """The chat-template text up to where the assistant answers (the engine's rendering, system folded into the
    first user message for templates without a system role; a final assistant message is a prefill)."""
    if messages and messages[-1]["role"] == "assistant":
        return render(tokenizer, messages[:-1]) + messages[-1]["content"]
    if not getattr(tokenizer, "chat_template", None):
        return "".join(f"{m['role'].capitalize()}: {m['content']}\n\n" for m in messages) + "Assistant:"
    try:
        return str(tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))
    except Exception:
        from scijudge.lm import fold_system

        return str(tokenizer.apply_chat_template(fold_system(messages), tokenize=False, add_generation_prompt=True))


def encode(tokenizer: Any, text: str) -> list[int]:
    """Token ids of a rendered chat, as the engine encodes it (special tokens come from the template)."""
    return list(tokenizer(text, add_special_tokens=not getattr(tokenizer, "chat_template", None))["input_ids"])


def level_token_ids(tokenizer: Any, prompt: str, levels: Sequence[str]) -> list[int]:
    """The one token each level adds after ``prompt``; InputError when a level is not a single token there."""
    head = encode(tokenizer, prompt)
    ids = []
    for level in levels:
        full = encode(tokenizer, prompt + level)
        if full[: len(head)] != head or len(full) != len(head) + 1:
            raise InputError(f"level {level!r} is not one token after the judge's prompt with this tokenizer; "
                             "decision-form distillation needs single-token levels (use the generated form)",
                             field="base")
        ids.append(full[-1])
    if len(set(ids)) != len(ids):
        raise InputError(f"levels {list(levels)} share tokens {ids}", field="base")
    return ids


def label_targets(labels_path: Path, judge_name: str, levels: list[str]) -> dict[str, list[float]]:
    """Item id -> target distribution from human labels for this judge (several annotators: their spread)."""
    from scijudge.labels import load_labels

    counts: dict[str, list[float]] = {}
    for label in load_labels(labels_path):
        if label.judge != judge_name or label.part or label.score is None:
            continue
        text = f"{label.score:g}"
        if text not in levels:
            file, line = label.origin or (str(labels_path), None)
            raise InputError(f"score {label.score:g} is not a level of {judge_name} ({', '.join(levels)})",
                             file=file, line=line, field="score")
        row = counts.setdefault(label.item_id, [0.0] * len(levels))
        row[levels.index(text)] += 1.0
    return {k: [c / sum(v) for c in v] for k, v in counts.items()}


def teacher_targets(run_path: Path, judge_name: str, levels: list[str], model: str | None,
                    notes: list[str]) -> tuple[dict[str, list[float]], dict[str, str], str]:
    """Item id -> (target distribution, JSON answer) from a teacher's stored judgments; the teacher's model."""
    from scijudge.run.store import Run

    if not run_path.is_file():
        raise InputError("teacher run store not found", file=run_path, field="teacher")
    store = Run(run_path, create=False)
    try:
        rows = [r for r in store.rows() if r["judge"] == judge_name and not r["part"]]
    finally:
        store.close()
    models = sorted({r["model"] for r in rows})
    if model is not None:
        rows = [r for r in rows if r["model"] == model]
    elif len(models) > 1:
        raise InputError(f"the teacher run holds judgments of several models ({', '.join(models)}); choose one "
                         "with teacher_model", file=run_path, field="teacher_model")
    if not rows:
        raise InputError(f"no judgments of {judge_name!r}" + (f" by {model}" if model else "") + " in the teacher run",
                         file=run_path, field="judge")
    dists: dict[str, list[float]] = {}
    answers: dict[str, str] = {}
    no_probs = abstained = 0
    for r in rows:
        if r["status"] != "ok" or r["score"] is None:
            abstained += 1
            continue
        probs = r.get("probs") or {}
        if probs:
            row = [float(probs.get(level, probs.get(str(float(level)), 0.0)) or 0.0) for level in levels]
            total = sum(row)
            if total <= 0:
                no_probs += 1
                probs = {}
            else:
                row = [x / total for x in row]
        if not probs:
            score = f"{round(float(r['score'])):g}"
            if score not in levels:
                continue
            row = [1.0 if level == score else 0.0 for level in levels]
            no_probs += 1
        dists[r["item_id"]] = row
        result = {k: v for k, v in (r.get("result") or {}).items() if k not in ("expected_rating", "mode")}
        answers[r["item_id"]] = json.dumps(result, ensure_ascii=False)
    if abstained:
        notes.append(f"{abstained} teacher judgment(s) were abstentions and give no training target")
    if no_probs:
        notes.append(f"{no_probs} teacher judgment(s) had no probabilities: their score is the target (one-hot)")
    return dists, answers, (model or (models[0] if models else ""))


def _targets(judge: Any, items: list[Item], *, form: str, labels: Path | None, teacher: Path | None,
             teacher_model: str | None, held_out: float, seed: int) -> dict[str, Any]:
    """The targets and the split, from the judge, items and labels or teacher alone (no tokenizer, no model)."""
    levels = scale_levels(judge)
    notes: list[str] = []
    answers: dict[str, str] = {}
    if teacher is not None:
        targets, answers, model = teacher_targets(teacher, judge.name, levels, teacher_model, notes)
        source = f"teacher:{teacher}" + (f" ({model})" if model else "")
    elif labels is not None:
        if form == "generated":
            raise InputError("the generated form trains on a teacher's answers: give a teacher", field="form")
        targets = label_targets(labels, judge.name, levels)
        source = f"labels:{labels}"
    else:
        raise InputError("give labels (human scores) or a teacher (a run store of a stronger judge)",
                         field="labels")
    by_id = {item.id: item for item in items}
    usable = sorted(i for i in targets if i in by_id)
    if len(usable) < 10:
        raise InputError(f"only {len(usable)} item(s) have both an item and a target for {judge.name!r}; "
                         "distillation needs at least 10", field="items")
    train_ids, test_ids = split_ids(usable, seed=seed, held_out=held_out)
    if not train_ids or not test_ids:
        raise InputError(f"the split left {len(train_ids)} train and {len(test_ids)} held-out items; change the split",
                         field="split")
    return {"levels": levels, "notes": notes, "answers": answers, "targets": targets, "source": source,
            "by_id": by_id, "train_ids": train_ids, "test_ids": test_ids}


def check_dataset(judge: Any, items: list[Item], *, form: str, labels: Path | None, teacher: Path | None,
                  teacher_model: str | None, held_out: float, seed: int) -> None:
    """Every check of ``build_dataset`` that needs no tokenizer: run before the model is loaded."""
    _targets(judge, items, form=form, labels=labels, teacher=teacher, teacher_model=teacher_model,
             held_out=held_out, seed=seed)


def build_dataset(judge: Any, items: list[Item], tokenizer: Any, *, form: str, labels: Path | None,
                  teacher: Path | None, teacher_model: str | None, held_out: float, seed: int) -> Dataset:
    """Examples for every item that has a target, split into train and held-out by a hash of (seed, id)."""
    t = _targets(judge, items, form=form, labels=labels, teacher=teacher, teacher_model=teacher_model,
                 held_out=held_out, seed=seed)
    levels, targets, answers, by_id = t["levels"], t["targets"], t["answers"], t["by_id"]
    decision = form == "decision"

    def example(item_id: str) -> Example:
        prompt = render(tokenizer, judge_messages(judge, by_id[item_id], levels, decision=decision))
        if decision:
            return Example(item_id, prompt, target=targets[item_id])
        return Example(item_id, prompt, completion=answers[item_id])

    return Dataset([example(i) for i in t["train_ids"]], [example(i) for i in t["test_ids"]], levels, t["source"],
                   [by_id[i] for i in t["test_ids"]], t["notes"])


def encode_examples(tokenizer: Any, examples: Sequence[Example], levels: list[str], form: str) -> Any:
    """Token ids (and level ids or completion labels) of the examples, for the training loop."""
    from scijudge.distillation._train import Encoded

    if form == "decision":
        level_ids = level_token_ids(tokenizer, examples[0].prompt, levels)
        return Encoded([encode(tokenizer, ex.prompt) for ex in examples],
                       targets=[list(ex.target or []) for ex in examples], level_ids=level_ids)
    ids, labels = [], []
    for ex in examples:
        head = encode(tokenizer, ex.prompt)
        full = encode(tokenizer, ex.prompt + (ex.completion or "")) + [tokenizer.eos_token_id]
        if full[: len(head)] != head:
            raise InputError(f"item {ex.id!r}: the prompt's tokens change when the answer is appended", field="base")
        ids.append(full)
        labels.append([-100] * len(head) + full[len(head):])
    return Encoded(ids, labels=labels)
