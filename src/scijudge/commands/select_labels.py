"""CLI command `scijudge select-labels`: which items to send to human annotators, with their inclusion probabilities."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from scijudge.errors import InputError


def select_labels_cmd(
    run: Annotated[list[Path], typer.Option("--run", help="Run store with the judge's judgments; repeatable.")],
    judge: Annotated[str, typer.Option("--judge", "-j", help="The judge whose judgments drive the design.")],
    budget: Annotated[int, typer.Option(min=1, help="Labels to collect (expected count; stratified: exact).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="CSV to write: item_id, pi, picked, ... (one row per item).")],
    strategy: Annotated[str, typer.Option(help="uniform, uncertainty (label where the judge is unsure) or stratified.")] = "uncertainty",
    seed: Annotated[int, typer.Option(help="Seed of the draw (the same seed draws the same items).")] = 0,
    strata: Annotated[Path | None, typer.Option(help="CSV item_id,stratum for --strategy stratified (e.g. domain or system).")] = None,
    labels: Annotated[Path | None, typer.Option(help="Labels collected so far: fit a residual model for the uncertainty.")] = None,
    floor: Annotated[float, typer.Option(min=0.0, max=1.0, help="Share of the budget spread uniformly (uncertainty design).")] = 0.1,
) -> None:
    """Choose the items to label so that `estimate --picks` gets the most certainty per label.

    Every judged item gets an inclusion probability pi > 0 (the design) and a draw says whether it is picked; label
    the picked items, then `scijudge estimate --picks picks.csv` weights each label by 1/pi (active PPI) or by
    stratum (stratified PPI), so the estimate stays unbiased. Uncertainty comes from the judge's rating
    distributions (--mode decision or --rating-probs), several models' disagreement, or a residual model (--labels).

    Example: scijudge select-labels --run runs/demo.sqlite -j yescieval.qa.correctness --budget 4 --out picks.csv   (after `scijudge demo`)
    """
    import pandas as pd

    from scijudge.estimation.select import select_labels
    from scijudge.run.store import Run

    from scijudge._files import atomic_output, refuse_overwrite

    refuse_overwrite(out, [strata, labels], stores=run)
    frames = []
    for path in run:
        if not path.is_file():
            raise InputError("run store not found", file=path)
        with Run(path, create=False) as store:
            frames.append(store.to_pandas())
    judgments = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    mapping = _strata(strata) if strata is not None else None
    known = _labels(labels, judge) if labels is not None else None
    picks = select_labels(judgments, judge=judge, budget=budget, strategy=strategy, seed=seed, strata=mapping,
                          labels=known, tau=floor)
    with atomic_output(out, newline="") as handle:  # whole or not at all
        picks.to_csv(handle, index=False)
    typer.echo(f"wrote {out}: {int(picks.picked.sum())} of {len(picks)} items picked (expected {picks.pi.sum():.1f}; "
               f"design {strategy}" + (f", uncertainty from {picks.uncertainty_source.iloc[0]}"
                                       if picks.uncertainty_source.iloc[0] else "") + ")")


def _strata(path: Path) -> dict[str, str]:
    """item_id -> stratum from a CSV with those two columns."""
    import csv

    if not path.is_file():
        raise InputError("strata file not found", file=path)
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        if reader.fieldnames is None or not {"item_id", "stratum"} <= set(reader.fieldnames):
            raise InputError("a strata file is a CSV with columns item_id,stratum", file=path, line=1)
        mapping: dict[str, str] = {}
        for row in reader:
            if not row["item_id"] or row["stratum"] in (None, ""):
                raise InputError("empty item_id or stratum", file=path, line=reader.line_num,
                                 field="stratum" if row["item_id"] else "item_id")
            mapping[row["item_id"]] = row["stratum"]
    return mapping


def _labels(path: Path, judge: str) -> dict[str, float]:
    """Mean human score per item for the judge (labels for it, or for no judge in particular)."""
    from scijudge.labels import load_labels

    scores: dict[str, list[float]] = {}
    for label in load_labels(path):
        if label.score is not None and label.judge in (None, "", judge):
            scores.setdefault(label.item_id, []).append(float(label.score))
    return {item: sum(values) / len(values) for item, values in scores.items()}
