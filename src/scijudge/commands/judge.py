"""CLI command `scijudge judge`: judge items with judges and store every judgment as it completes."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from rich.markup import escape

from scijudge.commands._console import console
from scijudge.commands._progress import print_summary, progress_bar
from scijudge.commands._run_control import StopOnSignal, exit_run, resume_command, safe_argv
from scijudge.errors import EXIT_INCOMPLETE, EXIT_INTERRUPTED, InputError, ScijudgeError

_NOT_OPTIONS = ("items", "run", "progress")
"""The flags that are not ``RunOptions`` fields; every other flag is the field of its parameter's name."""


def _flags(
    items: Annotated[Path, typer.Argument(help="Items in canonical JSONL (see `scijudge schema`).")],
    judges: Annotated[list[str], typer.Option(
        "--judge", "-j", help="Judge name, glob (yescieval.qa.*) or spec path; repeatable.")],
    model: Annotated[str | None, typer.Option(
        "--model", "-m", help="DSPy/litellm model string, or hf:<model or adapter>.")] = None,
    api_base: Annotated[str | None, typer.Option(help="OpenAI-compatible server URL, e.g. http://localhost:8000/v1.")] = None,
    run: Annotated[Path | None, typer.Option(help="Run store (SQLite). Re-running with the same store resumes.")] = None,
    concurrency: Annotated[int, typer.Option(min=1, help="Judgments in flight at once.")] = 8,
    executor: Annotated[str, typer.Option(
        "--executor", help="In-process executor: auto (asyncio from --concurrency 64 up for API models, threads "
                           "otherwise), threads, or async (one event loop: hundreds to thousands of slow judgments "
                           "in flight).")] = "auto",
    processes: Annotated[int, typer.Option(
        min=1, help="Worker processes (API models only): for very fast endpoints, where one process's CPU is the limit.")] = 1,
    limit: Annotated[int | None, typer.Option(min=1, help="Judge at most N pending judgments.")] = None,
    skip_invalid: Annotated[bool, typer.Option(help="Judge the valid items and list the invalid lines.")] = False,
    retry_abstained: Annotated[bool, typer.Option(help="Judge earlier abstentions again.")] = False,
    rating_probs: Annotated[bool, typer.Option(
        help="Ask for token logprobs and store P(rating) (models that return logprobs).")] = False,
    cache: Annotated[bool, typer.Option(help="Use DSPy's response cache.")] = True,
    timeout: Annotated[float, typer.Option(
        help="Deadline in seconds for a whole request, connect to last byte (retried once; a streak of them stops the "
             "run).")] = 60.0,
    retry_after_cap: Annotated[float, typer.Option(
        help="Longest Retry-After (seconds) a rate limit may pause the run for; a longer one stops the run.")] = 120.0,
    grace: Annotated[float, typer.Option(
        help="On Ctrl-C/SIGTERM, seconds to wait for requests in flight so that their answers are stored.")] = 10.0,
    max_tokens: Annotated[int | None, typer.Option(help="Max output tokens per call.")] = None,
    progress: Annotated[bool, typer.Option(help="Show a progress bar.")] = True,
    reports: Annotated[Path | None, typer.Option(
        help="Checklist judges: ITEMS is a ResearchRubrics task file and this is the reports folder (<sample_id>.md/.txt) or a "
             "JSONL of {sample_id, report}.")] = None,
    chunk_tokens: Annotated[int | None, typer.Option(
        min=1000, help="Checklist judges: token budget of one report chunk.")] = None,
    overlap_tokens: Annotated[int | None, typer.Option(
        min=0, help="Checklist judges: tokens shared by consecutive chunks (default: 1000, at most an eighth of "
                    "--chunk-tokens).")] = None,
    allow_unknown_axes: Annotated[bool, typer.Option(
        help="Checklist judges: accept task axes outside ResearchRubrics' seven (kept as written).")] = False,
    preset: Annotated[str | None, typer.Option(
        help="Prompt preset for every judge, e.g. 'yescieval-native' (YESciEval's own layout for its released judges).")] = None,
    blocks: Annotated[list[str] | None, typer.Option(
        "--block", help="Fill a judge's text block from a file: NAME=FILE (repeatable); NAME= empties it (e.g. --block "
                        "task_context=).")] = None,
    batch: Annotated[bool, typer.Option(
        "--batch", help="Send the judgments through the provider's batch API (about half price, results within 24 h).")] = False,
    batch_size: Annotated[int, typer.Option(min=1, max=50000, help="Lines per batch.")] = 5000,
    batch_poll: Annotated[float, typer.Option(min=0.0, help="Seconds between status checks of running batches.")] = 30.0,
    batch_fallback: Annotated[Literal["next-strategy", "direct"], typer.Option(
        help="Where lines that failed in a batch go: next-strategy (a follow-up batch) or direct (direct "
             "calls).")] = "next-strategy",
    ray: Annotated[str | None, typer.Option(
        "--ray", metavar="ADDRESS", help="Run hf: judges on Ray actors (one engine per GPU): 'local' starts Ray on this machine, "
                                         "or a cluster address (auto, ray://host:10001).")] = None,
    fused: Annotated[bool, typer.Option(
        help="Likert rubrics: judge all the selected rubrics in one call per item (one stored judgment per rubric).")] = False,
    mode: Annotated[Literal["generate", "decision"], typer.Option(
        help="generate (default: a typed answer with rationale) or decision (the score is read from the model's "
             "probabilities over the levels or verdict labels at the answer position; no text generated).")] = "generate",
    decision_score: Annotated[Literal["expected", "mode"], typer.Option(
        help="With --mode decision: expected (the expected value of the level distribution) or mode (the most "
             "likely level).")] = "expected",
    layout: Annotated[Literal["rubric-first", "item-first"], typer.Option(
        help="Prompt order: rubric-first (default) or item-first (a local engine then shares each item's prefix across its "
             "rubrics).")] = "rubric-first",
    cascade: Annotated[Path | None, typer.Option(
        help="Judge with a cascade saved by `scijudge cascade --save`: its first member judges every item, each next "
             "member only the items no earlier one trusted (models, endpoints and modes come from the file).")] = None,
) -> None:
    """The flags of ``scijudge judge``: each parameter is the ``scijudge.run.options.RunOptions`` field of its name
    (``_NOT_OPTIONS`` aside), so the command maps flags to fields in this one place."""


