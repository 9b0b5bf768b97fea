"""CLI command `scijudge demo`: the offline end-to-end run on the bundled example (tiny random model by default)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from scijudge.commands._console import console, out
from scijudge.commands._progress import print_summary, progress_bar
from scijudge.errors import ScijudgeError


def demo_cmd(
    model: Annotated[str | None, typer.Option(
        "--model", "-m", help="Judge with this model instead of the tiny random one (hf:..., openai/..., ...).")] = None,
    api_base: Annotated[str | None, typer.Option(help="OpenAI-compatible server URL for --model.")] = None,
    judge: Annotated[list[str], typer.Option(
        "--judge", "-j", help="Judges to "
                              "run.")] = ["yescieval.qa.correctness", "yescieval.qa.conciseness", "yescieval.qa.readability"],  # noqa: B006
    items: Annotated[Path | None, typer.Option(help="Items to judge (default: the bundled example dataset).")] = None,
    run: Annotated[Path, typer.Option(help="Run store to write.")] = Path("runs/demo.sqlite"),
    workdir: Annotated[Path, typer.Option(help="Where the tiny model is built.")] = Path("runs/tiny-model"),
    concurrency: Annotated[int, typer.Option(min=1, help="Judgments in flight (the local engine batches them).")] = 8,
    progress: Annotated[bool, typer.Option(help="Show a progress bar.")] = True,
) -> None:
    """The offline main job: judge the bundled example dataset end to end and print a summary.

    With no --model it builds a tiny randomly initialised Llama-style model and LoRA adapter on this machine
    (no network) and runs the whole path through it: constrained JSON, dynamic batching, the fallback chain,
    the run store. Its scores are meaningless; the point is that every part runs.

    Example: scijudge demo   (offline; with an API model instead: --model openai/gpt-4o-mini)
    """
    from scijudge.data import load_items
    from scijudge.judges.build import build_judge
    from scijudge.lm import make_lm
    from scijudge.run.store import Run
    from scijudge.spec.judge_spec import resolve_judges

    from scijudge.commands._progress import quiet_local_models

    items_path = items or _bundled("datasets/yescieval_example/items.jsonl")
    loaded, _ = load_items(items_path)  # the judges and items are checked before any model is built or loaded
    specs = resolve_judges(judge)
    if run.exists():  # a file that is not a run store is refused before any model is built
        from scijudge.run._open import check_header

        check_header(run, allow_empty=True)
    tiny = model is None
    if tiny or not progress:  # the demo's own output is the point (and --no-progress means no bars at all)
        quiet_local_models()
    if tiny:
        from scijudge.lm.tiny import build_tiny_model

        console.print(f"building a tiny random Llama model + LoRA adapter in {workdir} (no download) ...")
        paths = build_tiny_model(workdir)
        model = f"hf:{paths['adapter']}"
    assert model is not None
    lm = make_lm(model, api_base=api_base, max_tokens=160 if tiny else None)
    judges = [build_judge(spec, lm=lm, rating_probs=tiny) for spec in specs]
    with Run(run) as store:  # closed: SQLite folds its -wal into the store, which is then one whole file
        store.set_meta(items=str(items_path), judges=[s.name for s in specs], model=model, demo=True)
        from scijudge.run.api import judge_items

        with progress_bar(progress) as on_result:
            summary = judge_items(loaded, judges, store, concurrency=concurrency, on_result=on_result)
        print_summary(summary, run)
        frame = store.to_pandas()
        table = Table("judge", "judged", "ok", "abstained", "mean score", title="per judge (this run store)")
        for name, group in frame.groupby("judge"):
            ok = group[group.status == "ok"]
            table.add_row(name, str(len(group)), str(len(ok)), str(len(group) - len(ok)),
                          f"{ok.score.mean():.2f}" if len(ok) else "-")
    out.print(table)
    if tiny:
        out.print("[bold yellow]These scores come from a tiny model with RANDOM weights: they are meaningless.[/] "
                  "They show that the whole path runs. For real judgments use --model hf:/path/to/adapter "
                  "(e.g. a YESciEval LoRA judge) or an API model such as --model openai/gpt-4o-mini.")


def _bundled(relative: str) -> Path:
    """A data file shipped in the wheel (scijudge/_data) or found in a source checkout."""
    from scijudge._resources import shipped_path

    found = shipped_path(relative)
    if found is not None:
        return found
    raise ScijudgeError(f"bundled file {relative} not found in this installation")
