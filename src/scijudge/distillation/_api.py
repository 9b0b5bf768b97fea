"""``distill``: train a LoRA student from a judge's own prompts, then judge the held-out split and compare."""

from __future__ import annotations

import math
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scijudge.data import Item
from scijudge.errors import InputError


@dataclass
class DistillResult:
    """What ``distill`` did: where the adapter and card are, the steps, the loss curve, the evaluation."""

    out: Path
    model: str  # the student's model string, ``hf:<out>``
    steps: int
    total_steps: int
    losses: list[float]
    interrupted: bool
    resumed_from: int | None
    card: Path | None = None
    evaluation: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    loss: dict[str, Any] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)  # "did not learn" findings, one line each (the CLI exits 1)


LOSS_DROP = 0.1
"""The training loss must fall by at least this fraction of its start, or the run is flagged as not learning."""


def loss_summary(start: float, curve: Sequence[float], points: int = 10) -> dict[str, Any]:
    """Loss at the start (before any training), at the end (mean of the last tenth of the steps) and the curve
    smoothed to ``points`` means of consecutive steps; ``fell``: the end is at least ``LOSS_DROP`` below the start."""
    n = len(curve)
    if n == 0:
        return {"start": start, "end": start, "smoothed": [], "fell": False}
    tail = max(1, n // 10)
    end = sum(curve[-tail:]) / tail
    k = min(points, n)
    bounds = [round(i * n / k) for i in range(k + 1)]
    smoothed = [round(sum(curve[a:b]) / (b - a), 6) for a, b in zip(bounds, bounds[1:]) if b > a]
    return {"start": round(start, 6), "end": round(end, 6), "smoothed": smoothed,
            "fell": bool(end <= (1 - LOSS_DROP) * start)}


def no_gain_flags(loss: dict[str, Any], evaluation: dict[str, Any]) -> list[str]:
    """One line per sign that the student did not learn: the loss did not fall, or its held-out agreement is not
    better than its base's (the paired interval of the difference includes 0, or lies below it)."""
    flags = []
    if loss and not loss.get("fell"):
        flags.append(f"the training loss did not fall ({loss['start']:.4f} at the start, {loss['end']:.4f} at the end)")
    gain = evaluation.get("gain")
    if gain:
        lo, hi = gain["ci"]
        if not (lo > 0 if math.isfinite(lo) else gain["diff"] > 0):  # no interval (--n-boot 0): the point decides
            # a positive point whose interval reaches 0 is not "no better": it is a gain not shown on these items
            said = ("is no better than its base" if gain["diff"] <= 0 else
                    "is not shown to be better than its base (its paired interval reaches 0)")
            flags.append(f"the student {said} on the held-out split (exact agreement "
                         f"{gain['diff']:+.3f} [{lo:+.3f}, {hi:+.3f}] paired, on {gain['n']} items)")
    return flags


# Provider prefixes of API model strings (litellm's, the common ones): such a --base names no weights to train.
_API_PROVIDERS = ("openai", "anthropic", "azure", "azure_ai", "gemini", "vertex_ai", "bedrock", "groq", "mistral",
                  "cohere", "together_ai", "deepseek", "openrouter", "xai", "fireworks_ai", "perplexity", "ollama",
                  "ollama_chat", "hosted_vllm", "litellm_proxy", "deepinfra", "anyscale", "cerebras", "sambanova")


def _base_folder(base: str | Path) -> Path:
    """The base model's local folder; one line when ``base`` is an API model, an adapter or not found."""
    from scijudge.errors import ModelError
    from scijudge.lm import parse_model_string

    text = str(base)
    provider = text.split("/", 1)[0] if "/" in text else ""
    try:
        ref = parse_model_string(text if text.startswith("hf:") else f"hf:{text}")
    except ModelError as exc:
        if provider in _API_PROVIDERS and not text.startswith("hf:"):
            raise InputError(f"{text} is an API model: LoRA distillation trains a local transformers model's "
                             "weights, so the base must be hf:<model folder or cached hub id>", field="base") from exc
        raise
    if ref.adapter is not None:
        raise InputError(f"{text} is a PEFT adapter; distil onto its base model ({ref.base}) instead",
                         field="base")
    return ref.base


_OUTPUTS = ("adapter_model.safetensors", "adapter_model.bin", "adapter_config.json", "card.json", "README.md")


def _clear_outputs(out_dir: Path) -> None:
    """Remove what an earlier distillation wrote in ``out_dir`` (and only that): a fresh start."""
    for name in _OUTPUTS:
        (out_dir / name).unlink(missing_ok=True)
    for name in ("checkpoint", "checkpoint.tmp", "checkpoint.old", "evaluation"):
        shutil.rmtree(out_dir / name, ignore_errors=True)


def distill(judge: Any, items: str | Path | Sequence[Item], *, base: str | Path, out: str | Path,
            labels: str | Path | None = None, teacher: str | Path | None = None, teacher_model: str | None = None,
            form: str = "decision", epochs: int = 10, lr: float = 5e-3, lr_search: bool = True, lora_r: int = 8,
            targets: Sequence[str] | None = None, split: float = 0.3, seed: int = 0, batch_size: int = 8,
            threads: int | None = None, device: str = "auto", gradient_checkpointing: bool = False,
            tokens_per_pass: int | None = None, checkpoint_every: int = 20, resume: bool = True,
            evaluate: bool = True, eval_mode: str | None = None, n_boot: int = 1000,
            on_step: Callable[[int, int, float], None] | None = None, stop_after_step: int | None = None) -> DistillResult:
    """Distil ``judge`` into a LoRA adapter on ``base``, written to ``out`` (usable as ``-m hf:<out>``).

    Args:
        judge: a judge name, spec path or ``JudgeSpec`` (a pointwise Likert judge with a whole-number scale).
        items: items file (JSONL) or items.
        labels: human labels (JSONL/CSV) for the judge: the training targets, and the evaluation reference.
        teacher: a run store of a stronger judge: its ``probs`` (decision form) or JSON answers (generated form)
            are the targets; ``teacher_model`` picks one model when the store holds several.
        form: "decision" (CE/KL on the level distribution at the answer position) or "generated".
        lr: the peak learning rate, or with ``lr_search`` the largest one the range test tries (lr, lr/10, ...).
        split: held-out fraction, by a hash of (seed, item id).
        threads: torch CPU threads (1 is fastest for tiny models on shared cores).
        tokens_per_pass: padded prompt tokens in one forward and backward pass (a batch runs in several, with the
            same gradients): what bounds memory (default ``TOKENS_PER_PASS``).
        resume: continue from ``out/checkpoint`` when it matches these settings and data (Ctrl-C keeps it).
        evaluate: judge the held-out split with the student, the base and the teacher, calibrate them paired.
        on_step: ``on_step(step, total, loss)`` after each step (a progress bar).
        stop_after_step: behave as if interrupted after this step (tests).
    """
    from scijudge.distillation import _train
    from scijudge.distillation._data import build_dataset, check_dataset, data_hash, encode_examples
    from scijudge.distillation.card import write_card
    from scijudge.judges import load_judge

    cfg = _train.TrainConfig(form=form, lora_r=lora_r, targets=tuple(targets or _train.DEFAULT_TARGETS), lr=lr,
                             lr_search=lr_search,
                             epochs=epochs, batch_size=batch_size, seed=seed, checkpoint_every=checkpoint_every,
                             gradient_checkpointing=gradient_checkpointing, device=device, threads=threads,
                             tokens_per_pass=_train.TOKENS_PER_PASS if tokens_per_pass is None else tokens_per_pass)
    cfg.check()
    out_dir = Path(out)
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError("must be a folder", file=out_dir, field="out")
    if not resume:
        _clear_outputs(out_dir)
    labels_path = Path(labels) if labels is not None else None
    teacher_path = Path(teacher) if teacher is not None else None
    # everything that can be checked without torch or the model is checked first (a typo costs no model load)
    if labels_path is None and teacher_path is None:
        raise InputError("give labels (human scores) or a teacher (a run store of a stronger judge)",
                         field="labels")
    for path, option in ((labels_path, "labels"), (teacher_path, "teacher")):
        if path is not None and not path.is_file():
            raise InputError(f"{option} file not found", file=path, field=option)
    base_dir = _base_folder(base)
    if isinstance(items, (str, Path)):
        from scijudge.data import load_items

        item_list, _ = load_items(items)
    else:
        item_list = list(items)
    spec_judge = load_judge(judge) if not hasattr(judge, "spec") else judge
    check_dataset(spec_judge, item_list, form=form, labels=labels_path, teacher=teacher_path,
                  teacher_model=teacher_model, held_out=split, seed=seed)
    torch, _, _ = _train.require_training()
    device_obj, _ = _train.pick_device(cfg, torch)
    tokenizer, model = _train.load_base(base_dir, device_obj)
    data = build_dataset(spec_judge, item_list, tokenizer, form=form, labels=labels_path, teacher=teacher_path,
                         teacher_model=teacher_model, held_out=split, seed=seed)
    encoded = encode_examples(tokenizer, data.train, data.levels, form)
    identity = {"data_hash": data_hash(data.train), "base": str(base_dir), "judge": spec_judge.name,
                "spec_hash": spec_judge.spec_hash}
    trained = _train.train(base_dir, encoded, out_dir, cfg, identity=identity, resume=resume,
                           stop_after_step=stop_after_step, on_step=on_step, loaded=(tokenizer, model),
                           device=device_obj)
    student = f"hf:{out_dir.resolve()}"
    result = DistillResult(out_dir, student, trained.steps, trained.total_steps, trained.losses, trained.interrupted,
                           trained.resumed_from, notes=list(data.notes))
    recipe = trained.extra.get("recipe", {})
    start = recipe.get("loss_before", trained.losses[0] if trained.losses else float("nan"))
    result.loss = loss_summary(float(start), trained.losses)
    if trained.interrupted:
        return result
    del model, tokenizer
    import gc

    gc.collect()  # the training model's reference cycles go before the student and the base are loaded to judge
    _train.release_memory()
    if trained.resumed_from is None or trained.resumed_from < trained.steps:
        shutil.rmtree(out_dir / "evaluation", ignore_errors=True)  # judged by an adapter that has changed since
    if evaluate:
        from scijudge.distillation._evaluate import evaluate as run_evaluation

        result.evaluation = run_evaluation(spec_judge.spec, data.held_out_items, out_dir, student=student,
                                           base=f"hf:{base_dir}", labels=labels_path, teacher=teacher_path,
                                           teacher_model=teacher_model, mode=eval_mode, n_boot=n_boot, seed=seed)
    result.flags = no_gain_flags(result.loss, result.evaluation)
    result.card = write_card(out_dir, _card(spec_judge, data, identity, base_dir, cfg, trained, result, recipe,
                                            split, seed))
    return result


def _card(spec_judge: Any, data: Any, identity: dict[str, Any], base_dir: Path, cfg: Any, trained: Any,
          result: DistillResult, recipe: dict[str, Any], split: float, seed: int) -> dict[str, Any]:
    """The student's card: what it was trained on (data hashes, the split), from what base, how, and how it did."""
    import hashlib

    from scijudge.distillation._data import data_hash
    from scijudge.distillation.card import base_record

    held_ids = [ex.id for ex in data.held_out]
    return {
        "judge": spec_judge.name, "spec_hash": spec_judge.spec_hash, "source": data.source,
        "data_hash": identity["data_hash"], "held_out_data_hash": data_hash(data.held_out),
        "split": {"seed": seed, "held_out_fraction": split, "train": len(data.train), "held_out": len(held_ids),
                  "held_out_ids_sha256": hashlib.sha256("\n".join(held_ids).encode()).hexdigest()},
        "levels": data.levels, "base": base_record(base_dir),
        "config": {**cfg.identity(), "gradient_checkpointing": cfg.gradient_checkpointing},
        "device": trained.device, "steps": trained.steps, "resumed_from": trained.resumed_from,
        "seconds": round(trained.seconds, 2), "loss": result.loss,
        "loss_curve": [round(x, 6) for x in trained.losses], "recipe": recipe, "trained": trained.extra.get("trained"),
        "evaluation": result.evaluation, "flags": result.flags, "notes": data.notes,
    }
