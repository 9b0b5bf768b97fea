"""CLI command `scijudge batches RUN` (the batches a run sent and their status), and the `judge --batch/--ray` paths."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

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


def judge_scaled(loaded: list[Any], judges: list[Any], recipes: list[Any], store: Any, *, batch: bool,
                 batch_size: int, batch_poll: float, batch_fallback: str, ray: str | None, concurrency: int,
                 limit: int | None, retry_abstained: bool, console: Any) -> Any:
    """The `judge --batch` and `judge --ray ADDRESS` paths; returns the runner's summary."""
    from scijudge.errors import ModelError

    if batch and ray is not None:
        raise ModelError("choose --batch (provider batch APIs) or --ray (local hf: models on Ray), not both")
    if ray is not None:
        from scijudge.run.ray import check_ray_recipes, judge_items_ray

        check_ray_recipes(recipes)
        if limit is not None:
            raise ModelError("--limit is not supported with --ray (each actor plans its own items)")
        return judge_items_ray(loaded, recipes, run=store, address=None if ray == "local" else ray,
                               concurrency=concurrency, retry_abstained=retry_abstained)
    from scijudge.run.batch.executor import judge_items_batch

    def on_batch(record: Any) -> None:
        console.print(f"batch {record.remote_id or record.client_id}: {record.status} ({record.total} lines, "
                      f"{record.strategy})", highlight=False)

    return judge_items_batch(loaded, judges, run=store, batch_size=batch_size, poll=batch_poll,
                             fallback=batch_fallback, limit=limit, retry_abstained=retry_abstained,
                             on_batch=on_batch)
