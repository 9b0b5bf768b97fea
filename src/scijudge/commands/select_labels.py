"""CLI command `scijudge select-labels`: which items to send to human annotators, with their inclusion probabilities."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from scijudge.errors import InputError


def select_labels_cmd(
    run: Annotated[list[Path], typer.Option("--run", help="Run store with the judge's judgments; repeatable.")],
    judge: Annotated[str, typer.Option("--judge", "-j", help="The judge whose judgments drive the design.")],
    budget: Annotated[int | None, typer.Option(min=1, help="Labels to collect (expected count; stratified: exact); not needed with --plan.")] = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="CSV to write: item_id, pi, picked, ... (one row per item); with --plan, the plan table.")] = None,
    strategy: Annotated[str, typer.Option(help="auto (the design the planner expects to be narrowest, from --labels, when at least 10% narrower than uniform; uniform otherwise), uniform, uncertainty (label where the judge is unsure) or stratified. Every design but uniform is checked first on at least 10 labels already collected (--labels) and gives way to uniform picks, saying why, when the check fails or cannot be made.")] = "auto",
    seed: Annotated[int, typer.Option(help="Seed of the draw (the same seed draws the same items).")] = 0,
    strata: Annotated[Path | None, typer.Option(help="CSV item_id,stratum for --strategy stratified (e.g. domain or system).")] = None,
    labels: Annotated[Path | None, typer.Option(help="Labels collected so far: fit a residual model for the uncertainty.")] = None,
    floor: Annotated[float, typer.Option(min=0.0, max=1.0, help="Share of the budget spread uniformly (uncertainty design): no weight exceeds 1/floor times a uniform one.")] = 0.5,
    plan: Annotated[bool, typer.Option("--plan", help="Print the labels each design needs for --target-width (from --labels) instead of drawing picks.")] = False,
    target_width: Annotated[float | None, typer.Option("--target-width", help="Total interval width the --plan aims at.")] = None,
    alpha: Annotated[float, typer.Option("--alpha", help="1 - confidence of the planned interval.")] = 0.1,
    check: Annotated[bool, typer.Option("--check/--no-check", help="Check a design on --labels before it runs (uniform picks when it does not help); --no-check runs the design asked for unchecked.")] = True,
) -> None:
    """Choose the items to label so that `estimate --picks` gets the most certainty per label.

    Every judged item gets an inclusion probability pi > 0 (the design) and a draw says whether it is picked; label
    the picked items, then `scijudge estimate --picks picks.csv` weights each label by 1/pi (active PPI) or by
    stratum (stratified PPI), so the estimate stays unbiased. Uncertainty comes from the judge's rating
    distributions (--mode decision or --rating-probs), several models' disagreement, or a residual model (--labels).

    Example: scijudge select-labels --run runs/demo.sqlite -j expertqa.claim_correctness --budget 3 --out picks.csv   (after `scijudge demo`)
    """
    from scijudge.estimation.select import plan_table, select_labels
    from scijudge.metrics.frames import Judgments

    if plan and (target_width is None or labels is None):
        raise InputError("--plan needs --target-width and the labels collected so far (--labels)",
                         field="--target-width" if target_width is None else "--labels")
    if not plan and budget is None:
        raise InputError("give --budget N (the labels to collect)", field="--budget")
    if not plan and out is None:
        raise InputError("give --out PICKS.csv (or --plan for the table of labels needed)", field="--out")
    if not 0 < alpha < 1:
        raise InputError(f"--alpha must be between 0 and 1, got {alpha}", field="--alpha")

    from scijudge._files import refuse_overwrite

    if out is not None:
        refuse_overwrite(out, [strata, labels], stores=run)
    judgments = Judgments.read(list(run)).frame
    mapping = _strata(strata) if strata is not None else None
    known = _labels(labels, judge) if labels is not None else None
    if plan:
        assert target_width is not None and known is not None
        table = plan_table(judgments, judge=judge, labels=known, width=target_width, alpha=alpha, strata=mapping,
                           tau=floor)
        from scijudge.commands._console import out as console_out
        from scijudge.report.text import print_frame

        if out is not None:
            _write_csv(table, out)
        print_frame(table, f"Labels needed for a {1 - alpha:.0%} interval of width {target_width:g}, per design "
                    "(labels_needed: a fixed-n interval sized in advance; labels_sequential: the anytime-valid "
                    "sequence of estimate --sequential, looking after every label)", console_out)
        return
    assert out is not None and budget is not None
    picks = select_labels(judgments, judge=judge, budget=budget, strategy=strategy, seed=seed, strata=mapping,
                          labels=known, tau=floor, check=check)
    _write_csv(picks, out)
    for note in picks.attrs.get("notes") or []:
        typer.echo(f"note: {note}")
    design = picks.design.iloc[0]
    typer.echo(f"wrote {out}: {int(picks.picked.sum())} of {len(picks)} items picked (expected {picks.pi.sum():.1f}; "
               f"design {design}" + (f", uncertainty from {picks.uncertainty_source.iloc[0]}"
                                     if design == "uncertainty" and picks.uncertainty_source.iloc[0] else "") + ")")


def _write_csv(frame: object, out: Path) -> None:
    """Write whole or not at all (a temporary file renamed into place; the clash with an input is checked first)."""
    from scijudge._files import atomic_output

    with atomic_output(out, newline="") as handle:
        frame.to_csv(handle, index=False)  # type: ignore[attr-defined]


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
