"""The other-tools branch of ``import-judgments`` (``--from`` or a recognised file) and ``export --to mlflow``.

Imports only the standard library, typer and rich at module level: the commands stay fast to load.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from scijudge.commands._console import plural
from scijudge.errors import InputError

FROM_CHOICES = ("inspect", "mlflow", "promptfoo", "deepeval", "lm-eval")
_SHOWN_ERRORS = 20


def recognised(file: Path | None) -> str | None:
    """The tool that wrote ``file``, recognised by its content (None: a generic JSONL/CSV file)."""
    if file is None or not file.is_file():
        return None
    from scijudge.importers.sniff import sniff_format

    return sniff_format(file)


def _summary_line(fmt: str, summary: dict[str, Any]) -> str:
    """The tool's own counts, printed beside ours so that they can be compared at a glance."""
    if fmt == "inspect":
        parts = [f"{name}: {s.get('scored')} scored, {s.get('unscored')} unscored"
                 for name, s in (summary.get("scorers") or {}).items()]
        return "log results: " + ("; ".join(parts) or "none")
    if fmt == "promptfoo":
        return f"file stats: {summary.get('stats')}"
    if fmt == "deepeval":
        parts = [f"{name}: {s.get('scores')} scores, {s.get('errors')} errors"
                 for name, s in (summary.get("metricsScores") or {}).items()]
        return "metricsScores: " + ("; ".join(parts) or "none")
    if fmt == "lm-eval":
        return f"lines per filter {summary.get('lines_per_filter')}, n-samples {summary.get('n_samples')}"
    if fmt == "mlflow":
        return f"{summary.get('traces')} traces, {summary.get('labels')} human labels"
    return ""


def _skipped_text(skipped: dict[str, int], *, hint: bool) -> str:
    """`` (skipped deterministic scorers: {...}; --all-scorers keeps them; corpus-level metrics: {...})``."""
    if not skipped:
        return ""
    corpus = {k: v for k, v in skipped.items() if k.endswith(" (corpus-level)")}
    deterministic = {k: v for k, v in skipped.items() if k not in corpus}
    parts = []
    if deterministic:
        parts.append(f"skipped deterministic scorers: {deterministic}" + ("; --all-scorers keeps them" if hint else ""))
    if corpus:
        parts.append(f"skipped corpus-level metrics (no per-sample score): {corpus}")
    return f" ({'; '.join(parts)})"


def reimport_note(counts: Any) -> str:
    """One line on what an import replaced: an earlier import of the same file, or rows under the same key."""
    if counts.earlier_paths:
        return (f"re-import of {', '.join(counts.earlier_paths)} (same sha256): {counts.replaced} rows replaced, "
                f"{counts.retired} rows of the earlier import under older item names are now history")
    if counts.replaced:
        return f"{counts.replaced} replaced rows imported before under the same item, judge, model and endpoint"
    return ""


def _write_labels(path: Path, labels: list[Any]) -> None:
    from scijudge._files import atomic_output

    with atomic_output(path) as handle:  # whole or not at all
        for label in labels:
            handle.write(json.dumps(label.model_dump(exclude_none=True), ensure_ascii=False) + "\n")


