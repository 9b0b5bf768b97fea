"""CLI command `scijudge optimize`, as a plain function the typer app registers."""

from __future__ import annotations

import contextlib
import io
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer


@contextlib.contextmanager
def _quiet(enabled: bool) -> Iterator[None]:
    """Hide the optimizers' progress bars, prints and INFO logs (errors still surface)."""
    if not enabled:
        yield
        return
    logger = logging.getLogger("dspy")
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            yield
    finally:
        logger.setLevel(level)


def _print_result(result: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table("test statistic", "base judge", "optimized", title=f"{result.spec.name} · {result.recipe.name}")
    for key in ("score", "exact", "within1", "mae", "kappa_w", "accuracy", "balanced_accuracy", "coverage"):
        if key in result.before or key in result.after:
            fmt = lambda v: "–" if v is None else f"{v:.3f}"
            table.add_row(key, fmt(result.before.get(key)), fmt(result.after.get(key)))
    console.print(table)
    b = result.budget
    console.print(f"LM calls: {b['lm_calls']} ({b['optimization_lm_calls']} optimizing, {b['evaluation_lm_calls']} "
                  f"testing, {b['cached_calls']} from cache)" + (f"; cost ${b['cost_usd']:.4f}" if b["cost_usd"] else ""),
                  highlight=False)
    for note in result.notes:
        console.print(f"[yellow]note:[/] {note}", highlight=False)
    if result.spec_path:
        console.print(f"optimized judge: {result.spec_path}  (use it as --judge {result.spec_path})", highlight=False)


def optimize_cmd(
    judge: Annotated[str, typer.Option("--judge", "-j", help="Judge to optimize: shipped name or spec path.")],
    items: Annotated[Path, typer.Option("--items", "-i", help="Items in canonical JSONL.")],
    labels: Annotated[Path, typer.Option("--labels", "-l", help="Human labels: JSONL or CSV.")],
    model: Annotated[list[str], typer.Option("--model", "-m", help="Model the judge runs on; repeat to compare models.")],
    recipe: Annotated[list[str], typer.Option("--recipe", "-r", help="Recipe file (optimizers/mipro.toml) or shipped name (mipro); repeat to compare.")],
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Optimized spec (.toml) or a folder; experiments write a table and a plot there.")] = None,
    api_base: Annotated[str | None, typer.Option(help="OpenAI-compatible server URL, e.g. http://localhost:8000/v1.")] = None,
    prompt_model: Annotated[str | None, typer.Option(help="Model for the optimizer's proposal/reflection calls (default: --model).")] = None,
    track: Annotated[str | None, typer.Option(help="Experiment tracking: 'mlflow' (needs the 'track' extra).")] = None,
    cache: Annotated[bool, typer.Option(help="Use DSPy's response cache (a re-run costs nothing).")] = True,
    verbose: Annotated[bool, typer.Option(help="Show the optimizers' own progress output.")] = False,
) -> Any:
    """Optimize a judge's instructions and demos against human labels; report held-out agreement before/after.

    Example: scijudge optimize --judge yescieval.qa.correctness --items items.jsonl --labels labels.jsonl --model openai/gpt-4o-mini --recipe optimizers/mipro.toml --out optimized.toml
    """
    from scijudge.optimization._experiment import run_experiment
    from scijudge.optimization._recipes import resolve_recipe
    from scijudge.lm import make_lm
    from scijudge.optimization import optimize

    recipes = [resolve_recipe(r) for r in recipe]  # recipe errors surface before any model is built
    prompt_lm = make_lm(prompt_model, api_base=api_base, cache=cache) if prompt_model else None
    if len(recipes) == 1 and len(model) == 1:
        lm = make_lm(model[0], api_base=api_base, cache=cache)
        with _quiet(not verbose):
            result = optimize(judge, items, labels, lm, recipes[0], prompt_lm=prompt_lm, out=out, track=track)
        _print_result(result)
        return result
    if out is None:
        raise typer.BadParameter("comparing several recipes or models needs --out (a folder)", param_hint="--out")
    with _quiet(not verbose):
        frame = run_experiment(recipes, [make_lm(m, api_base=api_base, cache=cache) for m in model], judge=judge,
                               items=items, labels=labels, prompt_lm=prompt_lm, out=out, track=track)
    columns = [c for c in ("recipe", "model", "lm_calls", "exact_before", "exact_after", "score_before", "score_after",
                           "stopped") if c in frame.columns]
    sys.stdout.write(frame[columns].to_string(index=False) + "\n")
    sys.stdout.write(f"table: {Path(out) / 'experiment.csv'}  plot: {Path(out) / 'experiment.png'}\n")
    return frame
