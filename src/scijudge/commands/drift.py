"""CLI command `scijudge drift`: has a judge changed between two runs (or inside one store's history)?"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import typer

_FAIL_HELP = "Exit 1 when any judge's flip rate is above RATE (a CI gate), 0 otherwise."
_ON_HELP = "Which flip rate --fail-above gates: exact (any change of score or verdict) or beyond1 (a change > 1 point)."
_ANY_HELP = "Pair on (item, judge, part) only, e.g. when the model's name changed (one model per judge in each run)."


def drift_cmd(
    old: Annotated[Path, typer.Argument(help="The earlier run store (or the only one: its history vs its current rows).")],
    new: Annotated[Path | None, typer.Argument(help="The later run store.")] = None,
    fail_above: Annotated[float | None, typer.Option("--fail-above", min=0.0, max=1.0, help=_FAIL_HELP)] = None,
    on: Annotated[Literal["exact", "beyond1"], typer.Option("--on", help=_ON_HELP)] = "exact",
    any_model: Annotated[bool, typer.Option("--any-model", help=_ANY_HELP)] = False,
    csv: Annotated[bool | None, typer.Option("--csv/--table", help="CSV or a table (default: CSV when stdout is not a "
                                             "terminal).")] = None,
) -> Any:
    """Judge drift per judge and model: n, flip rate (exact and beyond +-1), kappa between runs, mean shift with a
    95% paired-t interval.

    Two stores are paired on (item, judge, part, model, endpoint). With one store, each judgment that replaced
    another as current (a new spec, item content or decoding) is compared with the one it replaced; a re-judgment
    with the same key replaces its row, so to catch a provider changing the model behind a name, judge into a
    second store and compare the two.

    Example: scijudge drift old.sqlite new.sqlite --fail-above 0.1   (after: scijudge import-judgments datasets/jury_example/panel.jsonl --run old.sqlite; scijudge import-judgments datasets/jury_example/panel_rerun.jsonl --run new.sqlite)
    """
    import sys

    from scijudge.report.console import plain_console
    from rich.markup import escape
    from rich.table import Table

    from scijudge.metrics.drift import drift_stores, gate

    table = drift_stores(old, new, any_model=any_model)
    failing = gate(table, fail_above, on)
    as_csv = csv if csv is not None else not sys.stdout.isatty()
    if as_csv:
        sys.stdout.write(table.to_csv(index=False, float_format="%.6g"))
    else:
        shown = Table("judge", "model", "n", "flip", "flip >1", "kappa", "mean shift [95% paired t]", "status changed",
                      "warning", title=f"drift {old.name}" + (f" -> {new.name}" if new else " (history -> current)"))
        for r in table.itertuples():
            shift = "—" if r.mean_shift != r.mean_shift else (
                f"{r.mean_shift:+.3f}" + ("" if r.shift_lo != r.shift_lo else f" [{r.shift_lo:+.3f}, {r.shift_hi:+.3f}]"))
            shown.add_row(escape(str(r.judge)), escape(str(r.model)), str(r.n_paired), _fmt(r.flip_rate),
                          _fmt(r.flip_rate_beyond1), _fmt(r.kappa), shift, str(r.n_status_changed), r.warning)
        plain_console(width=180).print(shown)
    err = plain_console(stderr=True, highlight=False, soft_wrap=True)
    for line in failing:
        err.print(f"[bold red]drift:[/] {escape(line)}")
    if failing:
        raise typer.Exit(1)
    return table


def _fmt(value: float) -> str:
    return "—" if value != value else f"{value:.3f}"
