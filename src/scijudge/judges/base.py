"""The generic spec-driven judge: a dspy.Module whose every call runs through the structured chain."""

from __future__ import annotations

import asyncio
import hashlib
import math
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

import dspy
from pydantic import BaseModel, Field

from scijudge.data import Item
from scijudge.errors import InputError
from scijudge.outputs import JudgeOutput, RunFields
from scijudge.signatures import OUTPUT_FIELD, build_signature
from scijudge.specs import JudgeSpec, get_spec
from scijudge.structured import Abstained, Attempt, ChainConfig, StructuredChain, start_record, _CURRENT

Status = Literal["ok", "abstained"]
_DEFAULT_CHAIN = StructuredChain()


def default_chain() -> StructuredChain:
    """The process-wide chain, so format rejections learnt by one judge help every other."""
    return _DEFAULT_CHAIN


class JudgeResult(BaseModel):
    """One judgment as stored: typed output or an abstention with its reason, plus its full cost."""

    item_id: str
    judge: str
    part: str = ""
    family: str
    spec_hash: str
    model: str
    status: Status
    score: float | None = None
    verdict: str | None = None
    confidence: float | None = None
    probs: dict[str, float] | None = None
    result: dict[str, Any] | None = None
    rationale: str | None = None
    reason: str | None = None
    attempts: list[Attempt] = Field(default_factory=list)
    tokens_in: int = 0
    tokens_out: int = 0
    cost: float | None = None
    latency_s: float = 0.0
    created_at: str = Field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))

    @property
    def key(self) -> str:
        """Identity in a run store: same item, judge, part, spec and model means the same judgment."""
        return judgment_key(self.item_id, self.judge, self.part, self.spec_hash, self.model)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def judgment_key(item_id: str, judge: str, part: str, spec_hash: str, model: str) -> str:
    """Stable key of a judgment (a hash, so odd characters in ids never matter)."""
    raw = "\x1f".join((item_id, judge, part, spec_hash, model))
    return hashlib.sha256(raw.encode()).hexdigest()[:32]


