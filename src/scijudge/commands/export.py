"""CLI command `scijudge export`: a run store's judgments as JSONL or CSV."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from scijudge.commands._console import out


def export_cmd(
    run: Annotated[Path, typer.Argument(help="Run store to export.")],
    format: Annotated[str, typer.Option("--format", "-f", help="jsonl or csv.")] = "jsonl",
    output: Annotated[Path | None, typer.Option("--out", "-o", help="Output file (default: next to the run).")] = None,
    history: Annotated[bool, typer.Option(
        help="Also export judgments superseded by a newer one (column 'current' tells them apart).")] = False,
    to: Annotated[str | None, typer.Option("--to", help="mlflow: log the judgments as MLflow assessments (jsonl/csv: as --format).")] = None,
    tracking_uri: Annotated[str | None, typer.Option(help="MLflow tracking URI (with --to mlflow).")] = None,
    experiment: Annotated[str | None, typer.Option(help="MLflow experiment name (with --to mlflow).")] = None,
) -> None:
    """Export the current judgment of every (item, judge, part, model, endpoint) of a run store to JSONL or CSV.

    With --to mlflow --tracking-uri URI --experiment NAME, each judgment becomes an MLflow assessment (value,
    rationale, source type LLM judge, model) on one trace per item.

    Example: scijudge export runs/qa.sqlite --format csv --out qa.csv
    """
    if to in ("jsonl", "csv"):
        format = to
    elif to is not None:
        from scijudge.commands._interop import export_mlflow
        from scijudge.errors import InputError

        if to != "mlflow":
            raise InputError(f"unknown --to {to!r}: use mlflow, jsonl or csv", field="to")
        export_mlflow(run, tracking_uri, experiment)
        return
    from scijudge.run.store import Run

    store = Run(run, create=False)
    target = output or run.with_suffix("." + format)
    count = store.export(target, format, history=history)
    out.print(f"wrote {count} judgments to {escape(str(target))}", highlight=False)
