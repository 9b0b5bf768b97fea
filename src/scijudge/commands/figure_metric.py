"""CLI command `scijudge figure-metric`: score extracted plot series against ground truth and print the table."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from scijudge.errors import InputError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from scijudge.metrics.figures import FigureScore


def _render(scores: Sequence[FigureScore]) -> None:
    """Print one rich table per figure (series rows, then the figure's pooled numbers)."""
    from scijudge.report.console import plain_console
    from rich.table import Table

    from scijudge.metrics.figures import WORST_DISTANCE

    console = plain_console()
    if not console.is_terminal:  # piped or captured output: do not squeeze the table into 80 columns
        console = plain_console(width=160)
    for fig in scores:
        mode = f"worst = √2 ≈ {WORST_DISTANCE:.3f}" if fig.capped else "uncapped (source-compatible)"
        table = Table(title=f"figure {fig.figure or '(unnamed)'}  ·  {mode}")
        for col in ("truth", "extracted", "status", "n_true", "n_ext", "P-RMSE", "P-MAE", "R-RMSE", "R-MAE",
                    "S-RMSE", "score"):
            table.add_column(col, justify="right" if col not in ("truth", "extracted", "status") else "left")
        for r in fig.series:
            table.add_row(
                r.truth_name or "—", (r.extracted_name or "—") + (" (other y axis)" if r.axis_mismatch else ""),
                r.status, str(r.n_truth), str(r.n_extracted),
                *(f"{v:.4f}" for v in (r.precision_rmse, r.precision_mae, r.recall_rmse, r.recall_mae,
                                       r.symmetric_rmse, r.score)),
            )
        table.add_section()
        table.add_row("figure", "", "", "", "", *(f"{v:.4f}" for v in (
            fig.precision_rmse, fig.precision_mae, fig.recall_rmse, fig.recall_mae, fig.symmetric_rmse, fig.score)))
        console.print(table)
        if not fig.capped:
            src = "undefined (no common series)" if fig.source_rmse is None else (
                f"RMSE {fig.source_rmse:.4f}  MAE {fig.source_mae:.4f}")
            console.print(f"LeMaterial figure metric (source rule): {src}")
        if fig.unmatched_truth:
            console.print("missing (true, not extracted): " + ", ".join(fig.unmatched_truth))
        if fig.unmatched_extracted:
            console.print("spurious (extracted, not true): " + ", ".join(fig.unmatched_extracted))


def _read_file(path: str | Path) -> str:
    """The file's text, or an InputError naming it."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read file ({exc.strerror})", file=path) from exc
    except UnicodeDecodeError as exc:  # a binary file (a run store, an image): not the JSON this command reads
        raise InputError(f"not a UTF-8 text file (byte {exc.start}); expected the figure's JSON", file=path) from None


def figure_metric_command(
    pred: Annotated[Path, typer.Argument(help="Extracted plot data (JSON: one figure or a list).")],
    truth: Annotated[Path, typer.Argument(help="Ground-truth plot data (JSON: one figure, a list, or subplots).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the scores as JSON instead of a table.")] = False,
    no_cap: Annotated[bool, typer.Option(
        "--no-cap", help="Source-compatible mode: uncapped distances plus LeMaterial's own figure RMSE/MAE.")] = False,
) -> None:
    """Compare extracted plot series with ground truth and print the per-series RMSE/MAE table.

    Example: scijudge figure-metric datasets/lematerial_example/figure_extracted.json datasets/lematerial_example/figure_truth.json
    """
    from scijudge.metrics.figures import figure_metric

    scores = figure_metric(_read_file(pred), _read_file(truth), extracted_source=pred, truth_source=truth,
                           cap=not no_cap)
    if as_json:
        import json

        print(json.dumps([s.model_dump() for s in scores], indent=2))
    else:
        _render(scores)
