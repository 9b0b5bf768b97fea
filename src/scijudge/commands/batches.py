"""CLI command `scijudge batches RUN`: the provider batches a run sent and their status."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from scijudge.errors import InputError


def batches_cmd(
    run: Annotated[Path, typer.Argument(help="Run store written by `scijudge judge --batch`.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """List the provider batches a run created: status, counts, strategy, price basis.

    Example: scijudge batches runs/qa.sqlite
    """
    from rich.console import Console
    from rich.table import Table

    from scijudge.run.batch.store import BatchStore, batches_table_exists

    if not run.is_file():
        raise InputError("run store not found", file=run)
    if not batches_table_exists(run):
        Console().print(f"{run}: no batches (this run was not judged with --batch)")
        return
    store = BatchStore(run)
    records = store.records()
    store.close()
    if as_json:
        print(json.dumps([r.model_dump(exclude={"keys"}) | {"lines": len(r.keys)} for r in records], indent=2))
        return
    table = Table("batch", "status", "stored", "lines", "completed", "failed", "strategy", "model", "price basis",
                  "created", "updated", title=f"{len(records)} batches in {run}")
    for r in records:
        table.add_row(r.remote_id or f"(not created: {r.client_id[:18]})", r.status, "yes" if r.processed else "no",
                      str(r.total), str(r.completed), str(r.failed), f"{r.strategy}@{r.temperature:g}", r.model,
                      r.price_basis or "-", r.created_at, r.updated_at)
    Console(width=200).print(table)
