"""A fused multi-rubric judge: one prompt and one typed answer that rates an item on several rubrics at once.

The source judged all nine YESciEval QA rubrics in one call; separate judges re-read the item once per rubric.
:class:`FusedJudge` builds one signature whose output holds each rubric's own typed output (rationale and
rating) under the rubric's short name, runs it through the same structured-output chain, and turns the
answer into one :class:`JudgeResult` per rubric, built by each rubric's generic :class:`Judge` exactly as a
separate judgment would be. The results of one call share a ``call_id`` (stored in ``result``), carry the
rubric's judge name (so ``calibrate`` matches them to the rubric's human labels) and a spec hash of their
own (so a fused judgment is never mistaken for a separate one), and split the call's tokens and cost.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Sequence
from typing import Any

import dspy
import pydantic

from scijudge.data import Item
from scijudge.errors import SpecError
from scijudge.judges.base import Judge, predict_judgment
from scijudge.spec.signatures import OUTPUT_FIELD, build_signature, render_instructions
from scijudge.spec.judge_spec import JudgeSpec
from scijudge.chain.chain import StructuredChain, recording
from scijudge.records import Identity, JudgeResult

_HEAD = (
    "Judge the input on each of the {n} qualities below, one at a time and independently of the others: "
    "for each quality write a short rationale and then give its rating on that quality's own scale. "
    "Answer with one JSON object holding one entry per quality, under the quality's name."
)


def short_name(spec: JudgeSpec) -> str:
    """The key of a rubric inside the fused answer: the last part of its name (``correctness``)."""
    return spec.name.rsplit(".", 1)[-1].replace("-", "_")


def fused_output_type(specs: Sequence[JudgeSpec]) -> type[pydantic.BaseModel]:
    """A pydantic model with one field per rubric, typed with that rubric's own output model."""
    fields: dict[str, Any] = {
        short_name(spec): (spec.output_type(), pydantic.Field(description=spec.description)) for spec in specs
    }
    return pydantic.create_model("FusedJudgment", **fields)


def fused_instructions(specs: Sequence[JudgeSpec]) -> str:
    """One instruction text: what fusing means, then every rubric's instructions under its short name."""
    parts = [_HEAD.format(n=len(specs))]
    for spec in specs:
        parts.append(f"## {short_name(spec)}\n{render_instructions(spec)}")
    return "\n\n".join(parts)


def _check(specs: Sequence[JudgeSpec]) -> None:
    if len(specs) < 2:
        raise SpecError("a fused judge needs at least two rubrics")
    families = {s.family for s in specs}
    if families != {"likert"}:
        raise SpecError(f"a fused judge combines Likert rubrics only; got families {sorted(families)}")
    inputs = [tuple(i.name for i in s.inputs) for s in specs]
    if len(set(inputs)) != 1:
        names = ", ".join(f"{s.name}: {list(i)}" for s, i in zip(specs, inputs, strict=True))
        raise SpecError(f"the rubrics of a fused judge must read the same inputs; {names}")
    shorts = [short_name(s) for s in specs]
    if len(set(shorts)) != len(shorts):
        raise SpecError(f"two rubrics of a fused judge end in the same name: {shorts}")


class _RubricJudges:
    """A plain holder, so DSPy does not count the rubric judges' predictors as the fused judge's own."""

    def __init__(self, judges: list[Judge]) -> None:
        self.judges = judges


