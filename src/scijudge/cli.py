"""The ``scijudge`` command line: judge items, list judges, export runs (and more, registered below)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from scijudge.errors import EXIT_INCOMPLETE, EXIT_INTERRUPTED, ScijudgeError
from scijudge.redaction import redact, redact_argv

app = typer.Typer(
    name="scijudge",
    help="Optimizable LLM-as-a-judge modules for scientific text.\n\nExample: scijudge judge items.jsonl --judge 'yescieval.qa.*' --model openai/gpt-4o-mini",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console(stderr=True)
out = Console()


def _fail(exc: BaseException) -> None:
    """One line, no traceback: credentials redacted, and text from data never read as terminal markup."""
    console.print(f"[bold red]error:[/] {escape(redact(str(exc)))}", highlight=False, soft_wrap=True)
    raise typer.Exit(getattr(exc, "exit_code", 2))


def _os_error(exc: OSError) -> ScijudgeError:
    """A file-system failure (a path under a file, no permission, disk full) as one line naming the path."""
    from scijudge.errors import InputError

    where = exc.filename if exc.filename is not None else None
    return InputError(f"cannot use this path: {exc.strerror or type(exc).__name__}", file=where)


# Commands that load judge specs: they take --trust-spec-code (spec code outside scijudge runs only then).
SPEC_COMMANDS = frozenset({"judge", "demo", "calibrate", "perturb", "compliance", "optimize"})
_TRUST_HELP = ("Run code that specs name outside scijudge (prepare = 'module:function', output = 'module:Class'). "
               "Specs with code are code: only for specs you trust.")


def _with_trust_option(fn, wrapper):  # noqa: ANN001, ANN202
    """Give ``wrapper`` a ``--trust-spec-code`` option (declared in its signature, read before ``fn`` runs)."""
    import inspect

    option = inspect.Parameter("trust_spec_code", inspect.Parameter.KEYWORD_ONLY, default=False,
                               annotation=Annotated[bool, typer.Option("--trust-spec-code", help=_TRUST_HELP)])
    signature = inspect.signature(fn, eval_str=True)
    wrapper.__signature__ = signature.replace(parameters=[*signature.parameters.values(), option])
    wrapper.__annotations__ = {**getattr(fn, "__annotations__", {}), "trust_spec_code": option.annotation}
    return wrapper


def command(*args, **kwargs):  # noqa: ANN001, ANN201 - thin wrapper over app.command
    """Register a CLI command whose ScijudgeErrors are printed as one clear line, not a traceback."""
    import functools

    name = args[0] if args else kwargs.get("name")

    def decorate(fn):  # noqa: ANN001, ANN202
        trust_option = name in SPEC_COMMANDS and "trust_spec_code" not in getattr(fn, "__annotations__", {})

        @functools.wraps(fn)
        def wrapper(*a, **k):  # noqa: ANN002, ANN003, ANN202
            if trust_option:
                from scijudge.specs import trust_spec_code

                if k.pop("trust_spec_code", False):
                    trust_spec_code(True)
            try:
                return fn(*a, **k)
            except ScijudgeError as exc:
                _fail(exc)
            except OSError as exc:
                _fail(_os_error(exc))

        if trust_option:
            _with_trust_option(fn, wrapper)
        return app.command(*args, **kwargs)(wrapper)

    return decorate


@command("judges")
def judges_cmd(
    family: Annotated[Optional[str], typer.Option(help="Only this family (likert, pairwise, checklist, ...).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """List the shipped judges: name, family, inputs and a one-line description.

    Example: scijudge judges --family likert
    """
    from scijudge.specs import list_specs

    specs = [s for s in list_specs() if family is None or s.family == family]
    if as_json:
        out.print_json(json.dumps([{"name": s.name, "family": s.family, "inputs": [i.name for i in s.inputs],
                                    "description": s.description} for s in specs]))
        return
    table = Table("name", "family", "inputs", "description", title=f"{len(specs)} judges")
    table.columns[0].no_wrap = True
    for s in specs:
        inputs = ", ".join(i.name + ("?" if i.optional else "") for i in s.inputs)
        table.add_row(escape(s.name), s.family, escape(inputs), escape(s.description))
    Console(width=max(out.width, 160)).print(table)


@command("judge")
def judge_cmd(
    items: Annotated[Path, typer.Argument(help="Items in canonical JSONL (see `scijudge schema`).")],
    judge: Annotated[list[str], typer.Option("--judge", "-j", help="Judge name, glob (yescieval.qa.*) or spec path; repeatable.")],
    model: Annotated[str, typer.Option("--model", "-m", help="DSPy/litellm model string, or hf:<model or adapter>.")],
    api_base: Annotated[Optional[str], typer.Option(help="OpenAI-compatible server URL, e.g. http://localhost:8000/v1.")] = None,
    run: Annotated[Optional[Path], typer.Option(help="Run store (SQLite). Re-running with the same store resumes.")] = None,
    concurrency: Annotated[int, typer.Option(min=1, help="Judgments in flight at once.")] = 8,
    processes: Annotated[int, typer.Option(min=1, help="Worker processes (API models only): for very fast endpoints, where one process's CPU is the limit.")] = 1,
    limit: Annotated[Optional[int], typer.Option(min=1, help="Judge at most N pending judgments.")] = None,
    skip_invalid: Annotated[bool, typer.Option(help="Judge the valid items and list the invalid lines.")] = False,
    retry_abstained: Annotated[bool, typer.Option(help="Judge earlier abstentions again.")] = False,
    rating_probs: Annotated[bool, typer.Option(help="Ask for token logprobs and store P(rating) (models that return logprobs).")] = False,
    cache: Annotated[bool, typer.Option(help="Use DSPy's response cache.")] = True,
    timeout: Annotated[float, typer.Option(help="Deadline in seconds for a whole request, connect to last byte (retried once; a streak of them stops the run).")] = 60.0,
    retry_after_cap: Annotated[float, typer.Option(help="Longest Retry-After (seconds) a rate limit may pause the run for; a longer one stops the run.")] = 120.0,
    grace: Annotated[float, typer.Option(help="On Ctrl-C/SIGTERM, seconds to wait for requests in flight so that their answers are stored.")] = 10.0,
    max_tokens: Annotated[Optional[int], typer.Option(help="Max output tokens per call.")] = None,
    progress: Annotated[bool, typer.Option(help="Show a progress bar.")] = True,
    reports: Annotated[Optional[Path], typer.Option(help="Checklist judges: ITEMS is a ResearchRubrics task file and this is the reports folder (<sample_id>.md/.txt) or a JSONL of {sample_id, report}.")] = None,
    chunk_tokens: Annotated[Optional[int], typer.Option(min=1000, help="Checklist judges: token budget of one report chunk.")] = None,
    overlap_tokens: Annotated[Optional[int], typer.Option(min=0, help="Checklist judges: tokens shared by consecutive chunks (default: 1000, at most an eighth of --chunk-tokens).")] = None,
    allow_unknown_axes: Annotated[bool, typer.Option(help="Checklist judges: accept task axes outside ResearchRubrics' seven (kept as written).")] = False,
    preset: Annotated[Optional[str], typer.Option(help="Prompt preset for every judge, e.g. 'yescieval-native' (YESciEval's own layout for its released judges).")] = None,
    block: Annotated[Optional[list[str]], typer.Option("--block", help="Fill a judge's text block from a file: NAME=FILE (repeatable); NAME= empties it (e.g. --block task_context=).")] = None,
    batch: Annotated[bool, typer.Option("--batch", help="Send the judgments through the provider's batch API (about half price, results within 24 h).")] = False,
    batch_size: Annotated[int, typer.Option(min=1, max=50000, help="Lines per batch.")] = 5000,
    batch_poll: Annotated[float, typer.Option(min=0.0, help="Seconds between status checks of running batches.")] = 30.0,
    batch_fallback: Annotated[str, typer.Option(help="Where lines that failed in a batch go: next-strategy (a follow-up batch) or direct (direct calls).")] = "next-strategy",
    ray: Annotated[Optional[str], typer.Option("--ray", metavar="ADDRESS", help="Run hf: judges on Ray actors (one engine per GPU): 'local' starts Ray on this machine, or a cluster address (auto, ray://host:10001).")] = None,
    fused: Annotated[bool, typer.Option(help="Likert rubrics: judge all the selected rubrics in one call per item (one stored judgment per rubric).")] = False,
    layout: Annotated[str, typer.Option(help="Prompt order: rubric-first (default) or item-first (a local engine then shares each item's prefix across its rubrics).")] = "rubric-first",
) -> None:
    """Judge every item with every judge; each judgment is saved to the run store as it completes.

    Re-running with the same --run resumes: judgments already stored for the same item content, judge spec,
    model, endpoint and decoding settings are skipped; an edited item is judged again. Exit codes: 0 all
    done; 2 bad input; 3 stopped early (endpoint unreachable, auth, model not found, rate limit over the cap,
    a streak of failures, or another process writing the store); 4 some judgments got no answer (re-run to
    retry them); 130 interrupted (Ctrl-C/SIGTERM: answers in flight get --grace seconds and are stored; a
    second Ctrl-C quits at once).

    Example: scijudge judge datasets/yescieval_example/items.jsonl -j 'yescieval.qa.*' -m openai/gpt-4o-mini --run runs/qa.sqlite

    Checklist example: scijudge judge tasks.jsonl --reports reports/ -j researchrubrics.checklist -m openai/gpt-4o-mini

    Fused example: scijudge judge items.jsonl -j 'yescieval.qa.*' --fused --layout item-first -m hf:/models/adapter
    """
    from scijudge.data import load_items
    from scijudge.judges.base import build_judge
    from scijudge.lm import make_lm
    from scijudge.runs import Run
    from scijudge.specs import resolve_judges

    specs = resolve_judges(judge)
    if block or preset:  # issue 16: text blocks from files, and prompt presets
        from scijudge.blocks import apply_blocks_and_preset

        specs = apply_blocks_and_preset(specs, blocks=block or [], preset=preset)
    if reports is not None:
        from scijudge.importers.researchrubrics import load_checklist_items

        loaded, skipped = load_checklist_items(items, reports, skip_invalid=skip_invalid,
                                               any_axis=allow_unknown_axes)
    else:
        loaded, skipped = load_items(items, skip_invalid=skip_invalid)
    for s in skipped:
        console.print(f"[yellow]skipped[/] {escape(redact(str(s)))}", highlight=False, soft_wrap=True)
    lm_options = dict(api_base=api_base, cache=cache, timeout=timeout, max_tokens=max_tokens)
    judge_options = dict(rating_probs=rating_probs, chunk_tokens=chunk_tokens, overlap_tokens=overlap_tokens)
    chain_options = dict(retry_after_cap=retry_after_cap)
    _configure_chain(chain_options)
    lm = make_lm(model, **lm_options) if ray is None else None  # Ray actors load local models, not the driver
    judges = [build_judge(spec, lm=lm, **judge_options) for spec in specs] if lm is not None else []
    if judges and (fused or layout != "rubric-first"):  # issue 17 hook: fused judge and prompt layout
        from scijudge.errors import InputError
        from scijudge.judges.fused import FusedJudge
        from scijudge.judges.layout import apply_layout

        if processes > 1:
            raise InputError("--fused and --layout run in one process; drop --processes", field="processes")
        if fused:  # the Likert rubrics in one call per item; other judges (pairwise...) stay separate
            likert = [s for s in specs if s.family == "likert"]
            if len(likert) < 2:
                raise InputError("--fused needs at least two Likert rubrics among the judges", field="judge")
            judges = [FusedJudge(likert, lm=lm)] + [j for s, j in zip(specs, judges) if s.family != "likert"]
        judges = [apply_layout(j, layout) for j in judges]
    run_path = run or Path("runs") / f"{items.stem}.sqlite"
    store = Run(run_path).claim_writer()
    from scijudge.records import safe_endpoint
    from scijudge.vocab import score_scale_of

    store.set_meta(items=str(items), judges=[s.name for s in specs], model=model,
                   api_base=safe_endpoint(api_base) or None, argv=_safe_argv(),
                   # the score scale of each judge as its spec declared it, for calibration (issue 11)
                   scales={s.name: list(score_scale_of(s)) for s in specs if s.scale is not None})
    if skip_invalid:
        # Items that lack an input a judge needs are skipped with a message, not fatal, under --skip-invalid.
        valid = []
        for item in loaded:
            try:
                for j in judges:
                    j.inputs_for(item, j.parts(item)[0])
                valid.append(item)
            except ScijudgeError as exc:
                console.print(f"[yellow]skipped[/] {escape(redact(str(exc)))}", highlight=False, soft_wrap=True)
        loaded = valid
    stop = _StopOnSignal(grace)
    with stop:
        try:
            if batch or ray is not None:
                from scijudge.commands.batches import judge_scaled
                from scijudge.runner import JudgeRecipe

                recipes = [JudgeRecipe(spec, model, lm_options, judge_options, chain_options) for spec in specs]
                summary = judge_scaled(loaded, judges, recipes, store, batch=batch, batch_size=batch_size,
                                       batch_poll=batch_poll, batch_fallback=batch_fallback, ray=ray,
                                       concurrency=concurrency, limit=limit, retry_abstained=retry_abstained,
                                       console=console)
            elif processes > 1:
                from scijudge.runner import JudgeRecipe, judge_items_in_processes

                recipes = [JudgeRecipe(spec, model, lm_options, judge_options, chain_options) for spec in specs]
                summary = judge_items_in_processes(loaded, recipes, processes=processes, run=store,
                                                   concurrency=concurrency, limit=limit,
                                                   retry_abstained=retry_abstained, use_cache=cache,
                                                   stop=stop.event, grace=grace)
            else:
                summary = _run_with_progress(loaded, judges, store, concurrency, limit, retry_abstained, progress,
                                             stop=stop.event, grace=grace)
        except ScijudgeError as exc:
            partial = getattr(exc, "summary", None)
            if partial is not None:
                _print_summary(partial, run_path)
            console.print(f"[bold red]error:[/] {escape(redact(str(exc)))}", highlight=False, soft_wrap=True)
            console.print(f"resume with: {escape(_resume_command())}", highlight=False, soft_wrap=True)
            _exit(store, getattr(exc, "exit_code", 3))
    _print_summary(summary, run_path)
    if summary.interrupted:
        console.print(f"interrupted: {summary.judged} judgments stored in {run_path} this run"
                      + (f", {summary.abandoned} left unanswered" if summary.abandoned else "")
                      + f"\nresume with: {escape(_resume_command())}", highlight=False, soft_wrap=True)
        _exit(store, EXIT_INTERRUPTED)
    if summary.no_answer:
        console.print(f"[yellow]{summary.no_answer} judgments got no answer and were not stored;[/] re-run to retry "
                      f"them: {escape(_resume_command())}", highlight=False, soft_wrap=True)
        _exit(store, EXIT_INCOMPLETE)
    store.close()


def _configure_chain(options: dict) -> None:  # noqa: ANN001
    """Apply run-wide chain settings (e.g. the Retry-After cap) to the process-wide chain."""
    from dataclasses import replace

    from scijudge.judges.base import default_chain

    chain = default_chain()
    chain.config = replace(chain.config, **options)


def _exit(store, code: int) -> None:  # noqa: ANN001
    """Leave now: the store has every completed judgment committed; threads still waiting on a request are
    abandoned rather than joined."""
    import threading

    sys.stdout.flush()
    sys.stderr.flush()
    try:
        store.close()
    finally:
        waiting = [t for t in threading.enumerate()  # the runner's own request threads, still busy
                   if t.name.startswith("scijudge") and not t.daemon and t.is_alive()]
        if waiting:  # a request still in flight would hold the interpreter's exit: abandon it
            os._exit(code)
        raise typer.Exit(code)  # nothing left running: exit normally (and usable from CliRunner)


def _resume_command() -> str:
    import shlex

    return "scijudge " + " ".join(shlex.quote(a) for a in _safe_argv())


class _StopOnSignal:
    """First Ctrl-C/SIGTERM: stop sending and let requests in flight finish (grace); the second: quit at once."""

    def __init__(self, grace: float) -> None:
        import threading

        self.event = threading.Event()
        self.grace = grace
        self._previous: dict = {}

    def _handle(self, signum, frame) -> None:  # noqa: ANN001
        if self.event.is_set():
            os._exit(EXIT_INTERRUPTED)
        self.event.set()
        console.print(f"\nstopping: no new requests; waiting up to {self.grace:g} s for answers in flight "
                      "(press Ctrl-C again to quit at once)", highlight=False)

    def __enter__(self) -> "_StopOnSignal":
        import signal

        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        import signal

        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def _safe_argv() -> list[str]:
    """The command line with every credential removed (values of --*key*/--*token* options, URL userinfo, ...)."""
    return redact_argv(sys.argv[1:])


def _run_with_progress(items, judges, store, concurrency, limit, retry_abstained, show, stop=None, grace=10.0):  # noqa: ANN001, ANN202
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from scijudge.runner import judge_items, plan

    tasks, _ = plan(items, judges, store, retry_abstained=retry_abstained)
    total = min(len(tasks), limit) if limit else len(tasks)
    with Progress(TextColumn("[bold]judging"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[rate]}"),
                  TimeElapsedColumn(), TimeRemainingColumn(), TextColumn("{task.fields[extra]}"),
                  console=console, disable=not show or total == 0) as bar:
        task = bar.add_task("judge", total=total, rate="", extra="")

        def on_result(result, summary):  # noqa: ANN001, ANN202
            elapsed = bar.tasks[0].elapsed or 1e-9
            cost = f" ${summary.cost:.4f}" if summary.cost else ""
            bar.update(task, advance=1, rate=f"{summary.judged / elapsed:.1f}/s",
                       extra=f"tok {summary.tokens_in + summary.tokens_out:,}{cost} abst {summary.abstained}")

        return judge_items(items, judges, run=store, concurrency=concurrency, limit=limit,
                           retry_abstained=retry_abstained, on_result=on_result, stop=stop, grace=grace)


def _print_summary(summary, run_path: Path) -> None:  # noqa: ANN001
    table = Table(title=f"run store: {escape(str(run_path))}", show_header=False)
    for label, value in [
        ("judged now", summary.judged), ("ok", summary.ok), ("abstained", summary.abstained),
        ("already done (skipped)", summary.skipped_done),
        ("items changed since the last run (judged again)", summary.changed),
        ("no answer (not stored; re-run to retry)", getattr(summary, "no_answer", 0)),
        ("not applicable (pairwise judge, one answer)", summary.not_applicable), ("tokens in/out", f"{summary.tokens_in:,} / {summary.tokens_out:,}"),
        ("cost (USD, estimated)", f"{summary.cost:.4f}"), ("seconds", f"{summary.seconds:.1f}"),
    ]:
        table.add_row(label, str(value))
    for reason, count in summary.abstention_reasons.items():
        table.add_row(f"abstained: {escape(redact(str(reason)))}", str(count))
    out.print(table)


@command("export")
def export_cmd(
    run: Annotated[Path, typer.Argument(help="Run store to export.")],
    format: Annotated[str, typer.Option("--format", "-f", help="jsonl or csv.")] = "jsonl",
    output: Annotated[Optional[Path], typer.Option("--out", "-o", help="Output file (default: next to the run).")] = None,
    history: Annotated[bool, typer.Option(help="Also export judgments superseded by a newer one (column 'current' tells them apart).")] = False,
) -> None:
    """Export the current judgment of every (item, judge, part, model, endpoint) of a run store to JSONL or CSV.

    Example: scijudge export runs/qa.sqlite --format csv --out qa.csv
    """
    from scijudge.runs import Run

    store = Run(run, create=False)
    target = output or run.with_suffix("." + format)
    count = store.export(target, format, history=history)
    out.print(f"wrote {count} judgments to {escape(str(target))}", highlight=False)


@command("schema")
def schema_cmd() -> None:
    """Print the JSON Schema of one line of the canonical item format.

    Example: scijudge schema > items.schema.json
    """
    from scijudge.data import item_json_schema

    print(json.dumps(item_json_schema(), indent=2))




@command("demo")
def demo_cmd(
    model: Annotated[Optional[str], typer.Option("--model", "-m", help="Judge with this model instead of the tiny random one (hf:..., openai/..., ...).")] = None,
    api_base: Annotated[Optional[str], typer.Option(help="OpenAI-compatible server URL for --model.")] = None,
    judge: Annotated[list[str], typer.Option("--judge", "-j", help="Judges to run.")] = ["yescieval.qa.correctness", "yescieval.qa.conciseness", "yescieval.qa.readability"],  # noqa: B006
    items: Annotated[Optional[Path], typer.Option(help="Items to judge (default: the bundled example dataset).")] = None,
    run: Annotated[Path, typer.Option(help="Run store to write.")] = Path("runs/demo.sqlite"),
    workdir: Annotated[Path, typer.Option(help="Where the tiny model is built.")] = Path("runs/tiny-model"),
    concurrency: Annotated[int, typer.Option(min=1, help="Judgments in flight (the local engine batches them).")] = 8,
    progress: Annotated[bool, typer.Option(help="Show a progress bar.")] = True,
) -> None:
    """The offline main job: judge the bundled example dataset end to end and print a summary.

    With no --model it builds a tiny randomly initialised Llama-style model and LoRA adapter on this machine
    (no network) and runs the whole path through it: constrained JSON, dynamic batching, the fallback chain,
    the run store. Its scores are meaningless; the point is that every part runs.

    Example: scijudge demo            (offline)    |    scijudge demo --model openai/gpt-4o-mini
    """
    from scijudge.data import load_items
    from scijudge.judges.base import build_judge
    from scijudge.lm import make_lm
    from scijudge.runs import Run
    from scijudge.specs import resolve_judges

    items_path = items or _bundled("datasets/yescieval_example/items.jsonl")
    tiny = model is None
    if tiny:
        _quiet_transformers()
        from scijudge.lm.tiny import build_tiny_model

        console.print(f"building a tiny random Llama model + LoRA adapter in {workdir} (no download) ...")
        paths = build_tiny_model(workdir)
        model = f"hf:{paths['adapter']}"
    lm = make_lm(model, api_base=api_base, max_tokens=160 if tiny else None)
    loaded, _ = load_items(items_path)
    specs = resolve_judges(judge)
    judges = [build_judge(spec, lm=lm, rating_probs=tiny) for spec in specs]
    store = Run(run)
    store.set_meta(items=str(items_path), judges=[s.name for s in specs], model=model, demo=True)
    summary = _run_with_progress(loaded, judges, store, concurrency, None, False, progress)
    _print_summary(summary, run)
    frame = store.to_pandas()
    table = Table("judge", "judged", "ok", "abstained", "mean score", title="per judge (this run store)")
    for name, group in frame.groupby("judge"):
        ok = group[group.status == "ok"]
        table.add_row(name, str(len(group)), str(len(ok)), str(len(group) - len(ok)),
                      f"{ok.score.mean():.2f}" if len(ok) else "-")
    out.print(table)
    if tiny:
        out.print("[bold yellow]These scores come from a tiny model with RANDOM weights: they are meaningless.[/] "
                  "They show that the whole path runs. For real judgments use --model hf:/path/to/adapter "
                  "(e.g. a YESciEval LoRA judge) or an API model such as --model openai/gpt-4o-mini.")


def _quiet_transformers() -> None:
    """The demo's own output is the point: silence transformers' progress bars and deprecation chatter."""
    import warnings

    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    warnings.filterwarnings("ignore", category=FutureWarning)
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    except ImportError:
        pass


def _bundled(relative: str) -> Path:
    """A data file shipped in the wheel (scijudge/_data) or found in a source checkout."""
    from scijudge._resources import shipped_path

    found = shipped_path(relative)
    if found is not None:
        return found
    raise ScijudgeError(f"bundled file {relative} not found in this installation")


@command("import-lematerial")
def import_lematerial_cmd(
    folder: Annotated[Path, typer.Argument(help="A LeMaterial annotations folder (<paper>/result.json, result_human.json).")],
    run: Annotated[Path, typer.Option(help="Run store to write the LLM-judge evaluations into.")],
    labels: Annotated[Path, typer.Option(help="JSONL file to write the human evaluations into, as human labels.")],
    threshold: Annotated[float, typer.Option(help="Fuzzy material-name match threshold (0-1).")] = 0.8,
) -> None:
    """Import LeMaterial's LLM-judge and human evaluations as a run store plus human labels.

    Example: scijudge import-lematerial annotations/ --run runs/lemat.sqlite --labels lemat_labels.jsonl
    """
    from scijudge.commands._store import write_records
    from scijudge.importers.lematerial import load_lematerial_annotations

    imported = load_lematerial_annotations(folder, match_threshold=threshold)
    written = write_records(run, imported.results, imports={
        "file": str(folder), "kind": "lematerial", "rows": len(imported.results), "labels": len(imported.labels),
        "dropped_human_scores": imported.drop_counts()})
    from scijudge.runs import Run

    with Run(run) as store:  # calibrate reads these: the overall is continuous, criteria on half steps
        store.set_meta(scales={**(store.meta().get("scales") or {}), **imported.scales()})
    labels.parent.mkdir(parents=True, exist_ok=True)
    with labels.open("w", encoding="utf-8") as handle:
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


def _register_module_commands() -> None:
    """Commands whose code lives with the feature they expose (one module, one job)."""
    from scijudge.commands.batches import batches_cmd
    from scijudge.commands.calibrate import calibrate_cmd, perturb_cmd
    from scijudge.commands.compliance import compliance_cmd
    from scijudge.commands.estimate import estimate_cmd
    from scijudge.commands.import_judgments import import_judgments_cmd
    from scijudge.commands.robustness import robustness_cmd
    from scijudge.commands.optimize import optimize_cmd
    from scijudge.metrics.figures import figure_metric_command

    command("calibrate")(calibrate_cmd)
    command("perturb")(perturb_cmd)
    command("compliance")(compliance_cmd)
    command("import-judgments")(import_judgments_cmd)
    command("robustness")(robustness_cmd)
    command("optimize")(optimize_cmd)
    command("figure-metric")(figure_metric_command)
    command("estimate")(estimate_cmd)
    command("batches")(batches_cmd)


_register_module_commands()


def main() -> None:  # pragma: no cover - console script entry point
    from scijudge._litellm_env import use_local_cost_map

    use_local_cost_map()
    app()
