"""CLI command `scijudge import-judgments`: bring judgments made elsewhere into a run store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from scijudge.errors import InputError

_SHOWN_ERRORS = 20


_FILE_HELP = ("JSONL or CSV: item_id, judge, model, score|verdict [, part, rationale, confidence, endpoint, "
              "variant_of, level].")
_MAP_HELP = "Rename a source column: SOURCE=FIELD (e.g. rating=score); repeatable."
_STRICT_HELP = "Write nothing if any row is bad (default: write the good rows, list the bad)."
_FROM_HELP = ("Another tool's results: inspect, mlflow, promptfoo, deepeval or lm-eval (default: recognised from "
              "the file's content, else generic JSONL/CSV).")


def import_judgments_cmd(
    run: Annotated[Path, typer.Option("--run", "-r", help="Run store (SQLite) to write into; created if needed.")],
    file: Annotated[Path | None, typer.Argument(help=_FILE_HELP)] = None,
    map_: Annotated[list[str] | None, typer.Option("--map", help=_MAP_HELP)] = None,
    strict: Annotated[bool, typer.Option(help=_STRICT_HELP)] = False,
    from_: Annotated[str | None, typer.Option("--from", help=_FROM_HELP)] = None,
    tracking_uri: Annotated[str | None, typer.Option(help="MLflow tracking URI (with --from mlflow).")] = None,
    experiment: Annotated[str | None, typer.Option(help="MLflow experiment name (with --from mlflow).")] = None,
    labels_out: Annotated[Path | None, typer.Option(help="Write the human labels found (MLflow) to this JSONL.")] = None,
    all_scorers: Annotated[bool, typer.Option(help="Also keep deterministic scorers/metrics (not model-graded).")] = False,
    label_source: Annotated[str, typer.Option(
        help="Who gave MLflow's human assessments: expert, crowd or unknown (MLflow does not record it).")] = "unknown",
) -> int:
    """Import judgments made by any tool (released rating files, logs) so they can be calibrated and stress-tested.

    A row without score and verdict is stored as an abstention with a reason; bad rows are listed by line
    (exit code 1 when there were any). Each record keeps its source file, line and SHA-256.

    inspect_ai logs, promptfoo, DeepEval and lm-eval files are recognised by their content (or named with --from);
    MLflow assessments are read with --from mlflow --tracking-uri URI --experiment NAME (human ones as labels).

    Example: scijudge import-judgments ratings.csv --run runs/released.sqlite --map rating=score --map llm=model
    """
    from scijudge.commands import _interop

    if from_ is not None or file is None or _interop.recognised(file):
        if map_:
            raise InputError("--map renames columns of generic JSONL/CSV files only", field="map")
        return _interop.import_foreign(file, run, from_, tracking_uri=tracking_uri, experiment=experiment,
                                       labels_out=labels_out, all_scorers=all_scorers, strict=strict,
                                       label_source=label_source)
    from rich.console import Console

    from scijudge.commands._store import write_records
    from scijudge.importers.judgments import load_judgments, parse_mapping

    imported = load_judgments(file, mapping=parse_mapping(map_))
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    for error in imported.errors[:_SHOWN_ERRORS]:
        err.print(f"[yellow]bad row:[/] {error}")
    if len(imported.errors) > _SHOWN_ERRORS:
        err.print(f"[yellow]... and {len(imported.errors) - _SHOWN_ERRORS} more bad rows[/]")
    if strict and imported.errors:
        raise InputError(f"{len(imported.errors)} bad row(s); nothing written (--strict)", file=file)
    if not imported.results:
        raise InputError("no judgment could be imported", file=file)
    written = write_records(run, imported.results, imports=imported.meta())
    Console(highlight=False).print(
        f"{written} judgments -> {run} ({imported.n_abstained} abstentions, {imported.n_variants} perturbed "
        f"variants); {len(imported.errors)} bad rows; source sha256 {imported.sha256[:12]}")
    if imported.errors:
        raise typer.Exit(1)
    return written
