"""CLI command `scijudge distill`: train a LoRA student of a judge, then compare it with its base and teacher."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from scijudge.errors import InputError

EXIT_INTERRUPTED = 130
EXIT_NO_GAIN = 1


def distill_cmd(
    judge: Annotated[str, typer.Option("--judge", "-j", help="The judge to distil: a shipped name or a spec file (pointwise Likert).")],
    items: Annotated[Path, typer.Option("--items", help="Items (JSONL) the judge reads.")],
    base: Annotated[str, typer.Option("--base", help="The student's base model: hf:<folder or cached hub id>.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for the adapter (load it as -m hf:OUT), card, checkpoint and evaluation.")],
    labels: Annotated[Path | None, typer.Option("--labels", "-l", help="Human labels (JSONL/CSV): the targets (and the evaluation reference).")] = None,
    teacher: Annotated[Path | None, typer.Option("--teacher", help="Run store of a stronger judge: its probabilities (or answers) are the targets.")] = None,
    teacher_model: Annotated[str | None, typer.Option("--teacher-model", help="The teacher's model, when the run store holds several.")] = None,
    form: Annotated[str, typer.Option("--form", help="decision (level distribution at the answer position) or generated (the teacher's JSON answer).")] = "decision",
    epochs: Annotated[int, typer.Option("--epochs", help="Passes over the training split.")] = 10,
    lr: Annotated[float, typer.Option("--lr", help="Largest peak learning rate the range test tries (AdamW, 10% warmup, linear decay).")] = 5e-3,
    lr_search: Annotated[bool, typer.Option("--lr-search/--no-lr-search", help="Pick the peak LR by a short range test on the first steps (--no-lr-search: use --lr as is).")] = True,
    lora_r: Annotated[int, typer.Option("--lora-r", help="LoRA rank (alpha = 2 r).")] = 8,
    targets: Annotated[str | None, typer.Option("--targets", help="Comma-separated modules to adapt (default: attention and MLP projections).")] = None,
    split: Annotated[float, typer.Option("--split", help="Held-out fraction (by a hash of seed and item id).")] = 0.3,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the split, the LoRA init and the data order.")] = 0,
    batch_size: Annotated[int, typer.Option("--batch-size", help="Examples per step.")] = 8,
    threads: Annotated[int | None, typer.Option("--threads", help="torch CPU threads (1 is fastest for small models on shared cores).")] = None,
    device: Annotated[str, typer.Option("--device", help="auto, cpu or cuda (bf16 on CUDA).")] = "auto",
    gradient_checkpointing: Annotated[bool, typer.Option("--gradient-checkpointing", help="Recompute activations in the backward pass (less memory).")] = False,
    tokens_per_pass: Annotated[int | None, typer.Option("--tokens-per-pass", help="Padded prompt tokens in one forward/backward pass: a batch runs in passes with the same gradients; lower it to use less memory (default 256).")] = None,
    fresh: Annotated[bool, typer.Option("--fresh", help="Ignore a checkpoint in OUT and start again.")] = False,
    evaluate: Annotated[bool, typer.Option("--evaluate/--no-evaluate", help="Judge the held-out split with student, base and teacher and calibrate them paired.")] = True,
    n_boot: Annotated[int, typer.Option("--n-boot", help="Bootstrap resamples for the evaluation's intervals.")] = 1000,
    allow_no_gain: Annotated[bool, typer.Option("--allow-no-gain", help="Exit 0 even when the student did not learn (loss did not fall, or not shown better than its base).")] = False,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Show a progress bar.")] = True,
) -> Any:
    """Distil a judge into a small local LoRA judge, from human labels or a teacher's stored judgments.

    The student trains on the judge's own prompts; the held-out split is then judged by the student, its base
    and the teacher and compared with calibrate (paired), so a student worse than its base is reported as such.
    The level tokens' rows of the output layer are trained beside the LoRA (started from a linear probe), and a
    short range test on the first steps picks the learning rate (--lr is the largest it tries). A student whose
    training loss did not fall, or whose held-out agreement is not better than its base's (paired interval
    including 0), is flagged in one line. Ctrl-C keeps the last checkpoint: run the same command again to resume.
    Exit codes: 0 done, 1 the student did not learn (unless --allow-no-gain), 2 bad input, 130 interrupted.

    Example: scijudge distill --judge yescieval.qa.correctness --items datasets/yescieval_example/items.jsonl --labels datasets/yescieval_example/labels.jsonl --base hf:runs/tiny-model/base --out students/correctness --epochs 2   (after: scijudge demo --tiny; a random tiny base learns nothing from 8 items and says so, exit 1: for a real student give --base hf:smollm2 or your own model folder, on a GPU)
    """
    if n_boot < 0:
        raise InputError(f"--n-boot must be 0 (no intervals) or more, got {n_boot}", field="n_boot")
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from scijudge.commands._console import console
    from scijudge.commands._progress import quiet_local_model
    from scijudge.distillation import distill

    quiet_local_model(base, progress)  # --no-progress: no loading bars or deprecation chatter, as for judge

    modules = [t.strip() for t in targets.split(",") if t.strip()] if targets else None
    bar = Progress(TextColumn("[bold]distilling"), BarColumn(), MofNCompleteColumn(), TextColumn("loss {task.fields[loss]}"),
                   TimeElapsedColumn(), TimeRemainingColumn(), console=console, disable=not progress)
    tasks: list = []  # the bar appears with the first training step: an input error before it is one line alone

    def on_step(step: int, total: int, loss: float) -> None:
        if not tasks:
            bar.start()
            tasks.append(bar.add_task("distill", total=None, loss=""))
        bar.update(tasks[0], completed=step, total=total, loss=f"{loss:.4f}")

    try:
        result = distill(judge, items, base=base, out=out, labels=labels, teacher=teacher, teacher_model=teacher_model,
                         form=form, epochs=epochs, lr=lr, lr_search=lr_search, lora_r=lora_r, targets=modules, split=split, seed=seed,
                         batch_size=batch_size, threads=threads, device=device,
                         gradient_checkpointing=gradient_checkpointing, tokens_per_pass=tokens_per_pass,
                         resume=not fresh, evaluate=evaluate,
                         n_boot=n_boot, on_step=on_step)
    finally:
        if tasks:
            bar.stop()
    if result.interrupted:
        console.print(f"interrupted at step {result.steps} of {result.total_steps}; the checkpoint is in "
                      f"{out / 'checkpoint'}: run the same command again to resume", highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_INTERRUPTED)
    _print_result(result)
    if result.flags and not allow_no_gain:
        raise typer.Exit(EXIT_NO_GAIN)


def _print_result(result: Any) -> None:
    """Where the adapter is, the loss, the held-out agreement of student, base and teacher, and what did not learn."""
    from scijudge.commands._console import console, out as stdout

    if result.resumed_from is not None:
        stdout.print(f"resumed from step {result.resumed_from}", highlight=False)
    stdout.print(f"adapter: {result.out} (use -m {result.model}); {result.steps} steps; card: {result.card}",
                 highlight=False, soft_wrap=True)
    loss = result.loss
    if loss:
        stdout.print(f"training loss: {loss['start']:.4f} at the start, {loss['end']:.4f} at the end (smoothed: "
                     f"{' '.join(f'{x:.3f}' for x in loss['smoothed'])})", highlight=False, soft_wrap=True)
    exact = result.evaluation.get("exact_agreement", {})
    for name, row in exact.items():
        stdout.print(f"held-out exact agreement, {name}: {row['value']:.3f} [{row['ci'][0]:.3f}, {row['ci'][1]:.3f}] "
                     f"on {row['n']} items", highlight=False)
    gain = result.evaluation.get("gain")
    if gain:
        stdout.print(f"student minus base: {gain['diff']:+.3f} [{gain['ci'][0]:+.3f}, {gain['ci'][1]:+.3f}] paired, on "
                     f"{gain['n']} items", highlight=False)
    if result.evaluation.get("warning"):
        console.print(f"[yellow]warning:[/] {result.evaluation['warning']}", highlight=False)
    for note in [*result.notes, *result.evaluation.get("notes", [])]:  # the data's, then the evaluation's
        console.print(f"note: {note}", highlight=False, soft_wrap=True)
    for flag in result.flags:
        console.print(f"[red]did not learn:[/] {flag}", highlight=False, soft_wrap=True)
