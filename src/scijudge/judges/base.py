"""The generic spec-driven judge: a dspy.Module whose every call runs through the structured chain."""

from __future__ import annotations

import asyncio
import math
import time
from pathlib import Path
from typing import Any

import dspy
from pydantic import BaseModel

from scijudge.data import Item
from scijudge.errors import InputError
from scijudge.spec.families import Family, get_family
from scijudge.spec.outputs import JudgeOutput, RunFields
from scijudge.spec.signatures import OUTPUT_FIELD, build_signature
from scijudge.spec.judge_spec import JudgeSpec, get_spec
from scijudge.records import (  # noqa: F401 - re-exported: scijudge.judges.base.JudgeResult etc. stay importable
    Attempt,
    JudgeResult,
    Status,
    assemble_result,
    decoding_text,
    endpoint_of,
    input_hash,
    judgment_key,
    model_name,
)
from scijudge.chain.chain import Abstained, StructuredChain, start_record, _CURRENT
from scijudge.vocab import scale_of

_DEFAULT_CHAIN = StructuredChain()


def default_chain() -> StructuredChain:
    """The process-wide chain, so format rejections learnt by one judge help every other."""
    return _DEFAULT_CHAIN


def judgment_key_for(item: Item, judge: Judge, part: str = "") -> str:
    """The run-store key of judging ``item`` (one ``part``) with ``judge`` and its LM: the one place it is computed."""
    hashed, decoding = judge.identity(item, part)
    lm = judge._lm()
    return judgment_key(item.id, judge.name, part, judge.spec_hash, model_name(lm), endpoint_of(lm), hashed, decoding)


class Judge(dspy.Module):
    """A judge built from a spec. Call it with keyword inputs (a DSPy module) or ``judge_item(item)``.

    The returned prediction has ``judgment`` (typed output, or None), ``abstained`` and ``reason``;
    optimizers see abstentions as failed predictions rather than exceptions.
    """

    def __init__(self, spec: JudgeSpec, *, lm: Any = None, chain: StructuredChain | None = None,
                 rating_probs: bool = False) -> None:
        super().__init__()
        self.spec = spec
        self.lm = lm
        self.chain = chain or default_chain()
        if rating_probs and self.chain.config.logprobs is None:
            from dataclasses import replace

            shared = self.chain
            self.chain = StructuredChain(replace(shared.config, logprobs=10))
            self.chain.share_memory(shared)
        self.predict = dspy.Predict(build_signature(spec))
        if spec.demos:
            from scijudge.spec.demos import demos_from_spec  # demonstrations saved in the spec (e.g. by an optimizer)

            self.predict.demos = demos_from_spec(spec)
        self._spec_hash = spec.spec_hash()
        self._prepare = spec.prepare_function()
        self.preset = None  # hook (issue 16): a prompt preset tried before the structured chain
        if spec.preset:
            from scijudge.judges.presets import get_preset

            self.preset = get_preset(spec.preset, source=spec.source)
            self.preset.check(spec)

    def __deepcopy__(self, memo: dict[int, Any]) -> Judge:
        """Copies (made by optimizers and ``Module.load``) share the LM and the chain, never duplicate them."""
        import copy

        clone = self.__class__.__new__(self.__class__)
        memo[id(self)] = clone
        for key, value in self.__dict__.items():
            shared = key in ("lm", "chain", "_prepare")
            clone.__dict__[key] = value if shared else copy.deepcopy(value, memo)
        return clone

    @property
    def spec_hash(self) -> str:
        """Hash of the spec this judge was built from (computed once)."""
        return self._spec_hash

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def family(self) -> Family:
        """The spec's registered family (parts, input slots, orientation of answers)."""
        return get_family(self.spec.family, source=self.spec.source)

    @property
    def input_names(self) -> list[str]:
        return [i.name for i in self.spec.inputs]

    def _lm(self) -> Any:
        return self.lm or dspy.settings.lm

    def forward(self, **inputs: Any) -> dspy.Prediction:
        return predict_judgment(self, inputs, preset=self.preset)

    # --- items in, typed results out ---------------------------------------------------------
    def inputs_for(self, item: Item, part: str = "") -> dict[str, Any]:
        """The judge's keyword inputs for an item; a missing required input names the item's line and field."""
        values: dict[str, Any] = {}
        for spec_input in self.spec.inputs:
            name = spec_input.name
            source = name if self.family.input_source is None else self.family.input_source(name, part)
            value = item.value(source)
            for alias in spec_input.aliases:  # hook (issue 16): older input names
                value = item.value(alias) if value is None else value
            if value is None and not spec_input.optional:
                file, line = item._origin or (None, None)
                raise InputError(f"judge {self.name!r} needs this input but item {item.id!r} has none or it is empty",
                                 file=file, line=line, field=source)
            values[name] = value
        prepare = self._prepare
        if prepare is not None:
            file, line = item._origin or (None, None)
            values = {**values, **prepare(values, source=file, line=line)}
        return values

    def parts(self, item: Item) -> list[str]:
        """The parts the family judges an item in (pairwise: both orders, "AB" and "BA", so position bias
        shows as inconsistency; none for an item without a second answer)."""
        return self.family.parts(item)

    def decoding(self) -> dict[str, Any]:
        """The configured decoding settings that change an answer (part of a judgment's identity)."""
        lm = self._lm()
        max_tokens = getattr(lm, "kwargs", {}).get("max_tokens") or self.chain.config.max_tokens
        return {"max_tokens": max_tokens, "logprobs": self.chain.config.logprobs}

    def identity(self, item: Item, part: str = "") -> tuple[str, str]:
        """Hash of the inputs this judge reads for the item, and its decoding settings as stored."""
        return input_hash(self.inputs_for(item, part)), decoding_text(self.decoding())

    def judge_item(self, item: Item, part: str = "") -> JudgeResult:
        """Judge one item (one order, for pairwise) and return a typed result.

        LM trouble that is about this judgment becomes an abstention; a run-level fault raises
        ``EndpointError`` and a judgment that got no answer raises ``TransportFailure`` (never stored).
        """
        inputs = self.inputs_for(item, part)
        prediction, record, latency = self._run_recorded(inputs)
        return self._result(item.id, part, prediction, record, latency, input_hash(inputs))

    def _run_recorded(self, inputs: dict[str, Any]) -> tuple[dspy.Prediction, Any, float]:
        """Run the module once under a fresh attempt record; returns prediction, record and latency."""
        record, token = start_record()
        started = time.perf_counter()
        try:
            prediction = self(**inputs)
        finally:
            _CURRENT.reset(token)
        return prediction, record, time.perf_counter() - started

    async def ajudge_item(self, item: Item, part: str = "") -> JudgeResult:
        """Async variant of ``judge_item`` (runs the blocking call in a worker thread)."""
        return await asyncio.to_thread(self.judge_item, item, part)

    def result_from(self, item_id: str, part: str, record: Any, latency: float, inputs_hash: str, *,
                    abstained_reason: str | None = None, **fields: Any) -> JudgeResult:
        """A JudgeResult for one call of this judge (identity and totals assembled in ``records``)."""
        return assemble_result(item_id=item_id, judge=self.name, part=part, family=self.spec.family,
                               spec_hash=self.spec_hash, lm=self._lm(), inputs_hash=inputs_hash,
                               decoding=decoding_text(self.decoding()), attempts=list(record.attempts),
                               latency=latency, abstained_reason=abstained_reason, **fields)

    def _result(self, item_id: str, part: str, prediction: dspy.Prediction, record: Any,
                latency: float, inputs_hash: str) -> JudgeResult:
        if prediction.abstained:
            return self.result_from(item_id, part, record, latency, inputs_hash, abstained_reason=prediction.reason)
        output: JudgeOutput = prediction.judgment
        fields: RunFields = output.run_fields() if isinstance(output, JudgeOutput) else RunFields()
        if self.family.orient is not None:  # e.g. a pairwise BA answer, told in the item's own terms
            fields = self.family.orient(fields, part)
        probs = None
        scale = scale_of(self.spec)
        if record.logprobs and self.family.rating_probs and scale.integral:
            # (a half-step rating such as 3.5 runs over several tokens: its first token's alternatives are no
            # ratings, so such scales get no distribution rather than one over the whole numbers)
            from scijudge.lm.logprobs import as_probs, rating_distribution

            dist = rating_distribution(record.logprobs, field="rating", values=[int(v) for v in scale.levels()])
            probs = as_probs(dist) if dist else None
        payload = output.model_dump(mode="json") if isinstance(output, BaseModel) else {"value": output}
        if probs:
            payload["expected_rating"] = math.fsum(float(k) * p for k, p in probs.items())
        return self.result_from(item_id, part, record, latency, inputs_hash, score=fields.score,
                                verdict=fields.verdict, confidence=fields.confidence, probs=probs, result=payload,
                                rationale=fields.rationale)