def judge_cmd(**flags: Any) -> None:
    """Judge every item with every judge; each judgment is saved to the run store as it completes.

    Re-running with the same --run resumes: judgments already stored for the same item content, judge spec,
    model, endpoint and decoding settings are skipped; an edited item is judged again. Exit codes: 0 all
    done; 2 bad input; 3 stopped early (endpoint unreachable, auth, model not found, rate limit over the cap,
    a streak of failures, or another process writing the store); 4 some judgments got no answer (re-run to
    retry them); 130 interrupted (Ctrl-C/SIGTERM: answers in flight get --grace seconds and are stored; a
    second Ctrl-C quits at once).

    Example: scijudge judge datasets/yescieval_example/items.jsonl -j 'yescieval.qa.*' -m openai/gpt-4o-mini --run runs/qa.sqlite

    Checklist example: scijudge judge tasks.jsonl --reports reports/ -j researchrubrics.checklist -m openai/gpt-4o-mini

    Decision example: scijudge judge items.jsonl -j 'yescieval.qa.*' --mode decision --layout item-first -m hf:/models/adapter

    Fused example: scijudge judge items.jsonl -j 'yescieval.qa.*' --fused --layout item-first -m hf:/models/adapter

    Cascade example: scijudge judge items.jsonl -j yescieval.qa.correctness --cascade thresholds.json --run runs/c.sqlite
    """
    if flags.get("cache", True):
        from scijudge.lm.dspy_compat import open_cache_soon

        open_cache_soon()  # while the judges and items load
    from scijudge.run.judging import JudgeRun
    from scijudge.run.options import RunOptions

    items, run, progress = (flags.pop(name) for name in _NOT_OPTIONS)
    options = RunOptions.of(**{k: v for k, v in flags.items() if v is not None})
    from scijudge.commands._progress import quiet_local_model

    quiet_local_model(options.model, progress)
    run_path = run or Path("runs") / f"{items.stem}.sqlite"
    early = _claim_existing(run_path)  # a damaged, foreign or busy store: refused before any model loads
    try:
        plan = JudgeRun.prepare(lambda: _load_items(items, options), options, stages_of=_stages_of,
                                on_batch=_print_batch, on_note=_note)
    except BaseException:
        if early is not None:
            early.close()
        raise
    for problem in plan.skipped:
        _skipped(problem)
    store = plan.open_store(early if early is not None else run_path, items=items, argv=safe_argv())
    stop = StopOnSignal(options.grace)
    with stop, progress_bar(progress and plan.kind in ("threads", "processes")) as on_result:
        try:
            summary = plan.run(store, stop=stop.event, on_result=on_result, say=_say)
        except ScijudgeError as exc:
            _stopped(exc, store, run_path)
    print_summary(summary, run_path)
    if summary.interrupted:
        console.print(f"interrupted: {summary.judged} judgment{'' if summary.judged == 1 else 's'} stored in "
                      f"{run_path} this run"
                      + (f"; {left}, a re-run asks for them" if (left := summary.unfinished()) else "")
                      + f"\nresume with: {escape(resume_command())}", highlight=False, soft_wrap=True)
        exit_run(store, EXIT_INTERRUPTED)
    if summary.no_answer:
        console.print(f"[yellow]{summary.no_answer} judgments got no answer and were not stored;[/] re-run to retry "
                      f"them: {escape(resume_command())}", highlight=False, soft_wrap=True)
        exit_run(store, EXIT_INCOMPLETE)
    store.close()


