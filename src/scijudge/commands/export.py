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
) -> None:
    """Export the current judgment of every (item, judge, part, model, endpoint) of a run store to JSONL or CSV.

    Example: scijudge export runs/qa.sqlite --format csv --out qa.csv
    """
    from scijudge.run.store import Run

    store = Run(run, create=False)
    target = output or run.with_suffix("." + format)
    count = store.export(target, format, history=history)
    out.print(f"wrote {count} judgments to {escape(str(target))}", highlight=False)
