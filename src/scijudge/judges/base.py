"""The generic spec-driven judge: a dspy.Module whose every call runs through the structured chain."""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import math
import time
from typing import Any

import dspy
from pydantic import BaseModel

from scijudge.chain.chain import Abstained, CallRecord, StructuredChain, recording
from scijudge.data import Item
from scijudge.errors import InputError
from scijudge.records import (
    Identity,
    JudgeResult,
    assemble_result,
    decoding_text,
    endpoint_of,
    input_hash,
    model_name,
)
from scijudge.spec.families import Family, get_family
from scijudge.spec.judge_spec import JudgeSpec
from scijudge.spec.outputs import JudgeOutput, RunFields
from scijudge.spec.signatures import OUTPUT_FIELD, build_signature
from scijudge.vocab import scale_of


def tagged_hash(tag: str, spec_hash: str) -> str:
    """The spec hash of a judgment made under a variant (``fused:…``, a prompt layout): not the plain one's."""
    return hashlib.sha256(f"{tag}:{spec_hash}".encode()).hexdigest()[:16]


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
        self.chain = chain or StructuredChain()
        self.rating_probs = rating_probs
        if rating_probs and self.chain.config.logprobs is None:
            self.chain = self.chain.with_config(logprobs=10)
        self.predict = dspy.Predict(build_signature(spec))
        if spec.demos:
            from scijudge.spec.demos import demos_from_spec  # demonstrations saved in the spec (e.g. by an optimizer)

            self.predict.demos = demos_from_spec(spec)
        self._spec_hash = spec.spec_hash()
        self.variant_tags: tuple[str, ...] = ()
        self._prepare = spec.prepare_function()
        self.preset = None  # hook (issue 16): a prompt preset tried before the structured chain
        if spec.preset:
            from scijudge.judges.presets import get_preset

            self.preset = get_preset(spec.preset, source=spec.source)
            self.preset.check(spec)
            tag = getattr(self.preset, "identity_tag", None)
            if tag:  # e.g. the yescieval version whose prompt text the preset sends
                self._spec_hash = tagged_hash(tag, self._spec_hash)

    def __deepcopy__(self, memo: dict[int, Any]) -> Judge:
        """Copies (made by optimizers and ``Module.load``) share the LM and the chain, never duplicate them."""
        import copy

        clone = self.__class__.__new__(self.__class__)
        memo[id(self)] = clone
        for key, value in self.__dict__.items():
            shared = key in ("_bound_lm", "chain", "_prepare")
            clone.__dict__[key] = value if shared else copy.deepcopy(value, memo)
        return clone

    @property
    def spec_hash(self) -> str:
        """Hash of the spec this judge was built from (computed once), tagged by any variant it runs under."""
        return self._spec_hash

    def tag_identity(self, tag: str) -> None:
        """Judgments of this judge run under a variant (a fused call, another prompt layout): they get their own
        spec hash, so they never pass for the plain judge's (or another variant's) stored judgments."""
        self._spec_hash = tagged_hash(tag, self._spec_hash)
        self.variant_tags = (*self.variant_tags, tag)

    def use_chain(self, chain: StructuredChain) -> None:
        """Send through another chain (e.g. one that lays the prompt out item-first)."""
        self.chain = chain

    @property
    def lm(self) -> Any:
        """The LM this judge calls: its own, else DSPy's configured one."""
        return self._bound_lm or dspy.settings.lm

    @lm.setter
    def lm(self, value: Any) -> None:
        self.__dict__["_bound_lm"] = value

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def family(self) -> Family:
        """The spec's registered family (parts, input slots, orientation of answers)."""
        return get_family(self.spec.family, source=self.spec.source)

    @property
    def signature(self) -> Any:
        """The DSPy signature the judge prompts with (a provider batch line is built from it)."""
        return self.predict.signature

    @property
    def demos(self) -> list[Any]:
        """The demonstrations the judge prompts with."""
        return list(self.predict.demos)

    @property
    def input_names(self) -> list[str]:
        return [i.name for i in self.spec.inputs]

    def forward(self, **inputs: Any) -> dspy.Prediction:
        """The typed judgment of ``inputs`` (or an abstention); in decision mode a ``Decision`` read from the
        level probabilities, so an optimizer scores decision candidates the way they will judge."""
        if self.mode == "decision":
            from scijudge.judges.decision import decision_prediction

            return decision_prediction(self, inputs)
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
                file, line = item.origin
                raise InputError(f"judge {self.name!r} needs this input but item {item.id!r} has none or it is empty",
                                 file=file, line=line, field=source)
            values[name] = value
        prepare = self._prepare
        if prepare is not None:
            file, line = item.origin
            values = {**values, **prepare(values, source=file, line=line)}
        return values

    def parts(self, item: Item) -> list[str]:
        """The parts the family judges an item in (pairwise: both orders, "AB" and "BA", so position bias
        shows as inconsistency; none for an item without a second answer)."""
        return self.family.parts(item)

    mode: str = "generate"  # or "decision" (scijudge.judges.decision): probabilities over the levels, no text
    decision_score: str = "expected"

    def use_mode(self, mode: str, decision_score: str = "expected") -> None:
        """Judge in ``mode`` ("generate" or "decision"); decision judgments are their own identity."""
        from scijudge.judges.decision import check_mode

        check_mode(mode, decision_score, self.spec.family, name=self.name, source=self.spec.source)
        self.mode, self.decision_score = mode, decision_score

    def decoding(self) -> dict[str, Any]:
        """The configured decoding settings that change an answer (part of a judgment's identity); a local
        engine's dtype too, unless float32 (``LocalEngine.identity_dtype``)."""
        lm = self.lm
        dtype = getattr(getattr(lm, "engine", None), "identity_dtype", None)
        if self.mode == "decision":
            from scijudge.judges.decision import decision_decoding

            settings = decision_decoding(self)
        else:
            max_tokens = getattr(lm, "kwargs", {}).get("max_tokens") or self.chain.config.max_tokens
            settings = {"max_tokens": max_tokens, "logprobs": self.chain.config.logprobs}
        return {**settings, "dtype": dtype} if isinstance(dtype, str) else settings

    def identity(self, item: Item, part: str = "") -> list[Identity]:
        """The one judgment ``judge_item(item, part)`` stores: the content it reads, spec, model, endpoint and
        decoding settings."""
        lm = self.lm
        return [Identity(item.id, self.name, part, self.spec_hash, model_name(lm), endpoint_of(lm),
                         input_hash(self.inputs_for(item, part)), decoding_text(self.decoding()))]

    def judge_item(self, item: Item, part: str = "") -> list[JudgeResult]:
        """Judge one item (one order, for pairwise): a list with its one typed result (the judge contract).

        LM trouble that is about this judgment becomes an abstention; a run-level fault raises
        ``EndpointError`` and a judgment that got no answer raises ``TransportFailure`` (never stored).
        """
        return [self.judge_one(item, part)]

    def judge_one(self, item: Item, part: str = "") -> JudgeResult:
        """Judge one item (one order, for pairwise) and return its typed result."""
        if self.mode == "decision":
            from scijudge.judges.decision import decide_one

            return decide_one(self, item, part)
        inputs = self.inputs_for(item, part)
        with recording() as record:
            started = time.perf_counter()
            prediction = self(**inputs)
            latency = time.perf_counter() - started
        return self.build_result(item.id, part, prediction, record, latency, input_hash(inputs))

    @property
    def native_async(self) -> bool:
        """``ajudge_item`` awaits the chain on the event loop (a generated judgment with no preset, with an LM
        that has an async client); the others run the blocking call in a worker thread."""
        from scijudge.chain.chain import has_async_engine

        cls = type(self)  # a subclass that judges its own way (checklists, optimizer judges) keeps its blocking path
        plain = cls.judge_one is Judge.judge_one and cls.judge_item is Judge.judge_item and cls.forward is Judge.forward
        return plain and self.mode == "generate" and self.preset is None and has_async_engine(self.lm)

    async def ajudge_item(self, item: Item, part: str = "") -> list[JudgeResult]:
        """Async variant of ``judge_item``: the same chain, each request awaited through DSPy's async LM call
        (``scijudge.run.aio``), so many judgments wait on one event loop instead of one thread each."""
        return [await self.ajudge_one(item, part)]

    async def ajudge_one(self, item: Item, part: str = "") -> JudgeResult:
        """Async variant of ``judge_one`` (decision mode and presets run the blocking call in a thread)."""
        if not self.native_async:
            ctx = contextvars.copy_context()
            return await asyncio.to_thread(ctx.run, self.judge_one, item, part)
        inputs = self.inputs_for(item, part)
        with recording() as record:
            started = time.perf_counter()
            prediction = await apredict_judgment(self, inputs)
            latency = time.perf_counter() - started
        return self.build_result(item.id, part, prediction, record, latency, input_hash(inputs))

    def result_from(self, item_id: str, part: str, record: CallRecord, latency: float, inputs_hash: str, *,
                    abstained_reason: str | None = None, **fields: Any) -> JudgeResult:
        """A JudgeResult for one call of this judge (identity and totals assembled in ``records``)."""
        return assemble_result(item_id=item_id, judge=self.name, part=part, family=self.spec.family,
                               spec_hash=self.spec_hash, lm=self.lm, inputs_hash=inputs_hash,
                               decoding=decoding_text(self.decoding()), attempts=list(record.attempts),
                               latency=latency, abstained_reason=abstained_reason, **fields)

    def build_result(self, item_id: str, part: str, prediction: dspy.Prediction, record: CallRecord,
                     latency: float, inputs_hash: str) -> JudgeResult:
        """The stored result of one prediction of this judge (made directly, in a batch, or by a fused call)."""
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


