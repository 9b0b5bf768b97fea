"""CLI command `scijudge export`: a run store's judgments as JSONL or CSV."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from scijudge.commands._console import out, plural
from scijudge.errors import InputError


def export_cmd(
    run: Annotated[Path, typer.Argument(help="Run store to export.")],
    format: Annotated[str | None, typer.Option("--format", "-f", help="jsonl or csv (default: the --out file's "
                                               "suffix, .csv or .jsonl; else jsonl).")] = None,
    output: Annotated[Path | None, typer.Option("--out", "-o", help="Output file (default: next to the run, named "
                                                "like it with the format's suffix).")] = None,
    history: Annotated[bool, typer.Option(
        help="Also export judgments superseded by a newer one (column 'current' tells them apart).")] = False,
    skip_damaged: Annotated[bool, typer.Option(
        "--skip-damaged", help="Leave out the rows that cannot be read (a damaged store) and export the rest.")] = False,
    to: Annotated[str | None, typer.Option("--to", help="mlflow: log the judgments as MLflow assessments (jsonl/csv: as --format).")] = None,
    tracking_uri: Annotated[str | None, typer.Option(help="MLflow tracking URI (with --to mlflow).")] = None,
    experiment: Annotated[str | None, typer.Option(help="MLflow experiment name (with --to mlflow).")] = None,
) -> None:
    """Export the current judgment of every (item, judge, part, model, endpoint) of a run store to JSONL or CSV.

    With --to mlflow --tracking-uri URI --experiment NAME, each judgment becomes an MLflow assessment (value,
    rationale, source type LLM judge, model) on one trace per item.

    The file is written whole or not at all (a temporary file renamed at the end), never over the run store.

    Example: scijudge export runs/demo.sqlite --out demo.csv   (after `scijudge demo`)
    """
    if to != "mlflow" and (tracking_uri is not None or experiment is not None):
        given = "--tracking-uri" if tracking_uri is not None else "--experiment"
        raise InputError(f"{given} is for an export to MLflow: add --to mlflow (without it, the judgments are "
                         "written to a JSONL or CSV file)", field="to")
    if to in ("jsonl", "csv"):
        format = format or to
    elif to is not None:
        from scijudge.commands._interop import export_mlflow

        if to != "mlflow":
            raise InputError(f"unknown --to {to!r}: use mlflow, jsonl or csv", field="to")
        export_mlflow(run, tracking_uri, experiment)
        return
    from scijudge._files import refuse_overwrite
    from scijudge.run.export import output_format
    from scijudge.run.store import Run

    fmt = output_format(format, output)
    target = output or run.with_suffix("." + fmt)
    if output is None and target.resolve() == run.resolve():
        raise InputError(f"the default output {target} is the run store itself: give another path", field="output")
    refuse_overwrite(target, stores=[run], field="output")
    with Run(run, create=False) as store:
        damaged = store.damaged_rows(history=history) if skip_damaged else []
        count = store.export(target, fmt, history=history, skip_damaged=[d.rowid for d in damaged])
    out.print(f"wrote {plural(count, 'judgment')} to {escape(str(target))}", highlight=False)
    if damaged:
        named = ", ".join(f"{d.item_id!r} ({d.judge}, {d.column})" for d in damaged[:5])
        more = f" and {len(damaged) - 5} more" if len(damaged) > 5 else ""
        out.print(f"left out {plural(len(damaged), 'damaged row')}: {escape(named)}{more}; judge the same items into "
                  "this --run again to judge them anew", highlight=False)