class FusedJudge(dspy.Module):
    """Several Likert rubrics judged in one call; ``judge_item`` returns one result per rubric.

    Example: ``FusedJudge([get_spec(n) for n in names], lm=lm).judge_item(item)``.
    """

    def __init__(self, specs: Sequence[JudgeSpec], *, lm: Any = None, chain: StructuredChain | None = None) -> None:
        super().__init__()
        specs = list(specs)
        _check(specs)
        self.specs = specs
        self._bound_lm = lm
        self.chain = chain or StructuredChain()
        # Each rubric's generic judge builds that rubric's results; kept out of DSPy's sight (a plain holder),
        # since only the fused predictor is ever called or tuned.
        self._holder = _RubricJudges([Judge(spec, lm=lm, chain=self.chain) for spec in specs])
        digest = hashlib.sha256("\x1f".join(f"{s.name}:{s.spec_hash()}" for s in specs).encode()).hexdigest()
        self._spec_hash = digest[:16]
        for rubric in self.rubrics:  # a fused judgment of a rubric is not the separate one: its own identity
            rubric.tag_identity(f"fused:{self._spec_hash}")
        signature = build_signature(specs[0], instructions=fused_instructions(specs))
        self.predict = dspy.Predict(signature.with_updated_fields(OUTPUT_FIELD, type_=fused_output_type(specs)))

    def __deepcopy__(self, memo: dict[int, Any]) -> FusedJudge:
        """Copies (made by optimizers) get their own predictor and share the LM, chain and rubric judges."""
        import copy

        clone = self.__class__.__new__(self.__class__)
        memo[id(self)] = clone
        for key, value in self.__dict__.items():
            shared = key in ("_bound_lm", "chain", "_holder", "specs")
            clone.__dict__[key] = value if shared else copy.deepcopy(value, memo)
        return clone

    @property
    def rubrics(self) -> list[Judge]:
        """One generic judge per rubric (their results are what a fused call stores)."""
        return self._holder.judges

    @property
    def name(self) -> str:
        return "fused:" + ",".join(spec.name for spec in self.specs)

    @property
    def spec_hash(self) -> str:
        return self._spec_hash

    @property
    def spec(self) -> JudgeSpec:
        """The first rubric's spec (inputs, family) for code that asks a judge for its spec."""
        return self.specs[0]

    @property
    def input_names(self) -> list[str]:
        return self.rubrics[0].input_names

    @property
    def lm(self) -> Any:
        """The LM this judge calls: its own, else DSPy's configured one."""
        return self._bound_lm or dspy.settings.lm

    @lm.setter
    def lm(self, value: Any) -> None:
        self._bound_lm = value
        for rubric in self.rubrics:
            rubric.lm = value

    def tag_identity(self, tag: str) -> None:
        """Judgments made under a variant (e.g. another prompt layout) get their own identity, rubric by rubric."""
        from scijudge.judges.base import tagged_hash

        self._spec_hash = tagged_hash(tag, self._spec_hash)
        for rubric in self.rubrics:
            rubric.tag_identity(tag)

    def use_chain(self, chain: StructuredChain) -> None:
        """Send through another chain (e.g. one that lays the prompt out item-first)."""
        self.chain = chain
        for rubric in self.rubrics:
            rubric.use_chain(chain)

    def parts(self, item: Item) -> list[str]:
        return [""]

    def inputs_for(self, item: Item, part: str = "") -> dict[str, Any]:
        return self.rubrics[0].inputs_for(item, part)

    def identity(self, item: Item, part: str = "") -> list[Identity]:
        """The judgments one call produces: one per rubric, in rubric order."""
        return [one for rubric in self.rubrics for one in rubric.identity(item, part)]

    def forward(self, **inputs: Any) -> dspy.Prediction:
        return predict_judgment(self, inputs)

    def judge_item(self, item: Item, part: str = "") -> list[JudgeResult]:
        """Judge one item on every rubric in one call: one result per rubric, sharing a call id."""
        with recording() as record:
            started = time.perf_counter()
            prediction = self(**self.inputs_for(item, part))
            latency = time.perf_counter() - started
        record.logprobs = None  # several ratings in one answer: per-rubric probabilities are not read from it
        call_id = uuid.uuid4().hex[:16]
        results = []
        for rubric in self.rubrics:
            one = prediction
            if not prediction.abstained:
                one = dspy.Prediction(judgment=getattr(prediction.judgment, short_name(rubric.spec)),
                                      abstained=False, reason=None, attempts=prediction.attempts)
            results.append(rubric.build_result(item.id, part, one, record, latency,
                                               rubric.identity(item, part)[0].input_hash))
        return _shared(results, call_id, [s.name for s in self.specs])


def _shared(results: list[JudgeResult], call_id: str, rubrics: list[str]) -> list[JudgeResult]:
    """Mark the results of one call with its id and split its tokens and cost so that sums stay exact."""
    n = len(results)
    out = []
    for index, result in enumerate(results):
        tokens_in = result.tokens_in // n + (1 if index < result.tokens_in % n else 0)
        tokens_out = result.tokens_out // n + (1 if index < result.tokens_out % n else 0)
        payload = dict(result.result or {})
        payload.update(call_id=call_id, fused=rubrics)
        out.append(result.model_copy(update={
            "tokens_in": tokens_in, "tokens_out": tokens_out,
            "cost": result.cost / n if result.cost is not None else None,
            "result": payload if result.ok else {"call_id": call_id, "fused": rubrics},
        }))
    return out


# ----------------------------------------------------------------------------------- optimizing a fused judge


def fused_examples(judge: FusedJudge, items: Sequence[Item], labels: Sequence[Any]) -> list[dspy.Example]:
    """One DSPy example per labelled item: the judge's inputs plus ``human`` = {rubric short name: mean score}.

    Items with no score for any of the judge's rubrics are left out; ``labels`` are ``HumanLabel``s.
    """
    wanted = {spec.name: short_name(spec) for spec in judge.specs}
    scores: dict[str, dict[str, list[float]]] = {}
    for label in labels:
        if label.judge in wanted and label.score is not None and not label.part:
            scores.setdefault(label.item_id, {}).setdefault(wanted[label.judge], []).append(float(label.score))
    examples = []
    for item in items:
        if item.id in scores:
            human = {name: sum(values) / len(values) for name, values in scores[item.id].items()}
            inputs = judge.inputs_for(item)
            examples.append(dspy.Example(**inputs, human=human, item_id=item.id).with_inputs(*inputs))
    return examples


def fused_metric(example: Any, prediction: Any, trace: Any = None) -> float:
    """Mean over the labelled rubrics of 1 - |judge - human| / 4 (1-5 scales); an abstention scores 0."""
    if getattr(prediction, "abstained", False) or prediction.judgment is None:
        return 0.0
    closeness = []
    for name, human in example.human.items():
        output = getattr(prediction.judgment, name, None)
        rating = getattr(output, "rating", None)
        closeness.append(0.0 if rating is None else max(0.0, 1.0 - abs(float(rating) - human) / 4.0))
    return sum(closeness) / len(closeness) if closeness else 0.0
