"""CLI command `scijudge import-lematerial`: LeMaterial's judge and human evaluations as a run store and labels."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from scijudge.commands._console import out
from scijudge.errors import InputError


def import_lematerial_cmd(
    folder: Annotated[Path, typer.Argument(help="A LeMaterial annotations folder (<paper>/result.json, result_human.json).")],
    run: Annotated[Path, typer.Option(help="Run store to write the LLM-judge evaluations into.")],
    labels: Annotated[Path, typer.Option(help="JSONL file to write the human evaluations into, as human labels.")],
    threshold: Annotated[float, typer.Option(help="Fuzzy material-name match threshold (0-1).")] = 0.8,
) -> None:
    """Import LeMaterial's LLM-judge and human evaluations as a run store plus human labels.

    Example: scijudge import-lematerial datasets/lematerial_example/annotations/ --run runs/lemat.sqlite --labels lemat_labels.jsonl   (a LeMaterial llm-synthesis annotations folder: <paper>/result.json and result_human.json)
    """
    from scijudge._files import atomic_output, refuse_overwrite
    from scijudge.commands._store import write_records
    from scijudge.importers.lematerial import load_lematerial_annotations

    refuse_overwrite(labels, stores=[run], field="labels")  # the labels file is never the store written beside it

    # nor one of the files it reads (a result_human.json in the folder)
    refuse_overwrite(labels, inputs=sorted(folder.rglob("*.json")) if folder.is_dir() else (), field="labels")
    imported = load_lematerial_annotations(folder, match_threshold=threshold)
    if not imported.papers:  # a wrong folder is not an empty import: nothing is written
        raise InputError("no LeMaterial annotations in this folder (expected <paper>/result.json or "
                         "result_human.json files); nothing was written", file=folder)
    written = write_records(run, imported.results, imports={
        "file": str(folder), "kind": "lematerial", "rows": len(imported.results), "labels": len(imported.labels),
        "dropped_human_scores": imported.drop_counts()})
    from scijudge.run.store import Run

    with Run(run) as store:  # calibrate reads these: the overall is continuous, criteria on half steps
        store.set_meta(scales={**(store.meta().get("scales") or {}), **imported.scales()})
    with atomic_output(labels) as handle:  # whole or not at all
        for label in imported.labels:
            handle.write(label.model_dump_json(exclude_none=True) + "\n")
    out.print(f"{written} judge results -> {escape(str(run))}; {len(imported.labels)} human labels -> {escape(str(labels))}; "
              f"skipped 'Extraction failed': {imported.skipped_failed}; unannotated: {imported.skipped_unannotated}; "
              f"human scores left out: {len(imported.dropped)}", highlight=False)
    for rule, count in imported.drop_counts().items():
        out.print(f"  {count} left out: {escape(rule)}", highlight=False)
    for dropped in imported.dropped:
        out.print(f"[yellow]human score left out:[/] {escape(str(dropped))}", highlight=False)
    for name in imported.unmatched_human:
        out.print(f"[yellow]human label with no matching judge result:[/] {escape(str(name))}", highlight=False)
    for name in imported.unmatched_judge:
        out.print(f"[yellow]judge result with no matching human label:[/] {escape(str(name))}", highlight=False)