def model_name(lm: Any) -> str:
    """The model string recorded in results; never includes keys or endpoints."""
    if lm is None:
        return "unconfigured"
    return str(getattr(lm, "model", type(lm).__name__))


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

            self.chain = StructuredChain(replace(self.chain.config, logprobs=10))
            self.chain._rejected = default_chain()._rejected
        self.predict = dspy.Predict(build_signature(spec))
        if spec.demos:
            from scijudge.demos import demos_from_spec  # demonstrations saved in the spec (e.g. by an optimizer)

            self.predict.demos = demos_from_spec(spec)
        self._spec_hash = spec.spec_hash()
        self._prepare = spec.prepare_function()
        self.preset = None  # hook (issue 16): a prompt preset tried before the structured chain
        if spec.preset:
            from scijudge.presets import get_preset

            self.preset = get_preset(spec.preset, source=spec.source)
            self.preset.check(spec)

    def __deepcopy__(self, memo: dict[int, Any]) -> "Judge":
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
    def input_names(self) -> list[str]:
        return [i.name for i in self.spec.inputs]

    def _lm(self) -> Any:
        return self.lm or dspy.settings.lm

    def forward(self, **inputs: Any) -> dspy.Prediction:
        record, token = (_CURRENT.get(), None) if _CURRENT.get() is not None else start_record()
        try:
            if self.preset is not None:  # hook (issue 16): native free text first, structured retry below
                native = self.preset.first_try(self, inputs, record)
                if native is not None:
                    return dspy.Prediction(judgment=native, abstained=False, reason=None, attempts=record.attempts)
            with dspy.context(adapter=self.chain, lm=self._lm()):
                prediction = self.predict(**inputs)
            return dspy.Prediction(judgment=getattr(prediction, OUTPUT_FIELD), abstained=False, reason=None,
                                   attempts=record.attempts)
        except Abstained as exc:
            return dspy.Prediction(judgment=None, abstained=True, reason=exc.reason, attempts=record.attempts)
        finally:
            if token is not None:
                _CURRENT.reset(token)

    # --- items in, typed results out ---------------------------------------------------------
    def inputs_for(self, item: Item, part: str = "") -> dict[str, Any]:
        """The judge's keyword inputs for an item; a missing required input names the item's line and field."""
        values: dict[str, Any] = {}
        for spec_input in self.spec.inputs:
            name = spec_input.name
            source = name
            if self.spec.family == "pairwise" and name in ("answer_a", "answer_b"):
                first, second = ("answer", "answer_b") if part != "BA" else ("answer_b", "answer")
                source = first if name == "answer_a" else second
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
        """Pairwise judges run in both orders ("AB", "BA") so position bias shows as inconsistency.

        An item without a second answer has nothing to compare: a pairwise judge does not apply to it.
        """
        if self.spec.family == "pairwise":
            return ["AB", "BA"] if item.value("answer_b") else []
        return [""]

    def judge_item(self, item: Item, part: str = "") -> JudgeResult:
        """Judge one item (one order, for pairwise) and return a typed result; never raises on LM failure."""
        prediction, record, latency = self._run_recorded(self.inputs_for(item, part))
        return self._result(item.id, part, prediction, record, latency)

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

    def _result(self, item_id: str, part: str, prediction: dspy.Prediction, record: Any,
                latency: float) -> JudgeResult:
        attempts: list[Attempt] = list(record.attempts)
        base = dict(
            item_id=item_id, judge=self.name, part=part, family=self.spec.family, spec_hash=self.spec_hash,
            model=model_name(self._lm()), attempts=attempts, latency_s=latency,
            tokens_in=sum(a.tokens_in or 0 for a in attempts), tokens_out=sum(a.tokens_out or 0 for a in attempts),
            cost=_sum_cost(attempts),
        )
        if prediction.abstained:
            return JudgeResult(status="abstained", reason=prediction.reason, **base)
        output: JudgeOutput = prediction.judgment
        fields: RunFields = output.run_fields() if isinstance(output, JudgeOutput) else RunFields()
        if self.spec.family == "pairwise" and part == "BA" and fields.verdict in ("A", "B"):
            # Report the preference in the item's own terms: A is always `answer`, B is `answer_b`.
            fields = fields.model_copy(update={"verdict": "B" if fields.verdict == "A" else "A",
                                               "score": -fields.score if fields.score is not None else None})
        probs = None
        if record.logprobs and self.spec.family == "likert":
            from scijudge.lm.logprobs import rating_distribution

            dist = rating_distribution(record.logprobs, field="rating",
                                       values=tuple(int(v) for v in self.spec.scale.levels()))
            probs = {str(k): float(v) for k, v in dist.items()} if dist else None
        payload = output.model_dump(mode="json") if isinstance(output, BaseModel) else {"value": output}
        if probs:
            payload["expected_rating"] = math.fsum(float(k) * p for k, p in probs.items())
        return JudgeResult(
            status="ok", score=fields.score, verdict=fields.verdict, confidence=fields.confidence, probs=probs,
            result=payload,
            rationale=fields.rationale, **base,
        )


def _sum_cost(attempts: list[Attempt]) -> float | None:
    costs = [a.cost for a in attempts if a.cost is not None]
    return math.fsum(costs) if costs else None


def build_judge(spec: JudgeSpec, *, lm: Any = None, rating_probs: bool = False,
                chunk_tokens: int | None = None, overlap_tokens: int | None = None) -> Judge:
    """The right Judge class for a spec's family (checklist judges chunk long reports)."""
    if spec.family == "checklist":
        from scijudge.judges.checklist import ChecklistJudge

        sizes = {k: v for k, v in (("chunk_tokens", chunk_tokens), ("overlap_tokens", overlap_tokens)) if v}
        return ChecklistJudge(spec, lm=lm, **sizes)
    return Judge(spec, lm=lm, rating_probs=rating_probs)


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
