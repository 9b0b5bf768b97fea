"""CLI command `scijudge estimate`: mean human score per (judge, model, group) by PPI++, with conformal sets."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from scijudge.errors import InputError


def _load_judgments(runs: list[Path], judge: list[str] | None, scale: list[str] | None) -> tuple[Any, dict[str, Any]]:
    """Judgments of the runs (perturbed variants left out) and the scale of each judge: --scale, else the one
    scale the runs record (``Judgments.recorded_scales``: runs that disagree on it are refused, in any order)."""
    from scijudge.spec.scales import scale_mapping

    from scijudge.metrics.frames import Judgments, judge_matches

    read = Judgments.read(runs)
    judgments = read.originals()
    if judge:
        judgments = judgments[judgments["judge"].map(lambda j: judge_matches(j, list(judge)))]
    if judgments.empty:
        raise InputError("no judgment to estimate from in the runs" + (f" for judges {list(judge)}" if judge else ""),
                         field="judge" if judge else "run")
    judges = sorted(judgments["judge"].unique())
    return judgments, read.scales_with(scale_mapping(judges, scale), judges)


def _cascade_notes(judgments: Any) -> list[str]:
    """One line per cascade store among the runs: its ok judgments are only the trusted subset."""
    out = []
    for model, rows in judgments[judgments["model"].astype(str).str.startswith("cascade:")].groupby("model"):
        escalated = int(((rows["status"] == "abstained") & (rows["reason"].astype(str) == "escalated")).sum())
        out.append(f"{model} is a cascade: its judgments are the trusted subset ({len(rows) - escalated} of "
                   f"{len(rows)}; the {escalated} escalated abstain and are left out), so its rows estimate over the "
                   "items the cascade trusted, not over all items")
    return out


def _item_maps(items: Path | None, by: str | None, pair_by: str | None) -> tuple[dict | None, dict | None]:
    if by is None and pair_by is None:
        return None, None
    if items is None:
        raise InputError("--by and --pair-by read item meta: give the items file with --items", field="items")
    from scijudge.data import load_items
    from scijudge.estimation import item_meta_map

    loaded, _ = load_items(items)
    return (item_meta_map(loaded, by, path=items) if by else None,
            item_meta_map(loaded, pair_by, path=items) if pair_by else None)


def _print_tables(table: Any, coverage: Any, needed: Any) -> None:
    """Rich tables on a terminal (ids and numbers wrap, never cut), CSV with full values when piped."""
    from scijudge.commands._console import out
    from scijudge.report.text import print_frame

    estimand = str(table["estimand"].iloc[0]) if len(table) else "mean human rating"
    print_frame(table[["judge", "model", "group", "method", "estimate", "lo", "hi", "n_labeled", "n_unlabeled",
                       "n_abstained", "n_label_only", "kind", "paired", "estimand", "design", "recommended",
                       "note"]],
                f"Estimated {estimand} (interval {1 - float(table['alpha'].iloc[0]):.0%})" if len(table) else "",
                out)
    if not coverage.empty:
        print_frame(coverage[[c for c in ("judge", "model", "nonconformity", "alpha", "coverage_holdout",
                                          "coverage_se", "mean_set_size", "n_calibration") if c in coverage]],
                    "Conformal sets of human scores (target coverage = 1 - alpha)", out)
    if needed is not None:
        print_frame(needed, f"Labels needed for an interval of width {needed['target_width'].iloc[0]:g}", out)


_MODEL_WARNING = (" some labels come from a model (source llm): these estimates target that model's scores, not "
                  "human ones")


def _with_provenance(table: Any, labels: Any, source_text: str, from_model: bool) -> Any:
    """The table with a ``label_sources`` column (what the labels are) and an estimand that says when the labels
    came from a model: estimate.csv carries its provenance, not only the console."""
    table = table.copy()
    table["label_sources"] = source_text.removeprefix("labels: ")
    if from_model:
        sources = labels["label_source"].fillna("unknown") if "label_source" in labels else None
        every = sources is not None and bool((sources == "llm").all())
        table["estimand"] = table["estimand"].str.replace(
            "human", "model-made label" if every else "human (some labels made by a model)", regex=False)
    return table


def _recommendation_line(table: Any) -> str:
    """One line: which label-corrected estimate the table recommends, and how often."""
    from scijudge.estimation.estimate import JOINT_SEPARATOR, REFERENCE_ALPHA

    joint = table["model"].astype(str).str.contains(JOINT_SEPARATOR, regex=False) & (table["method"] == "ppi-cal")
    chosen = table.loc[table["recommended"].astype(bool) & ~joint, "method"].value_counts()
    if chosen.empty:
        return "recommended: none (too few labels for an interval)"
    parts = [f"{method} for {int(n)} of {int(chosen.sum())} rows" for method, n in chosen.items()]
    present = [m for m in ("ppi", "ppi-cal", "human-only") if (table["method"] == m).any()]
    named = {"ppi": "ppi (PPI++)", "ppi-cal": "ppi-cal (PPI++ on a cross-fitted isotonic calibration of the score)",
             "human-only": "human-only"}
    line = (f"recommended (the narrowest at alpha = {REFERENCE_ALPHA:g} of {', '.join(named[m] for m in present)}; "
            "one choice for every alpha, ties to the simpler; never a zero-width interval): " + ", ".join(parts))
    if joint.any():
        won = table[joint & table["recommended"].astype(bool)]
        line += (f"; ppi-cal on several models' scores at once is narrower than every single model for "
                 f"{len(won)} of {int(joint.sum())} judge(s)")
    return line


def _check_sequential(target_width: float | None, picks: Path | None, compare: Any, out: Path | None,
                      inputs: list[Path | None]) -> None:
    """``--sequential``'s requests refused before anything is read: no width, picks or a comparison, or an output
    that would overwrite an input."""
    if target_width is None:
        raise InputError("--sequential needs --target-width W (the width at which to stop)", field="target-width")
    if picks is not None or compare:
        raise InputError("--sequential is for labels picked uniformly at random, one mean per (judge, model): "
                         "leave out --picks and --compare", field="picks" if picks is not None else "compare")
    if out is not None:
        from scijudge._files import refuse_overwrite

        refuse_overwrite(out / "sequential.csv", inputs)


def _sequential_out(units: Any, loaded: Any, width: float, alpha: float, start: int, t_opt: int,
                    out: Path | None) -> Any:
    """``estimate --sequential``: the sequences to DIR/sequential.csv, one line per sequence on where it stops."""
    from scijudge.commands._console import console
    from scijudge.estimation.sequential import path_text, sequential_units, stop_line

    table = sequential_units(units, loaded, target_width=width, alpha=alpha, t_opt=t_opt, start=start)
    if out is not None:
        from scijudge._files import atomic_output

        with atomic_output(out / "sequential.csv", newline="") as handle:
            table.to_csv(handle, index=False)
        console.print(f"confidence sequences written to {out / 'sequential.csv'} (one row per number of labels)",
                      highlight=False, soft_wrap=True)
    console.print(f"anytime-valid prediction-powered confidence sequences ({1 - alpha:.0%} at every number of labels "
                  f"at once; labels in the order given; tightest near {t_opt}, first interval at {start}):",
                  highlight=False, soft_wrap=True)
    for stop in table.attrs["stops"]:
        console.print("  " + stop_line(stop, width, alpha, start), highlight=False, soft_wrap=True)
        path = path_text(table, stop["judge"], stop["model"], start, stop["stop"])
        if path:
            console.print("    path: " + path, highlight=False, soft_wrap=True)
    return table


def estimate_cmd(
    run: Annotated[list[Path], typer.Option("--run", "-r", help="Run store; repeat for several runs.")],
    labels: Annotated[Path, typer.Option("--labels", "-l", help="Human labels on a random subset of the judged items: JSONL or CSV.")],
    by: Annotated[str | None, typer.Option("--by", help="Group by this item meta field (read from --items); without it, each run is a group.")] = None,
    items: Annotated[Path | None, typer.Option("--items", help="Items JSONL whose meta holds the --by / --pair-by fields (the run store holds no item meta).")] = None,
    compare: Annotated[tuple[str, str] | None, typer.Option("--compare", help="Two groups (runs or --by values), two models or two judges A B: also estimate A - B (paired when they share items or --pair-by keys).")] = None,
    pair_by: Annotated[str | None, typer.Option("--pair-by", help="Item meta field that pairs items across groups (e.g. the question), for paired differences.")] = None,
    alpha: Annotated[float, typer.Option("--alpha", help="1 - confidence of the intervals.")] = 0.05,
    coverage: Annotated[float, typer.Option("--coverage", help="Target coverage of the conformal sets of human scores.")] = 0.9,
    target_width: Annotated[float | None, typer.Option("--target-width", help="Print how many labels give an interval this wide (PPI++ and human only); with --sequential, the width at which the sequence is certain enough.")] = None,
    judge: Annotated[list[str] | None, typer.Option("--judge", "-j", help="Only these judges: name, prefix or glob; repeatable.")] = None,
    scale: Annotated[list[str] | None, typer.Option(help="Scale 'lo,hi,step' (or 'lo,hi,step,continuous') for every judge, or 'JUDGE=lo,hi,step[,continuous]'; repeatable (default: the run's stored scale, the judge's spec or family).")] = None,
    human: Annotated[Literal["mean", "median"], typer.Option("--human", help="What the estimate targets: 'mean' (each item's mean over its annotators, averaged: the mean human rating) or 'median' (the median consensus snapped to the scale, as calibrate uses).")] = "mean",
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Folder for estimate.csv, conformal.csv, conformal_coverage.csv, labels_needed.csv, estimate.html.")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the conformal calibration/held-out splits.")] = 0,
    picks: Annotated[Path | None, typer.Option("--picks", help="picks.csv from `scijudge select-labels`: the labels were chosen by that design; estimates weight them by 1/pi (active PPI) or by stratum.")] = None,
    sequential: Annotated[bool, typer.Option("--sequential", help="Anytime-valid confidence sequences (valid at every number of labels at once, for labels picked uniformly at random): labels read in the order given (labelled_at, else file order); writes DIR/sequential.csv (judge, model, n, estimate, lo, hi) and prints where each sequence first is --target-width wide.")] = False,
    start: Annotated[int, typer.Option("--start", min=2, help="With --sequential: labels before the first interval.")] = 20,
    t_opt: Annotated[int, typer.Option("--t-opt", min=1, help="With --sequential: the number of labels where the sequence is tightest.")] = 100,
) -> Any:
    """Mean human score per (judge, model, group): PPI++ from judge scores plus a random subset of human labels,
    beside human-only and judge-only estimates; conformal sets of human scores per judgment; labels needed.

    Groups are item meta values (--by FIELD, read from --items ITEMS.jsonl) or, without --by, the runs.
    Methods: ppi (PPI++), ppi-cal (PPI++ on a cross-fitted isotonic calibration of the score; with several models,
    one row on all their scores at once), human-only, judge-only; with --picks, active or stratified PPI.
    With --sequential: the anytime-valid prediction-powered confidence sequence per (judge, model) and per judge
    over its models at once, and where it first is --target-width wide.

    Example: scijudge estimate --run panel.sqlite --labels datasets/yescieval_example/labels.jsonl --items datasets/yescieval_example/items.jsonl --by intended_quality --compare high low --out est/   (panel.sqlite from: scijudge import-judgments datasets/jury_example/panel.jsonl --run panel.sqlite; the confidence sequences: scijudge estimate --run panel.sqlite --labels datasets/yescieval_example/labels.jsonl --sequential --target-width 1 --start 5 --out seq/)
    """
    from scijudge.spec.scales import parse_scale_options
    from scijudge.estimation import conformal_units, estimate_units, labels_needed_units, match_units
    from scijudge.labels import labels_to_frame, load_labels, provenance_note

    if not run:
        raise InputError("give at least one --run", field="run")
    if not 0 < alpha < 1:
        raise InputError(f"--alpha must be between 0 and 1, got {alpha}", field="alpha")
    if not 0 < coverage < 1:
        raise InputError(f"--coverage must be between 0 and 1, got {coverage}", field="coverage")
    if target_width is not None and target_width <= 0:
        raise InputError(f"--target-width must be > 0, got {target_width}", field="target-width")
    if out is not None:
        from scijudge._files import check_output_folder

        check_output_folder(out)  # before anything is computed
    if sequential:
        _check_sequential(target_width, picks, compare, out, [*run, labels, items])
    design = None
    if picks is not None:  # read first: a bad picks file is reported before any store is read
        from scijudge.estimation.select import read_picks

        design = read_picks(picks)
    parse_scale_options(scale)  # a misspelt --scale, and a missing store, before any label or store is read
    for path in run:
        if not Path(path).exists():
            raise InputError("run store not found", file=path)
    loaded = load_labels(labels)
    label_frame = labels_to_frame(loaded)
    judgments, scales = _load_judgments(list(run), judge, scale)
    groups, pairs = _item_maps(items, by, pair_by)
    from scijudge.metrics.frames import named_by_path

    with named_by_path(list(run)):
        units = match_units(judgments, label_frame, groups=groups, pairs=pairs, group_field=by or "group",
                            scale=scales, estimand=human)
    if sequential:
        assert target_width is not None
        return _sequential_out(units, loaded, target_width, alpha, start, t_opt, out)
    table = estimate_units(units, compare=list(compare) if compare else None, alpha=alpha, picks=design)
    source_text, from_model = provenance_note(label_frame)
    table = _with_provenance(table, label_frame, source_text, from_model)
    sets, cover = conformal_units(units, round(1 - coverage, 12), seed=seed)  # 0.1, not 0.09999999999999998
    needed = labels_needed_units(units, target_width, alpha) if target_width is not None else None
    from scijudge.commands._console import console

    if out is not None:  # files first: a closed pipe (| head) must not lose them
        from scijudge._files import atomic_output, refuse_overwrite
        from scijudge.report.estimate import write_estimate_html

        tables = {"estimate.csv": table, "conformal.csv": sets, "conformal_coverage.csv": cover,
                  **({"labels_needed.csv": needed} if needed is not None else {})}
        for name in (*tables, "estimate.html"):  # every file checked before the first is written
            refuse_overwrite(out / name, [*run, labels, picks, items])
        for name, frame in tables.items():
            with atomic_output(out / name, newline="") as handle:
                frame.to_csv(handle, index=False)
        write_estimate_html(table, out / "estimate.html", cover, needed,
                            provenance=source_text + (_MODEL_WARNING if from_model else ""))
        console.print(f"estimates written to {out / 'estimate.csv'} (conformal sets in conformal.csv)")
    for note in [*(units.notes or []), *_cascade_notes(judgments)]:
        console.print(f"[yellow]warning:[/] {note}", highlight=False, soft_wrap=True)
    console.print(source_text, highlight=False)
    if from_model:
        console.print(f"[yellow]warning:[/]{_MODEL_WARNING}", highlight=False, soft_wrap=True)
    from scijudge.report.estimate import design_warnings

    for warning in design_warnings(table):
        console.print(f"[yellow]warning:[/] {warning}", highlight=False, soft_wrap=True)
    console.print(_recommendation_line(table), highlight=False, soft_wrap=True)
    flagged = int((table["note"].astype(str) != "").sum())
    if flagged:
        console.print(f"[yellow]note:[/] {flagged} of {len(table)} rows carry a note (few units, zero width, "
                      "identical inputs or an interval clipped to the scale): see the note column",
                      highlight=False, soft_wrap=True)
    try:
        _print_tables(table, cover, needed)
    except BrokenPipeError:  # the reader stopped early (| head): what it read is what it wanted
        import os
        import sys

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return table