def import_foreign(
    file: Path | None, run: Path, fmt: str | None, *, tracking_uri: str | None, experiment: str | None,
    labels_out: Path | None, all_scorers: bool, strict: bool, label_source: str = "human", supersede: bool = False,
) -> int:
    """Read another tool's results, write the judgments into ``run`` (and human labels to ``labels_out``)."""
    from scijudge.report.console import plain_console

    from scijudge.commands._store import chunks_of, import_records
    from scijudge.importers.judgments import IMPORTED_SPEC_HASH

    if fmt is not None and fmt not in FROM_CHOICES:
        raise InputError(f"unknown --from {fmt!r}: use one of {', '.join(FROM_CHOICES)}", field="from")
    if fmt == "mlflow":
        if not tracking_uri or not experiment:
            raise InputError("--from mlflow needs --tracking-uri URI and --experiment NAME", field="tracking-uri")
        from scijudge.importers.mlflow import read_mlflow

        imported = read_mlflow(tracking_uri, experiment, label_source=label_source, include_deterministic=all_scorers)
    else:
        if file is None:
            raise InputError("give a FILE to import (or --from mlflow --tracking-uri URI --experiment NAME)",
                             field="FILE")
        from scijudge.importers.foreign import read_foreign

        imported = read_foreign(file, fmt, include_deterministic=all_scorers)
    err = plain_console(stderr=True, highlight=False, soft_wrap=True)
    for error in imported.errors[:_SHOWN_ERRORS]:
        err.print(f"[yellow]bad row:[/] {escape(str(error))}")
    if len(imported.errors) > _SHOWN_ERRORS:
        err.print(f"[yellow]... and {plural(len(imported.errors) - _SHOWN_ERRORS, 'more bad row')}[/]")
    if strict and imported.errors:
        raise InputError(f"{plural(len(imported.errors), 'bad row')}; nothing written (--strict)",
                         file=imported.source)
    if not imported.results and not imported.labels:
        raise InputError("no judgment could be imported" + _skipped_text(imported.skipped, hint=not all_scorers),
                         file=imported.source)
    written, counts = 0, None
    if imported.results:
        try:
            counts = import_records(run, chunks_of(r.model_dump(mode="json") for r in imported.results),
                                    imported_spec=IMPORTED_SPEC_HASH, meta=imported.meta, supersede=supersede,
                                    sha256=imported.sha256 or None, scales=imported.scales)
        except KeyboardInterrupt:
            err.print(f"interrupted: nothing was written to {escape(str(run))} (an import is one transaction); "
                      "run the same command again")
            raise typer.Exit(130) from None
        written = counts.written
    out = plain_console(highlight=False, soft_wrap=True)
    skipped = _skipped_text(imported.skipped, hint=False).replace(" (", "; ", 1).rstrip(")") if imported.skipped \
        else ""
    out.print(f"{imported.format}: {plural(written, 'judgment')} -> {escape(str(run))} "
              f"({plural(imported.n_abstained, 'abstention')}); {plural(len(imported.errors), 'bad row')}{skipped}" + (f"; source sha256 {imported.sha256[:12]}"
                                                             if imported.sha256 else ""))
    if counts is not None:
        note = reimport_note(counts)
        if note:
            out.print(escape(note))
    out.print(escape(_summary_line(imported.format, imported.summary)))
    if imported.labels:
        if labels_out is None:
            out.print(f"{len(imported.labels)} human labels not written: give --labels-out FILE.jsonl")
        else:
            _write_labels(labels_out, imported.labels)
            kinds = ", ".join(sorted({label.source for label in imported.labels}))
            out.print(f"{len(imported.labels)} human labels -> {escape(str(labels_out))} (MLflow source "
                      f"{', '.join(sorted(set(imported.label_sources)))}; label source {kinds})")
    if imported.errors:
        raise typer.Exit(1)
    return written


def _scales_of(results: list[Any], stored: dict[str, Any]) -> dict[str, Any]:
    """Each judge's scale as calibrate would take it: the store's recorded scale, else its spec's or family's."""
    import pandas as pd

    from scijudge.metrics.calibration.scales import resolve_scales

    rest = sorted({r.judge for r in results} - set(stored))
    if not rest:
        return stored
    frame = pd.DataFrame([{"judge": r.judge, "family": r.family, "spec_hash": r.spec_hash} for r in results
                          if r.judge in rest])
    out: dict[str, Any] = {}
    for judge in rest:  # one at a time: a judge run with specs of two scales gets none, the others theirs
        try:
            found, continuous, _ = resolve_scales(frame, [judge], None)
        except InputError:
            continue
        out[judge] = [*found[judge], "continuous"] if judge in continuous else list(found[judge])
    return {**out, **stored}


def export_mlflow(run: Path, tracking_uri: str | None, experiment: str | None) -> int:
    """Log a run store's current judgments to MLflow as assessments; returns how many."""
    from scijudge.report.console import plain_console

    from scijudge.importers.mlflow import export_to_mlflow, run_tag_of
    from scijudge.run.store import Run

    if not tracking_uri or not experiment:
        raise InputError("--to mlflow needs --tracking-uri URI and --experiment NAME", field="tracking-uri")
    store = Run(run, create=False)
    try:
        results = store.results()
        stored_scales = dict(store.meta().get("scales") or {})
    finally:
        store.close()
    if not results:
        raise InputError("the run store holds no judgments", file=run)
    done = export_to_mlflow(results, tracking_uri, experiment, run_tag=run_tag_of(run),
                            scales=_scales_of(results, stored_scales))
    plain_console(highlight=False, soft_wrap=True).print(
        f"logged {done['judgments']} judgments ({done['abstained']} abstentions) as assessments on "
        f"{done['traces']} traces in MLflow experiment {escape(experiment)!r} (id {done['experiment_id']})")
    return int(done["judgments"])
