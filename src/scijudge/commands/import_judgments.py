"""CLI command `scijudge import-judgments`: bring judgments made elsewhere into a run store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from scijudge.commands._console import plural
from scijudge.errors import EXIT_INTERRUPTED, InputError

_SHOWN_ERRORS = 20


_FILE_HELP = ("JSONL or CSV: item_id, judge, model, score|verdict [, part, rationale, confidence, endpoint, "
              "variant_of, level].")
_MAP_HELP = "Rename a source column: SOURCE=FIELD (e.g. rating=score); repeatable."
_STRICT_HELP = "Write nothing if any row is bad (default: write the good rows, list the bad)."
_FROM_HELP = ("Another tool's results: inspect, mlflow, promptfoo, deepeval or lm-eval (default: recognised from "
              "the file's content, else generic JSONL/CSV).")
_SCALE_HELP = ("A judge's scale, JUDGE=LO,HI,STEP[,continuous] (or LO,HI,STEP for every judge); repeatable. Scores "
               "off a judge's scale (this, the store's recorded one, or the row's family) are bad rows; it is "
               "recorded for calibrate and estimate.")
_SUPERSEDE_HELP = ("Let imported rows become the current judgment where scijudge judged the same item, judge, model "
                   "and endpoint in this store (those stay as history); refused by default.")


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
        help="Source of MLflow's human assessments as labels: human (default), expert or crowd when you know.")] = "human",
    supersede: Annotated[bool, typer.Option(help=_SUPERSEDE_HELP)] = False,
    scale: Annotated[list[str] | None, typer.Option("--scale", help=_SCALE_HELP)] = None,
) -> int:
    """Import judgments made by any tool (released rating files, logs) so they can be calibrated and stress-tested.

    A row without score and verdict is stored as an abstention with a reason; bad rows are listed by line
    (exit code 1 when there were any). Each record keeps its source file, line and SHA-256. The import is one
    transaction: whole, or (bad file, Ctrl-C) nothing at all.

    inspect_ai logs, promptfoo, DeepEval and lm-eval files are recognised by their content (or named with --from);
    MLflow assessments are read with --from mlflow --tracking-uri URI --experiment NAME (human ones as labels).

    A score off its judge's scale (--scale, the store's recorded scale, or the row's family) is a bad row.

    Example: scijudge import-judgments datasets/jury_example/panel.jsonl --run panel.sqlite   (a CSV with other column names: add --map rating=score --map llm=model)
    """
    from scijudge._files import refuse_overwrite
    from scijudge.commands import _interop

    refuse_overwrite(run, [file], field="run")  # never the imported file as the store it is written into
    if labels_out is not None:
        refuse_overwrite(labels_out, [file], stores=[run], field="labels_out")
    found = None if from_ is not None or file is None else _interop.recognised(file)
    if from_ is not None or file is None or found:
        if map_:
            raise InputError("--map renames columns of generic JSONL/CSV files only", field="map")
        if scale:
            raise InputError("--scale applies to generic JSONL/CSV files (other tools' scales are read from their "
                             "files)", field="scale")
        return _interop.import_foreign(file, run, from_ or (found if found != "damaged" else None), tracking_uri=tracking_uri, experiment=experiment,
                                       labels_out=labels_out, all_scorers=all_scorers, strict=strict,
                                       label_source=label_source, supersede=supersede)
    from scijudge.report.console import plain_console
    from rich.markup import escape

    from scijudge.commands._store import import_records
    from scijudge.importers.judgments import IMPORTED_SPEC_HASH, JudgmentStream, parse_mapping, read_judgments
    from scijudge.importers.scales import ScaleCheck, parse_scales
    from scijudge.records import Columns
    from scijudge.vocab import DEFAULT_SCALE

    given = parse_scales(scale)
    stream = read_judgments(file, mapping=parse_mapping(map_))
    check = ScaleCheck(given, _stored_scales(run), stream.source)
    err = plain_console(stderr=True, highlight=False, soft_wrap=True)

    def rows(source: JudgmentStream) -> Iterator[Columns]:  # --strict: after a bad row, nothing is written
        for chunk in source.chunks():
            chunk = check.check(chunk, source.errors)
            if chunk.n and not (strict and source.errors):
                yield chunk
        source.finish()
        if strict and source.errors:
            _print_bad(err, source)
            raise InputError(f"{plural(len(source.errors), 'bad row')}; nothing written (--strict)", file=file)
        if not source.n_imported:
            raise InputError("no judgment could be imported", file=file)

    try:
        counts = import_records(run, rows(stream), imported_spec=IMPORTED_SPEC_HASH, meta=stream.meta,
                                supersede=supersede, sha256=stream.sha256, scales=check.recorded)
    except KeyboardInterrupt:
        err.print(f"interrupted: nothing was written to {escape(str(run))} (an import is one transaction, whole or "
                  "not at all); run the same command again to import the file")
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except InputError:
        _print_bad(err, stream)
        raise
    _print_bad(err, stream)
    if not counts.written:
        raise InputError("no judgment could be imported", file=file)
    note = check.undeclared.note(list(DEFAULT_SCALE))
    if note:
        err.print(f"[yellow]note:[/] {escape(note)}")
    from scijudge.commands._interop import reimport_note

    notes = f"; {reimport_note(counts)}" if reimport_note(counts) else ""
    if counts.superseded:
        notes += (f"; {plural(counts.superseded, 'judgment')} made by scijudge "
                  f"{'is' if counts.superseded == 1 else 'are'} now history (--supersede)")
    plain_console(highlight=False, soft_wrap=True).print(
        f"{plural(counts.written, 'judgment')} -> {escape(str(run))} ({plural(stream.n_abstained, 'abstention')}, "
        f"{plural(stream.n_variants, 'perturbed variant')}); {plural(len(stream.errors), 'bad row')}; source sha256 {stream.sha256[:12]}{notes}")
    if stream.errors:
        raise typer.Exit(1)
    return counts.written


def _stored_scales(run: Path) -> dict[str, Any]:
    """The scales the run store records (none when it does not exist yet)."""
    if not run.is_file():
        return {}
    from scijudge.run.store import Run

    with Run(run, create=False) as store:
        return dict(store.meta().get("scales") or {})


def _print_bad(err: Any, stream: Any) -> None:
    """The bad rows, once, at most ``_SHOWN_ERRORS`` of them."""
    from rich.markup import escape

    if getattr(stream, "_printed", False):
        return
    stream._printed = True
    for error in stream.errors[:_SHOWN_ERRORS]:
        err.print(f"[yellow]bad row:[/] {escape(str(error))}")
    if len(stream.errors) > _SHOWN_ERRORS:
        err.print(f"[yellow]... and {plural(len(stream.errors) - _SHOWN_ERRORS, 'more bad row')}[/]")