judge_cmd.__signature__ = inspect.signature(_flags, eval_str=True)  # type: ignore[attr-defined]
judge_cmd.__annotations__ = {n: p.annotation for n, p in judge_cmd.__signature__.parameters.items()}  # type: ignore[attr-defined]


def _claim_existing(path: Path) -> Any:
    """The existing run store at ``path`` opened to write (checked: a store, whole, ours, no other writer), or None
    for a new one. An empty file is refused: it is not a store a user meant to resume."""
    from scijudge.run.store import Run

    if not path.exists():
        return None
    if path.is_file() and path.stat().st_size == 0:
        raise InputError("an empty file, not a run store: remove it, or name a new --run path (it is created)",
                         file=path)
    return Run(path).claim_writer()


def _load_items(items: Path, options: Any) -> list[Any]:
    """The items (a ResearchRubrics task file with ``reports`` for checklist judges); skipped lines are printed."""
    if options.reports is not None:
        from scijudge.importers.researchrubrics import load_checklist_items

        loaded, skipped = load_checklist_items(items, options.reports, skip_invalid=options.skip_invalid,
                                               any_axis=options.allow_unknown_axes)
    else:
        from scijudge.data import load_items

        loaded, skipped = load_items(items, skip_invalid=options.skip_invalid)
    for problem in skipped:
        _skipped(str(problem))
    return loaded


def _stages_of(path: Path, build: Any) -> tuple[list[Any], int, list[str]]:
    from scijudge.commands._cascade import cascade_stages

    return cascade_stages(path, build)


def _stopped(exc: ScijudgeError, store: Any, run_path: Path) -> None:
    """A run that stopped early: what it did, the error in one line, how to resume; then the exit code."""
    from scijudge.redaction import redact

    partial = getattr(exc, "summary", None)
    if partial is not None and (partial.judged or partial.skipped_done or partial.no_answer or partial.tokens_in):
        print_summary(partial, run_path)  # a table of zeros (nothing reached) would only hide the error
    console.print(f"[bold red]error:[/] {escape(redact(str(exc)))}", highlight=False, soft_wrap=True)
    if partial is not None and partial.resumable and getattr(exc, "resume_helps", True):
        console.print(f"resume with: {escape(resume_command())}", highlight=False, soft_wrap=True)
    exit_run(store, getattr(exc, "exit_code", 3))


def _skipped(problem: str) -> None:
    from scijudge.redaction import redact

    console.print(f"[yellow]skipped[/] {escape(redact(problem))}", highlight=False, soft_wrap=True)


def _note(text: str) -> None:
    from scijudge.redaction import redact

    console.print(f"[yellow]{escape(redact(text))}[/]", highlight=False, soft_wrap=True)


def _say(text: str) -> None:
    console.print(escape(text), highlight=False, soft_wrap=True)


def _print_batch(record) -> None:
    """One line per batch as it is recorded or changes status."""
    console.print(f"batch {record.remote_id or record.client_id}: {record.status} ({record.total} lines, "
                  f"{record.strategy})", highlight=False)
