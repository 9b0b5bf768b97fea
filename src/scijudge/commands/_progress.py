"""Judging with a progress bar and printing the run summary table (shared by `judge` and `demo`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.table import Table

from scijudge.commands._console import console, out


@contextmanager
def progress_bar(show: bool) -> Iterator[Callable[[Any, Any], None]]:
    """A rich progress bar (rate, tokens, cost, abstentions) as the run's ``on_result`` callback; its total is
    the run's planned judgments, known from the first result on."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    with Progress(TextColumn("[bold]judging"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[rate]}"),
                  TimeElapsedColumn(), TimeRemainingColumn(), TextColumn("{task.fields[extra]}"),
                  console=console, disable=not show) as bar:
        task = bar.add_task("judge", total=None, rate="", extra="")

        def on_result(result: Any, summary: Any) -> None:
            elapsed = bar.tasks[0].elapsed or 1e-9
            cost = f" ${summary.cost:.4f}" if summary.cost_known else ""
            bar.update(task, advance=1, total=summary.planned, rate=f"{summary.judged / elapsed:.1f}/s",
                       extra=f"tok {summary.tokens_in + summary.tokens_out:,}{cost} abst {summary.abstained}")

        yield on_result


def print_summary(summary, run_path: Path) -> None:
    """The run summary table on stdout: counts, tokens, cost, time and abstention reasons."""
    from scijudge.redaction import redact
    from scijudge.report.text import fmt_cost

    table = Table(title=f"run store: {escape(str(run_path))}", show_header=False)
    for label, value in [
        ("judged now", summary.judged), ("ok", summary.ok), ("abstained", summary.abstained),
        ("already done (skipped)", summary.skipped_done),
        ("items changed since the last run (judged again)", summary.changed),
        *([("damaged rows in the store (judged again)", summary.damaged)] if summary.damaged else []),
        ("no answer (not stored; re-run to retry)", getattr(summary, "no_answer", 0)),
        ("not applicable (pairwise judge, one answer)", summary.not_applicable),
        ("tokens in/out", f"{summary.tokens_in:,} / {summary.tokens_out:,}"),
        ("cost (USD, estimated)", fmt_cost(summary.cost, summary.cost_known, summary.judged)),
        ("seconds", f"{summary.seconds:.1f}"),
    ]:
        table.add_row(label, str(value))
    for reason, count in summary.abstention_reasons.items():
        table.add_row(f"abstained: {escape(redact(str(reason)))}", str(count))
    out.print(table)


def quiet_local_model(model: str | None, progress: bool) -> None:
    """Without a progress bar (or ``--verbose``), a local model loads without its own bars and warnings."""
    from scijudge.lm import is_local_model

    if not progress and model is not None and is_local_model(model):
        quiet_local_models()  # no "Loading weights" bar, no transformers FutureWarning


def quiet_local_models() -> None:
    """No progress bars and no deprecation chatter from the libraries that load local (hf:) models: transformers'
    "Loading weights" bar and its FutureWarnings, the hub's download bars. For --no-progress and the demo."""
    import os
    import warnings

    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"(transformers|peft|accelerate|huggingface_hub)\b")
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:  # no local extra: nothing to quiet
        return
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