def predict_judgment(judge: Any, inputs: dict[str, Any], *, preset: Any = None) -> dspy.Prediction:
    """A judge module's ``predict`` run through its chain: the typed judgment, or an abstention with its reason
    (the one copy for ``Judge`` and ``FusedJudge``); attempts go to the current call record."""
    record, token = (_CURRENT.get(), None) if _CURRENT.get() is not None else start_record()
    try:
        if preset is not None:  # hook (issue 16): native free text first, structured retry below
            native = preset.first_try(judge, inputs, record)
            if native is not None:
                return dspy.Prediction(judgment=native, abstained=False, reason=None, attempts=record.attempts)
        with dspy.context(adapter=judge.chain, lm=judge._lm()):
            prediction = judge.predict(**inputs)
        return dspy.Prediction(judgment=getattr(prediction, OUTPUT_FIELD), abstained=False, reason=None,
                               attempts=record.attempts)
    except Abstained as exc:
        return dspy.Prediction(judgment=None, abstained=True, reason=exc.reason, attempts=record.attempts)
    finally:
        if token is not None:
            _CURRENT.reset(token)


def build_judge(spec: JudgeSpec, *, lm: Any = None, rating_probs: bool = False,
                chunk_tokens: int | None = None, overlap_tokens: int | None = None) -> Judge:
    """The Judge class the spec's family registers (``scijudge.spec.families``; checklist judges chunk long reports)."""
    return get_family(spec.family, source=spec.source).build(spec, lm=lm, rating_probs=rating_probs,
                                                             chunk_tokens=chunk_tokens, overlap_tokens=overlap_tokens)


def load_judge(name_or_path: str | Path | JudgeSpec, *, lm: Any = None, model: str | None = None,
               rating_probs: bool = False, blocks: dict[str, str] | None = None,
               chunk_tokens: int | None = None, overlap_tokens: int | None = None, **lm_options: Any) -> Judge:
    """Load a judge by shipped name, spec path or spec object, bound to an LM (or a model string)."""
    spec = name_or_path if isinstance(name_or_path, JudgeSpec) else get_spec(name_or_path)
    if blocks:
        spec = spec.with_blocks(**blocks)
    if lm is None and model is not None:
        from scijudge.lm import make_lm

        lm = make_lm(model, **lm_options)
    return build_judge(spec, lm=lm, rating_probs=rating_probs, chunk_tokens=chunk_tokens,
                       overlap_tokens=overlap_tokens)
