"""CLI commands `scijudge calibrate` and `scijudge perturb`, as plain functions the typer app registers."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from scijudge.errors import InputError


_SCALE_HELP = ("Scale 'lo,hi,step' (or 'lo,hi,step,continuous') for every judge, or 'JUDGE=lo,hi,step[,continuous]'; "
               "repeatable (default: the run's stored scale, the spec matching the stored hash, or the family's).")
_SPEC_HELP = "A judge spec file (TOML) the runs used, for its scale (matched by the stored spec hash); repeatable."


def _robustness(judgments: Any, n_boot: int, seed: int) -> Any:
    """The robustness table of ``scijudge robustness`` (``metrics.robustness.robustness_table``: pairs matched by
    contender, judge, part and original item, a cluster bootstrap over original items), or None without variants
    (neither ``scijudge perturb`` ids nor imported ``variant_of``)."""
    from scijudge.metrics.robustness import label_variants, robustness_table

    if not (label_variants(judgments)["level"] != "").any():
        return None
    return robustness_table(judgments, n_boot=n_boot, seed=seed).table


def _attach_jury_and_provenance(result: Any, judgments: Any, label_frame: Any, runs: list[Path]) -> None:
    """What the labels are (for report.json/html), and each jury against its members (Holm) when a jury is among
    the runs: the report then shows the jury's verdict beside the leaderboard's."""
    from scijudge.labels import provenance_note

    text, from_model = provenance_note(label_frame)
    result.provenance = {"labels": text, "from_model": from_model,
                         "warning": ("some labels come from a model (source llm): agreement with them is agreement "
                                     "with another model, not calibration against humans") if from_model else ""}
    if not judgments["model"].astype(str).str.startswith("jury:").any():
        return
    from scijudge.metrics.frames import Judgments
    from scijudge.metrics.jury import jury_vs_best_member

    everything = Judgments.read(runs).frame  # the member lists are in the jury rows' result
    try:
        result.jury_vs_best_member = jury_vs_best_member(everything, label_frame)
    except InputError as exc:
        result.notes.append(f"juries against their members: {exc}")


def calibrate_cmd(
    labels: Annotated[Path, typer.Option("--labels", "-l", help="Human labels: JSONL or CSV (item_id, judge, part, score|verdict, annotator).")],
    run: Annotated[list[Path], typer.Option("--run", "-r", help="Run store to compare; repeat for several runs.")],
    judge: Annotated[list[str] | None, typer.Option("--judge", "-j", help="Only these judges: name, prefix (yescieval.qa) or glob; repeatable.")] = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Folder for report.html, report.json and CSV tables.")] = None,
    scale: Annotated[list[str] | None, typer.Option(help=_SCALE_HELP)] = None,
    n_boot: Annotated[int, typer.Option(help="Bootstrap resamples of items (0: no intervals).")] = 1000,
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap resampling.")] = 0,
    allow_extra_labels: Annotated[bool, typer.Option(help="Accept labels for items no run judged (ignored).")] = False,
    spec: Annotated[list[Path] | None, typer.Option("--spec", help=_SPEC_HELP)] = None,
    tasks: Annotated[Path | None, typer.Option("--tasks", help="ResearchRubrics task file, for checklist labels that name a criterion by its position in the task.")] = None,
    selective_target: Annotated[float, typer.Option("--selective-target", help="Selective curve: the agreement with humans whose guaranteed threshold is marked.")] = 0.8,
    selective_risk: Annotated[float, typer.Option("--selective-risk", help="Selective curve: the probability that guarantee fails.")] = 0.1,
    selective_tolerance: Annotated[float, typer.Option("--selective-tolerance", help="Selective curve: agreement is |score - human| <= T.")] = 0.0,
) -> Any:
    """Compare judges with human labels: agreement, bias, intervals, paired tests, robustness and a report.

    Example: scijudge calibrate --labels datasets/yescieval_example/labels.jsonl --run panel.sqlite --out report/   (panel.sqlite from: scijudge import-judgments datasets/jury_example/panel.jsonl --run panel.sqlite; repeat --run to compare stores)
    """
    from scijudge.metrics.calibration import calibrate
    from scijudge.metrics.frames import named_by_path
    from scijudge.commands._console import console, in_cli_words, settle_after_imports
    from scijudge.report import calibration as report

    settle_after_imports()  # after the heavy imports (the report's included)
    specs, selective = _checked_options(run, n_boot, out, scale, spec, selective_target, selective_risk,
                                        selective_tolerance)
    label_frame, read, scales, task_list = _inputs(labels, run, judge, scale, tasks)
    judgments = read.frame
    with _status(console, f"calibrating {judgments['judge'].nunique()} judge(s) against {len(label_frame)} "
                          f"label(s), {n_boot} bootstrap resamples ..."):
        with named_by_path(list(run)):
            result = calibrate(read.originals(), label_frame, scale=scales, n_boot=n_boot, seed=seed,
                               allow_extra_labels=allow_extra_labels, specs=specs, tasks=task_list,
                               run_scales=read.scales, selective=selective)
            robust = _robustness(judgments, n_boot, seed)
            _attach_jury_and_provenance(result, read.originals(), label_frame, list(run))
    result.notes[:] = [in_cli_words(note) for note in result.notes]  # the options, not the Python keywords
    _show(report, result, robust, label_frame, out, inputs=[labels, *run, *(spec or []), tasks])
    return result


def _checked_options(run: list[Path], n_boot: int, out: Path | None, scale: list[str] | None,
                     spec: list[Path] | None, target: float, risk: float, tolerance: float) -> tuple[list[Any], Any]:
    """Every option checked before a label or a stored judgment is read: the spec files and the selective curve's
    settings, read."""
    from scijudge.metrics.selective.curve import selective_options
    from scijudge.spec.judge_spec import load_spec_file
    from scijudge.spec.scales import parse_scale_options

    if not run:
        raise InputError("give at least one --run", field="run")
    if n_boot < 0:
        raise InputError(f"--n-boot must be 0 (no intervals) or more, got {n_boot}", field="n_boot")
    if out is not None:
        from scijudge._files import check_output_folder

        check_output_folder(out)  # before anything is computed
    parse_scale_options(scale)
    selective = selective_options({"target": target, "risk": risk, "tolerance": tolerance})
    specs = [load_spec_file(path) for path in spec or []]
    for path in run:
        if not Path(path).exists():
            raise InputError("run store not found", file=path)
    return specs, selective


def _inputs(labels: Path, run: list[Path], judge: list[str] | None, scale: list[str] | None,
            tasks: Path | None) -> tuple[Any, Any, Any, Any]:
    """The labels, the runs' judgments (``Judgments``, score columns only), the --scale mapping and the tasks."""
    from scijudge.labels import load_labels_frame
    from scijudge.metrics.frames import CALIBRATE_COLUMNS, Judgments, judge_matches
    from scijudge.spec.scales import scale_mapping

    label_frame = load_labels_frame(labels)  # = labels_to_frame(load_labels(labels)), without an object per row
    read = Judgments.read(list(run), columns=CALIBRATE_COLUMNS)  # the attempt logs and free text are not read
    if judge:
        read = read.only(list(judge))
        label_frame = label_frame[label_frame["judge"].map(lambda j: judge_matches(j, list(judge)))]
    scales = scale_mapping(sorted(read.frame["judge"].unique()), scale)  # --scale only: runs' scales below
    task_list = None
    if tasks is not None:
        from scijudge.importers.researchrubrics import load_tasks

        task_list = load_tasks(tasks)
    return label_frame, read, scales, task_list


