"""A judging run from its typed options: the judges built, the executor chosen, the store's meta, the run.

``scijudge judge`` is ``JudgeRun.prepare(items, RunOptions(...))``, ``open_store(path)`` and ``run(store)`` with its
own output around them; Python calls the same three.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scijudge.data import Item
from scijudge.run.options import RunOptions
from scijudge.run.store import Run
from scijudge.run.summary import RunSummary

Say = Callable[[str], None]
StagesOf = Callable[[Path, Callable[..., list[Any]]], tuple[list[Any], int, list[str]]]
"""``(thresholds file, build) -> (stages, seed, models)``: how a saved cascade becomes stages (``build(model,
api_base, mode, decision_score, rating_probs)`` builds one member's judges)."""


def _quiet(_: str) -> None:
    return None


@dataclass
class JudgeRun:
    """A run ready to start: judges (or a cascade's stages) built and checked, executor made; nothing stored yet."""

    options: RunOptions
    items: list[Item]
    specs: list[Any]
    judges: list[Any]
    executor: Any
    kind: str
    model: str
    stages: list[Any] | None = None
    seed: int = 0
    skipped: list[str] = field(default_factory=list)

    @classmethod
    def prepare(cls, items: Sequence[Item] | Callable[[], Sequence[Item]], options: RunOptions, *,
                stages_of: StagesOf | None = None,
                on_batch: Callable[[Any], None] | None = None, on_note: Say = _quiet) -> JudgeRun:
        """Check the options, build the judges and the executor; ``stages_of`` reads ``options.cascade``. ``items``
        may be a function that loads them, called once the judges are known (a bad judge name is reported before
        an items file is read)."""
        from scijudge.judges.build import judges_for_run
        from scijudge.judges.presets import apply_blocks_and_preset
        from scijudge.spec.judge_spec import resolve_judges

        kind = options.executor_kind()
        options.check_cascade()
        specs = apply_blocks_and_preset(resolve_judges(list(options.judges)), blocks=list(options.blocks),
                                        preset=options.preset)
        loaded = list(items() if callable(items) else items)

        def build(model: str, api_base: str | None, mode: str, decision_score: str, rating_probs: bool) -> list:
            member = options.model_copy(update=dict(model=model, api_base=api_base, mode=mode,
                                                    decision_score=decision_score, rating_probs=rating_probs))
            return judges_for_run(specs, member, executor=kind)

        stages, seed, model = None, 0, options.model or ""
        if options.cascade is not None:
            if stages_of is None:
                raise ValueError("a cascade run needs stages_of (scijudge.commands._cascade.cascade_stages)")
            stages, seed, models = stages_of(options.cascade, build)
            judges, model = stages[0].judges, ",".join(models)
        else:
            judges = judges_for_run(specs, options, executor=kind)
        executor = _executor(kind, options, judges, on_batch, on_note)
        for stage_judges in [s.judges for s in stages] if stages else [judges]:
            executor.check(stage_judges)
        run = cls(options, loaded, specs, judges, executor, kind, model, stages, seed)
        if options.skip_invalid and kind != "ray":
            from scijudge.run.plan import valid_items

            run.items, problems = valid_items(run.items, judges)
            run.skipped = [str(p) for p in problems]
        return run

    def open_store(self, path: str | Path | Run, *, items: str | Path | None = None, argv: Sequence[str] = ()) -> Run:
        """The run store (a path, or a store already claimed for writing), claimed for writing, with what this run
        is: items, judges, model, endpoint, the command line (credentials removed by the caller) and each judge's
        declared score scale (for calibration)."""
        from scijudge.records import safe_endpoint
        from scijudge.vocab import score_scale_of

        store = path if isinstance(path, Run) else Run(path).claim_writer()
        store.set_meta(items=str(items) if items is not None else None, judges=[s.name for s in self.specs],
                       model=self.model, api_base=safe_endpoint(self.options.api_base) or None, argv=list(argv),
                       **({"cascade": str(self.options.cascade)} if self.options.cascade is not None else {}),
                       scales={s.name: list(score_scale_of(s)) for s in self.specs if s.scale is not None})
        return store

    def run(self, store: Run, *, stop: Any = None, on_result: Any = None, say: Say = _quiet) -> RunSummary:
        """Judge the items into ``store`` (through the cascade's stages when there is one)."""
        from scijudge.run.api import judge_items

        opts = self.options
        common = dict(executor=self.executor, concurrency=opts.concurrency, retry_abstained=opts.retry_abstained,
                      stop=stop, grace=opts.grace, on_result=on_result)
        if self.stages is None:
            return judge_items(self.items, self.judges, store, limit=opts.limit, **common)
        from scijudge.run.cascade import judge_cascade
        from scijudge.run.summary import merged

        done = judge_cascade(self.items, self.stages, store, seed=self.seed, **common)
        for member, summary in done.stages:
            say(f"cascade member {member}: {summary.planned} judgment(s) planned, {summary.judged} made now, "
                f"{summary.skipped_done} already stored")
        skipped = [s.member for s in self.stages if not any(m == s.member for m, _ in done.stages)]
        if skipped:
            say(f"cascade members with no threshold for these judges (not called): {', '.join(skipped)}")
        return merged([s for _, s in done.stages])


def _executor(kind: str, options: RunOptions, judges: list[Any], on_batch: Any, on_note: Say) -> Any:
    """The executor of ``kind`` with its options; in this process, asyncio or threads as ``options.executor`` says."""
    from scijudge.run.api import make_executor

    extra: dict[str, Any] = {}
    if kind == "processes":
        extra = dict(processes=options.processes, use_cache=options.cache)
    elif kind == "batch":
        extra = dict(batch_size=options.batch_size, poll=options.batch_poll, fallback=options.batch_fallback,
                     on_batch=on_batch, on_note=on_note)
    elif kind == "ray":
        extra = dict(address=None if options.ray == "local" else options.ray)
    name = kind
    if kind == "threads":
        from scijudge.run.aio import wants_async

        if options.executor == "async" or (options.executor == "auto" and wants_async(judges, options.concurrency)):
            name = "async"
    return make_executor(name, concurrency=options.concurrency, **extra)