async def apredict_judgment(judge: Any, inputs: dict[str, Any]) -> dspy.Prediction:
    """``predict_judgment`` awaited (no preset): DSPy's ``Predict.acall`` calls the chain's ``acall``."""
    with recording(join=True) as record:
        try:
            with dspy.context(adapter=judge.chain, lm=judge.lm):
                prediction = await judge.predict.acall(**inputs)
            return dspy.Prediction(judgment=getattr(prediction, OUTPUT_FIELD), abstained=False, reason=None,
                                   attempts=record.attempts)
        except Abstained as exc:
            return dspy.Prediction(judgment=None, abstained=True, reason=exc.reason, attempts=record.attempts)


def predict_judgment(judge: Any, inputs: dict[str, Any], *, preset: Any = None) -> dspy.Prediction:
    """A judge module's ``predict`` run through its chain: the typed judgment, or an abstention with its reason
    (the one copy for ``Judge`` and ``FusedJudge``); attempts go to the current call record."""
    with recording(join=True) as record:
        try:
            if preset is not None:  # hook (issue 16): native free text first, structured retry below
                native = preset.first_try(judge, inputs, record)
                if native is not None:
                    return dspy.Prediction(judgment=native, abstained=False, reason=None, attempts=record.attempts)
            with dspy.context(adapter=judge.chain, lm=judge.lm):
                prediction = judge.predict(**inputs)
            return dspy.Prediction(judgment=getattr(prediction, OUTPUT_FIELD), abstained=False, reason=None,
                                   attempts=record.attempts)
        except Abstained as exc:
            return dspy.Prediction(judgment=None, abstained=True, reason=exc.reason, attempts=record.attempts)