def _show(report: Any, result: Any, robust: Any, label_frame: Any, out: Path | None, inputs: list[Any]) -> None:
    """The report files first (a closed pipe must not lose them), then what the labels are and the summary."""
    from scijudge.report.console import plain_console

    from scijudge.commands._console import console
    from scijudge.labels import provenance_note

    if out is not None:
        with _status(console, "writing the report ..."):
            paths = report.write_report(result, out, robust, inputs=inputs)
        console.print(f"report written to {paths['html']} (numbers in {paths['json'].name})", highlight=False)
    source_text, from_model = provenance_note(label_frame)
    console.print(source_text, highlight=False)
    if from_model:
        console.print("[yellow]warning:[/] some labels come from a model (source llm): agreement with them is "
                      "agreement with another model, not calibration against humans", highlight=False, soft_wrap=True)
    report.print_summary(result, robust, plain_console())


def _status(console: Any, text: str) -> Any:
    """A spinner with what is being done, on a terminal only (stderr; piped output stays clean)."""

    return console.status(text) if console.is_terminal else contextlib.nullcontext()


def perturb_cmd(
    items: Annotated[Path, typer.Argument(help="Items in canonical JSONL.")],
    level: Annotated[Literal["subtle", "extreme", "both"], typer.Option("--level", help="subtle, extreme or both.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Where to write the variants (JSONL).")],
    seed: Annotated[int, typer.Option(help="Same seed, same variants.")] = 0,
    rubric: Annotated[list[str] | None, typer.Option("--rubric", help="Only these rubrics (cohesion, ..., injection); repeatable.")] = None,
    pools: Annotated[Path | None, typer.Option(help="Folder of sentence pools replacing the shipped ones (same file names).")] = None,
    with_original: Annotated[bool, typer.Option("--with-original/--no-original", help="Also write the original items, so one run judges both.")] = True,
) -> int:
    """Write adversarial answer variants per rubric (YESciEval recipe) plus a prompt-injection probe.

    Example: scijudge perturb datasets/yescieval_example/items.jsonl --level extreme --seed 1 --out perturbed.jsonl
    """
    from scijudge._files import atomic_output, refuse_overwrite
    from scijudge.data import load_items
    from scijudge.data.variants import perturb_items

    refuse_overwrite(out, [items, pools])
    loaded = load_items(items)
    models = loaded[0] if isinstance(loaded, tuple) else loaded
    dicts = [m.model_dump(exclude_none=True) if hasattr(m, "model_dump") else dict(m) for m in models]
    not_made: list[dict[str, Any]] = []
    variants = perturb_items(dicts, level, seed, list(rubric) if rubric else None, pools=pools,
                             include_original=with_original, not_made=not_made)
    out = Path(out)
    with atomic_output(out) as handle:  # whole or not at all
        for variant in variants:
            handle.write(json.dumps(variant, ensure_ascii=False) + "\n")
    from scijudge.report.console import plain_console

    console = plain_console(highlight=False)
    console.print(f"wrote {len(variants)} items to {out}; {len(not_made)} variants could not be made")
    counts: dict[tuple[str, str, str], int] = {}
    for miss in not_made:
        key = (miss["rubric"], miss["level"], miss["reason"])
        counts[key] = counts.get(key, 0) + 1
    for (rub, lv, reason), count in sorted(counts.items()):
        console.print(f"  {rub} {lv}: {count} not made ({reason})")
    return len(variants)
