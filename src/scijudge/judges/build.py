"""Building judges: the family's judge for a spec, bound to an LM, and the judges of a run (fused, laid out).

The spec layer's family registry says what a family is; this module holds the judge factories of the
families whose judges the judge layer defines (checklist) and the generic ``Judge`` for the rest.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scijudge.chain.chain import ChainConfig, StructuredChain
from scijudge.errors import InputError
from scijudge.judges.base import Judge
from scijudge.judges.contract import JudgeProtocol
from scijudge.judges.options import JudgeOptions
from scijudge.spec.families import Family, JudgeFactory, get_family
from scijudge.spec.judge_spec import JudgeSpec, get_spec


def plain_judge(spec: JudgeSpec, *, lm: Any = None, rating_probs: bool = False, chain: StructuredChain | None = None,
                **_options: Any) -> Judge:
    """The generic spec-driven Judge (options for other families, like chunk sizes, do not apply)."""
    return Judge(spec, lm=lm, rating_probs=rating_probs, chain=chain)


def checklist_judge(spec: JudgeSpec, *, lm: Any = None, chunk_tokens: int | None = None,
                    overlap_tokens: int | None = None, chain: StructuredChain | None = None,
                    **_options: Any) -> Judge:
    """The ChecklistJudge (one verdict per criterion, long reports chunked)."""
    from scijudge.judges.checklist import ChecklistJudge

    if chunk_tokens and overlap_tokens is not None:
        return ChecklistJudge(spec, lm=lm, chain=chain, chunk_tokens=chunk_tokens, overlap_tokens=overlap_tokens)
    if chunk_tokens:
        return ChecklistJudge(spec, lm=lm, chain=chain, chunk_tokens=chunk_tokens)
    return ChecklistJudge(spec, lm=lm, chain=chain, overlap_tokens=overlap_tokens)


def checklist_optimizer_judge(spec: JudgeSpec, *, lm: Any = None, **_options: Any) -> Judge:
    """Optimization runs criterion-verdict specs through the ChecklistJudge and other verdict specs (e.g. the
    toy optimizer's) through the plain Judge."""
    from scijudge.judges.checklist import CriterionVerdict

    output = spec.output_type()
    if isinstance(output, type) and issubclass(output, CriterionVerdict):
        return checklist_judge(spec, lm=lm)
    return plain_judge(spec, lm=lm)


_FACTORIES: dict[str, tuple[JudgeFactory, JudgeFactory | None]] = {
    "checklist": (checklist_judge, checklist_optimizer_judge),
}
"""Family name -> (judge factory, optimizer's judge factory) for the families this layer defines."""


def factory_of(family: Family) -> JudgeFactory:
    """The factory that builds ``family``'s judges: the family's own, else this layer's, else the plain Judge."""
    if family.judge is not None:
        return family.judge
    factory: JudgeFactory = _FACTORIES.get(family.name, (plain_judge, None))[0]
    return factory


def build_judge(spec: JudgeSpec, *, lm: Any = None, rating_probs: bool = False,
                chunk_tokens: int | None = None, overlap_tokens: int | None = None,
                chain: StructuredChain | None = None, mode: str = "generate", decision_score: str = "expected") -> Any:
    """The judge the spec's family builds (``scijudge.spec.families``; checklist judges chunk long reports).

    ``mode="decision"``: the judgment is the model's probability over the levels (``scijudge.judges.decision``),
    scored by its expected value or (``decision_score="mode"``) its most likely level.
    """
    from scijudge.judges.decision import check_mode

    check_mode(mode, decision_score, spec.family, name=spec.name, source=spec.source)
    if mode != "decision" and getattr(getattr(lm, "engine", None), "decision_endpoint", False):
        from scijudge.errors import InputError

        raise InputError(f"model {getattr(lm, 'model', '')!r} is a decision endpoint: it only answers decision "
                         "requests (judge with mode decision)", field="mode")
    family = get_family(spec.family, source=spec.source)
    options: dict[str, Any] = dict(lm=lm, rating_probs=rating_probs, chunk_tokens=chunk_tokens,
                                   overlap_tokens=overlap_tokens)
    if chain is not None:
        options["chain"] = chain
    judge = factory_of(family)(spec, **options)
    if mode != "generate":
        judge.use_mode(mode, decision_score)
    return judge


def build_optimizer_judge(spec: JudgeSpec, lm: Any = None) -> Any:
    """The judge an optimization runs on items for ``spec`` (the family's optimizer hook, else its judge)."""
    family = get_family(spec.family, source=spec.source)
    if family.optimizer_judge is not None:
        return family.optimizer_judge(spec, lm=lm)
    optimizer_factory = _FACTORIES[family.name][1] if family.judge is None and family.name in _FACTORIES else None
    if optimizer_factory is not None:
        return optimizer_factory(spec, lm=lm)
    return factory_of(family)(spec, lm=lm)


_LM_OPTIONS = ("api_base", "api_key", "cache", "timeout", "engine", "max_tokens")


def load_judge(name_or_path: str | Path | JudgeSpec, *, lm: Any = None, model: str | None = None,
               options: JudgeOptions | None = None, rating_probs: bool = False, blocks: dict[str, str] | None = None,
               chunk_tokens: int | None = None, overlap_tokens: int | None = None, mode: str = "generate",
               decision_score: str = "expected", **lm_options: Any) -> Judge:
    """Load a judge by shipped name, spec path or spec object, bound to an LM (or a model string).

    ``options`` (``JudgeOptions``: model, endpoint, decoding, mode, preset, blocks...) is the typed form of every
    keyword below and of what ``scijudge judge`` takes; given, it decides the judge and the keywords must be left
    out. ``mode="decision"`` scores from the model's probabilities over the levels (no text generated).

    ``lm_options`` go to ``make_lm`` with ``model``; given with ``lm`` (an LM already built) they would have no
    effect, so that is an error naming them.
    """
    spec = name_or_path if isinstance(name_or_path, JudgeSpec) else get_spec(name_or_path)
    if options is not None:
        built: Judge = _judge_of_options(spec, options, lm=lm)
        return built
    if blocks:
        spec = spec.with_blocks(**blocks)
    if lm_options and (lm is not None or model is None):
        why = "an LM was given (lm=...), so they are not used" if lm is not None else "they go to make_lm with model=..."
        raise InputError(f"load_judge got options it does not use: {', '.join(sorted(lm_options))} ({why})",
                         field=sorted(lm_options)[0])
    if lm is None and model is not None:
        from scijudge.lm import make_lm

        lm = make_lm(model, **lm_options)
    judge: Judge = build_judge(spec, lm=lm, rating_probs=rating_probs, chunk_tokens=chunk_tokens,
                               overlap_tokens=overlap_tokens, mode=mode, decision_score=decision_score)
    return judge


def _judge_of_options(spec: JudgeSpec, options: JudgeOptions, *, lm: Any = None) -> Any:
    """``load_judge`` with ``JudgeOptions``: blocks and preset applied, the LM built from the options unless one is
    given, the judge laid out (``layout``); ``fused`` joins several rubrics, so it is for ``load_judges``."""
    from scijudge.judges.presets import apply_blocks_and_preset

    if options.fused:
        raise InputError("fused judges several rubrics in one call: use load_judges with them", field="fused")
    (spec,) = apply_blocks_and_preset([spec], blocks=list(options.blocks), preset=options.preset)
    if lm is None:
        from scijudge.lm import make_lm

        lm = make_lm(options.require_model(), **options.lm_options())
    judges: list[Any] = build_run_judges([spec], lm, layout=options.layout,
                                         chain_config=ChainConfig(retry_after_cap=options.retry_after_cap),
                                         **options.judge_options())
    return judges[0]


def load_judges(names: Sequence[str | Path], options: JudgeOptions) -> list[JudgeProtocol]:
    """The judges of ``names`` (names, globs such as ``yescieval.qa.*``, or spec paths) built as ``scijudge judge``
    builds them from ``options``: one shared chain, Likert rubrics fused into one call per item with ``fused``,
    every judge in the prompt ``layout``, blocks and preset applied. Hand them to ``judge_items``."""
    from scijudge.judges.presets import apply_blocks_and_preset
    from scijudge.spec.judge_spec import resolve_judges

    specs = apply_blocks_and_preset(resolve_judges([str(n) for n in names]), blocks=list(options.blocks),
                                    preset=options.preset)
    return judges_for_run(specs, options)


def build_run_judges(specs: Sequence[JudgeSpec], lm: Any, *, rating_probs: bool = False,
                     chunk_tokens: int | None = None, overlap_tokens: int | None = None, fused: bool = False,
                     layout: str = "rubric-first", chain_config: ChainConfig | None = None,
                     mode: str = "generate", decision_score: str = "expected") -> list[JudgeProtocol]:
    """The judges of one run, sharing one chain with the run's settings: each spec's family judge, the Likert
    rubrics fused into one call per item with ``fused``, every judge in the prompt ``layout``."""
    chain = StructuredChain(chain_config)
    judges: list[Any] = [build_judge(spec, lm=lm, rating_probs=rating_probs, chunk_tokens=chunk_tokens,
                                     overlap_tokens=overlap_tokens, chain=chain, mode=mode,
                                     decision_score=decision_score) for spec in specs]
    if fused and mode == "decision":
        raise InputError("fused asks for all rubrics in one generated answer; mode decision reads each rubric's "
                         "level probabilities (with layout item-first the item is still computed once)",
                         field="fused")
    if fused:  # the Likert rubrics in one call per item; other judges (pairwise...) stay separate
        from scijudge.judges.fused import FusedJudge

        likert = [s for s in specs if s.family == "likert"]
        if len(likert) < 2:
            raise InputError("fused needs at least two Likert rubrics among the judges", field="fused")
        judges = [FusedJudge(likert, lm=lm, chain=chain)] + [j for s, j in zip(specs, judges) if s.family != "likert"]
    if layout != "rubric-first":
        from scijudge.judges.layout import apply_layout

        judges = [apply_layout(j, layout) for j in judges]
    else:
        from scijudge.judges.layout import chain_for

        chain_for(layout, chain)  # an unknown layout is an error here too
    return judges


def judges_for_run(specs: Sequence[JudgeSpec], options: JudgeOptions, *, executor: str = "threads") -> list[Any]:
    """The judges (or, for executors that build them elsewhere, the recipes) of one run of ``specs`` with
    ``options``: what ``scijudge judge`` hands to ``judge_items``. Combinations an executor cannot serve are
    refused here, before any model is built or weights loaded."""
    from scijudge.errors import ModelError
    from scijudge.judges.recipe import JudgeRecipe
    from scijudge.lm import is_local_model

    model = options.require_model()
    local = is_local_model(model)
    if executor == "batch" and local:
        raise ModelError(f"batch sends judgments to a provider's batch API; {model} is a local model, which "
                         "already batches in-process (drop batch, or use ray for many GPUs)")
    if executor == "processes" and local:
        raise ModelError("several processes are for API models; a local hf: model batches inside one process")
    if executor == "ray" and not local:
        raise ModelError(f"{model} is an API model: API judges do not need Ray (its actors run local hf: engines); "
                         "use concurrency/processes for speed or batch for the batch price")
    from scijudge.judges.decision import check_mode

    for spec in specs:  # before any model is built
        check_mode(options.mode, options.decision_score, spec.family, name=spec.name, source=spec.source)
    if options.mode == "decision" and executor == "batch":
        raise ModelError("batch sends generated judgments to a provider's batch API; mode decision reads "
                         "logprobs of direct calls (drop batch)")
    if (options.fused or options.layout != "rubric-first") and executor in ("processes", "ray", "batch"):
        raise InputError(f"fused and layout run in one process, without {executor}", field="fused")
    chain_options: dict[str, Any] = {"retry_after_cap": options.retry_after_cap}
    if executor == "ray":
        judge_options = {k: v for k, v in options.judge_options().items()
                         if k not in ("mode", "decision_score") or options.mode != "generate"}
        return [JudgeRecipe(spec, model, options.lm_options(), judge_options, chain_options) for spec in specs]
    from scijudge.lm import make_lm

    lm = make_lm(model, **options.lm_options())
    return build_run_judges(specs, lm, fused=options.fused, layout=options.layout,
                            chain_config=ChainConfig(retry_after_cap=options.retry_after_cap), **options.judge_options())
