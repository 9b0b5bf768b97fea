"""CLI command `scijudge robustness`: how much judges drop perturbed answers, from run stores alone."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from scijudge.commands._console import plural
from scijudge.errors import InputError

_ROBUSTNESS_COLUMNS = ("key", "item_id", "judge", "part", "family", "spec_hash", "model", "endpoint", "input_hash",
                       "decoding", "status", "score", "verdict", "confidence", "result", "created_at", "current")


# what each count of ``RobustnessResult.excluded`` is, said in full (singular, plural, the rest of the sentence)
_LEFT_OUT = {
    "abstained_or_no_score": ("variant judgment", "variant judgments", "abstained or without a score"),
    "unchanged": ("variant", "variants", "with the same text as the original (nothing was perturbed)"),
    "no_original": ("variant judgment", "variant judgments", "whose original the same model and judge did not "
                    "judge"),
    "off_target": ("judgment", "judgments", "of variants made for another judge's rubric (off target: a "
                   "perturbation is scored only by the judge whose rubric it targets)"),
}


def robustness_cmd(
    runs: Annotated[list[Path], typer.Argument(help="Run stores holding judgments of originals and their variants.")],
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Folder for robustness.csv and robustness.html.")] = None,
    n_boot: Annotated[int, typer.Option(help="Bootstrap resamples of original items (0: no intervals).")] = 1000,
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap resampling.")] = 0,
) -> None:
    """Robustness to perturbed answers per model and judge (and pooled per model): drop, P(original > variant), AUC.

    Needs no human labels: variants come from `scijudge perturb` ids or from imported `variant_of`/`level`.

    Example: scijudge robustness runs/released.sqlite --out robustness/   (runs/released.sqlite from: scijudge perturb datasets/yescieval_example/items.jsonl --level extreme --out perturbed.jsonl; scijudge judge perturbed.jsonl -j yescieval.qa.correctness -m openai/gpt-4o-mini --run runs/released.sqlite)
    """
    if n_boot < 0:
        raise InputError(f"--n-boot must be 0 (no intervals) or more, got {n_boot}", field="n_boot")
    from scijudge.metrics.frames import Judgments, named_by_path
    from scijudge.metrics.robustness import robustness_table
    from scijudge.report.robustness import write_robustness
    from scijudge.report.text import print_frame

    if not runs:
        raise InputError("give at least one run store", field="runs")
    if out is not None and out.exists() and not out.is_dir():  # before reading anything
        raise InputError(f"is a folder for robustness.csv and robustness.html, but {out} is a file", field="out")
    with named_by_path(list(runs)):
        read = Judgments.read(list(runs), columns=_ROBUSTNESS_COLUMNS)  # not the attempt logs, probs or free text
        result = robustness_table(read.frame, n_boot=n_boot, seed=seed)
    if out is not None:  # files first: a closed pipe (| head) must not lose them
        paths = write_robustness(result, out, inputs=runs)
        typer.echo(f"wrote {paths['csv']} and {paths['html']}", err=True)
    left = "; ".join(f"{plural(v, _LEFT_OUT[k][0], _LEFT_OUT[k][1])} {_LEFT_OUT[k][2]}" if k in _LEFT_OUT else
                     f"{k.replace('_', ' ')} {v}" for k, v in result.excluded.items() if v)
    typer.echo(f"left out: {left or 'nothing'}", err=True)
    for note in result.notes:
        typer.echo(f"note: {note}", err=True)
    print_frame(result.table, title="Robustness (drop = original − variant; judge * pools a model's judges)")
