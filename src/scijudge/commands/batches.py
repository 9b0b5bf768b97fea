"""CLI command `scijudge batches RUN`: the provider batches a run sent and their status; `--abandon ID` gives one up."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from scijudge.errors import InputError


def batches_cmd(
    run: Annotated[Path, typer.Argument(help="Run store written by `scijudge judge --batch`.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    abandon: Annotated[str | None, typer.Option(
        "--abandon", metavar="ID",
        help="Give up this batch (its remote id, or the client id of one never created): its lines go back to "
             "pending and the next `judge --batch` run sends them again. A batch the provider may still run is "
             "cancelled there first (the key comes from OPENAI_API_KEY/ANTHROPIC_API_KEY). For a batch the "
             "provider no longer knows, or a gateway that cannot list batches.")] = None,
) -> None:
    """List the provider batches a run created: status, counts, strategy, price basis.

    Example: scijudge batches runs/demo.sqlite   (after `scijudge demo`; a run judged with --batch lists its batches)
    """
    from scijudge.report.console import plain_console
    from rich.table import Table

    from scijudge.run.batch.store import BatchStore
    from scijudge.run.store import Run

    with Run(run, create=False) as checked:  # a missing, foreign or damaged file: one line, and no file created
        has_batches = checked.has_table("batches")
    if not has_batches:
        if abandon is not None:
            raise InputError(f"no batch {abandon!r}: this run has no batches", file=run, field="--abandon")
        plain_console().print(f"{run}: no batches (this run was not judged with --batch)")
        return
    if abandon is not None:
        from scijudge.run.batch.abandon import abandon_batch

        try:
            outcome = abandon_batch(run, abandon)
        except KeyError:
            raise InputError(f"no batch {abandon!r} in this run (see `scijudge batches {run}`)", file=run,
                             field="--abandon") from None
        except ValueError as exc:
            raise InputError(str(exc), file=run, field="--abandon") from None
        if outcome.cancelled:
            plain_console().print(f"sent a cancel for batch {abandon} to the provider; lines it ran before the cancel "
                            "are billed", highlight=False, soft_wrap=True)
        if outcome.warning:
            plain_console(stderr=True).print(f"[yellow]warning:[/] {outcome.warning}", highlight=False, soft_wrap=True)
        plain_console().print(f"abandoned batch {abandon}: its {outcome.record.total} lines go back to pending; the next "
                        "`scijudge judge --batch` run sends them again", highlight=False, soft_wrap=True)
        return
    store = BatchStore(run, read_only=True)
    records = store.records()
    kept = store.kept_count()
    store.close()
    if as_json:
        print(json.dumps([r.model_dump(exclude={"keys"}) | {"lines": len(r.keys)} for r in records], indent=2))
        return
    table = Table("batch", "status", "stored", "lines", "completed", "failed", "strategy", "model", "price basis",
                  "created", "updated", title=f"{len(records)} batches in {run}")
    for r in records:
        table.add_row(r.remote_id or f"(not created: {r.client_id})", r.status, "yes" if r.processed else "no",
                      str(r.total), str(r.completed), str(r.failed), f"{r.strategy}@{r.temperature:g}", r.model,
                      r.price_basis or "-", r.created_at, r.updated_at)
    plain_console(width=200).print(table)
    if kept:
        plain_console().print(f"{kept} answers collected for judgments no run has asked for yet are kept; a run that "
                        "asks for them stores them without a new request", highlight=False, soft_wrap=True)
