"""Decision mode: a judgment is the model's probability over the scale's levels (or verdict labels), no text.

A judge built with ``mode="decision"`` asks the rating only (the judge's own prompt, in its layout, closed by a
rating-only line) and stores the distribution over the levels at the answer position, renormalised, in
``probs``; the score is its expected value (``score="expected"``) or the most likely level (``"mode"``). No
rationale is generated, and the row says so (``rationale`` empty, ``result["mode"] == "decision"``).

Where the distribution comes from:

* a local ``hf:`` model: its engine's ``score_levels`` (``scijudge.lm.decision``): one prefill pass, the
  item's shared prefix computed once for all its rubrics (item-first layout), batched across items;
* an API model: the chain's decision request (``scijudge.chain.decision``): top logprobs at the rating token;
  a provider without logprobs stops the run with an error naming the model.

Decision judgments go through the same run API, store, identity and interrupts as generated ones; their
identity differs through the decoding settings (``{"mode": "decision", ...}``). Likert judges (pointwise and
pairwise) and checklist verdicts can be decided this way; other families are refused when the judge is built.
"""

from __future__ import annotations

import math
import time
from contextlib import nullcontext
from typing import Any, Literal

from scijudge.chain.chain import Abstained, CallRecord, recording
from scijudge.data import Item
from scijudge.errors import InputError
from scijudge.records import Attempt, JudgeResult, input_hash

Mode = Literal["generate", "decision"]
MODES: tuple[str, ...] = ("generate", "decision")
SCORE_RULES: tuple[str, ...] = ("expected", "mode")
DECISION_FAMILIES: tuple[str, ...] = ("likert", "pairwise", "checklist")
NO_RATIONALE = "decision mode: the score is read from the model's level probabilities; no rationale is generated"


def check_mode(mode: str, score: str, family: str, *, name: str = "", source: str | None = None) -> None:
    """Refuse an unknown mode or score rule, and decision mode for a family it cannot decide (one line)."""
    if mode not in MODES:
        raise InputError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}", field="mode")
    if score not in SCORE_RULES:
        raise InputError(f"unknown decision score {score!r}; choose one of {', '.join(SCORE_RULES)}",
                         field="decision_score")
    if mode == "decision" and family not in DECISION_FAMILIES:
        raise InputError(f"judge {name!r} ({family} family) cannot be decided from level probabilities: decision "
                         f"mode is for {', '.join(DECISION_FAMILIES)} judges; drop --mode decision for it",
                         file=source, field="--mode")


def decision_decoding(judge: Any) -> dict[str, Any]:
    """The decoding settings of a decision judgment (its identity): mode, score rule, request shape."""
    from scijudge.chain.decision import MAX_TOKENS, TOP_LOGPROBS

    return {"mode": "decision", "decision_score": judge.decision_score, "max_tokens": MAX_TOKENS,
            "top_logprobs": TOP_LOGPROBS}


def _questions(judge: Any) -> tuple[list[tuple[str, list[str], str]], dict[str, float] | None]:
    """What to decide for one judgment: [(field, levels, what)] and, for verdicts, each label's score."""
    family = judge.spec.family
    if family == "checklist":
        from scijudge.judges.checklist import SCORES

        labels = list(judge.spec.output_type().ALLOWED)  # (any Judge of the spec: an optimizer's generic one too)
        return [("verdict", labels, "verdict")], {label: float(SCORES[label]) for label in labels}
    from scijudge.vocab import scale_of

    scale = scale_of(judge.spec)
    levels = [f"{v:g}" for v in scale.levels()]
    if family == "pairwise":
        return [("rating_a", levels, "rating of answer A"), ("rating_b", levels, "rating of answer B")], None
    return [("rating", levels, "rating")], None


class Decision:
    """A decision judgment as a DSPy program returns it (``judge(**inputs)`` in decision mode): its score and
    verdict through ``run_fields`` (what optimizer metrics read), its level distribution in ``probs``."""

    def __init__(self, fields: dict[str, Any]) -> None:
        self.score: float | None = fields.get("score")
        self.verdict: str | None = fields.get("verdict")
        self.confidence: float | None = fields.get("confidence")
        self.probs: dict[str, float] = dict(fields.get("probs") or {})

    def run_fields(self) -> Any:
        from scijudge.spec.outputs import RunFields

        return RunFields(score=self.score, verdict=self.verdict, confidence=self.confidence)

    def __repr__(self) -> str:
        return f"Decision(score={self.score!r}, verdict={self.verdict!r}, probs={self.probs!r})"


def decision_prediction(judge: Any, inputs: dict[str, Any]) -> Any:
    """``Judge.forward`` in decision mode: a ``Decision`` as the prediction's judgment, or an abstention with its
    reason (how optimizers score decision candidates: no text is generated, so no rationale and no trace)."""
    import dspy

    with recording(join=True) as record:
        try:
            questions, label_scores = _questions(judge)
            dists = _decide(judge, inputs, questions, record)
        except Abstained as exc:
            return dspy.Prediction(judgment=None, abstained=True, reason=exc.reason, attempts=record.attempts)
        fields = _fields(judge, "", questions, dists, label_scores)  # no part: a program call is one order
        return dspy.Prediction(judgment=Decision(fields), abstained=False, reason=None, attempts=record.attempts)


def decide_one(judge: Any, item: Item, part: str = "") -> JudgeResult:
    """One decision judgment of ``judge`` (a generic or checklist Judge in decision mode) on ``item``."""
    inputs = judge.inputs_for(item, part)
    hashed = input_hash(inputs)
    extra: dict[str, Any] = {}
    with recording() as record:
        started = time.perf_counter()
        try:
            if judge.spec.family == "checklist":
                extra = _checklist_extra(judge, item, part)
            questions, label_scores = _questions(judge)
            dists = _decide(judge, inputs, questions, record)
        except Abstained as exc:
            abstained: JudgeResult = judge.result_from(
                item.id, part, record, time.perf_counter() - started, hashed, abstained_reason=exc.reason,
                result={"mode": "decision", **extra} or None)
            return abstained
        latency = time.perf_counter() - started
    fields = _fields(judge, part, questions, dists, label_scores)
    fields["result"].update(extra)
    made: JudgeResult = judge.result_from(item.id, part, record, latency, hashed, **fields)
    return made


def _chats(judge: Any, inputs: dict[str, Any], questions: list[tuple[str, list[str], str]],
           local: bool) -> list[tuple[str | None, tuple[Any, ...]]]:
    """The lm15 (system, messages) of each question's request: the judge's prompt closed by the rating-only line, or
    a prompt preset's own decision chat (a local model decides inside the native answer)."""
    from scijudge.chain.chain import to_lm15
    from scijudge.chain.decision import decision_messages, rating_only_instruction

    native = getattr(judge.preset, "decision_messages", None)
    if callable(native):
        return [to_lm15(native(judge.spec, inputs, prefill=local)) for _ in questions]
    return [decision_messages(judge.chain, judge.signature, judge.demos, inputs, rating_only_instruction(levels, what))
            for _, levels, what in questions]


def decision_chats(judge: Any, item: Item, part: str = "") -> list[tuple[str | None, tuple[Any, ...]]]:
    """The lm15 (system, messages) of each request ``decide_one`` sends to an API for ``item`` (one per question):
    what ``scijudge view`` shows as the prompt of a decision judgment."""
    questions, _ = _questions(judge)
    return _chats(judge, judge.inputs_for(item, part), questions, local=False)


def _checklist_extra(judge: Any, item: Item, part: str) -> dict[str, Any]:
    """The criterion a checklist decision is about; a report that needs chunking abstains (one call only)."""
    entry, _ = judge._entry(item, part)
    _, chunks, _ = judge._layout(item.answer or "")
    if chunks:
        raise Abstained(f"decision mode reads a report in one call; this report needs {len(chunks)} chunks of "
                        f"{judge.chunk_tokens} tokens (raise --chunk-tokens or judge it without --mode decision)")
    return {"criterion_id": entry["id"], "criterion": entry["criterion"], "weight": entry["weight"],
            "axis": entry["axis"]}


def _decide(judge: Any, inputs: dict[str, Any], questions: list[tuple[str, list[str], str]],
            record: CallRecord) -> list[tuple[dict[str, float], float]]:
    """(distribution, coverage) of every question, from the local engine or through the chain."""
    from scijudge.chain.decision import decide_via_api, decision_request

    lm = judge.lm
    engine = getattr(lm, "engine", None)
    local = callable(getattr(engine, "submit_levels", None))
    endpoint = bool(getattr(engine, "decision_endpoint", False))  # scijudge.lm.decisions: it needs the levels
    requests = [decision_request(lm.model, system, chat, levels if endpoint else None)
                for (system, chat), (_, levels, _) in zip(_chats(judge, inputs, questions, local), questions,
                                                          strict=True)]
    if local:
        count = getattr(lm, "scijudge_local_calls", None)  # e.g. an optimization budget counts them as calls
        with count(len(requests)) if callable(count) else nullcontext():
            return _decide_locally(engine, requests, questions, record)
    return [decide_via_api(judge.chain, lm, request, levels, record)
            for request, (_, levels, _) in zip(requests, questions, strict=True)]


def _decide_locally(engine: Any, requests: list[Any], questions: list[tuple[str, list[str], str]],
                    record: CallRecord) -> list[tuple[dict[str, float], float]]:
    from dspy.lm15 import ContextLengthError, InvalidRequestError

    from scijudge.chain.chain import STOP
    from scijudge.errors import TransportFailure

    stop = STOP.get()
    if stop is not None and stop.is_set():  # as the chain does: nothing is sent once the run stops
        raise TransportFailure("the run was stopped before this request was sent")
    out = []
    started = time.perf_counter()
    try:
        futures = [engine.submit_levels(r, levels) for r, (_, levels, _) in zip(requests, questions, strict=True)]
        scores = [f.result() for f in futures]
    except (ContextLengthError, InvalidRequestError) as exc:
        record.attempts.append(Attempt(strategy="decision", temperature=0.0, max_tokens=0,
                                       outcome="context_overflow" if isinstance(exc, ContextLengthError)
                                       else "request_rejected", error=str(exc)[:500],
                                       latency_s=time.perf_counter() - started))
        raise Abstained(f"decision: {exc}", record.attempts) from exc
    for score, (_, levels, _) in zip(scores, questions, strict=True):
        out.append((dict(zip(levels, score.probs, strict=True)), score.coverage))
    record.attempts.append(Attempt(strategy="decision", temperature=0.0, max_tokens=0, outcome="ok", tokens_out=0,
                                   latency_s=time.perf_counter() - started))
    return out


def _expected(dist: dict[str, float], values: dict[str, float] | None = None) -> float:
    return math.fsum(p * (values[k] if values else float(k)) for k, p in dist.items())


def _most_likely(dist: dict[str, float]) -> str:
    return max(dist, key=lambda k: dist[k])  # ties: the first level in scale order


def _fields(judge: Any, part: str, questions: list[tuple[str, list[str], str]],
            dists: list[tuple[dict[str, float], float]], label_scores: dict[str, float] | None) -> dict[str, Any]:
    """The stored columns of a decision judgment: score, verdict, confidence, probs, result, no rationale."""
    rule = judge.decision_score
    family = judge.spec.family
    result: dict[str, Any] = {"mode": "decision", "score_rule": rule, "rationale": None, "note": NO_RATIONALE}
    if family == "checklist":
        dist, coverage = dists[0]
        verdict = _most_likely(dist)
        expected = _expected(dist, label_scores)
        score = expected if rule == "expected" else label_scores[verdict]  # type: ignore[index]
        result.update(verdict=verdict, expected_score=expected, coverage=coverage)
        return dict(score=score, verdict=verdict, confidence=dist[verdict], probs=dist, result=result,
                    rationale=None)
    if family == "pairwise":
        (pa, ca), (pb, cb) = dists
        ea, eb = _expected(pa), _expected(pb)
        if rule == "expected":
            score = ea - eb
        else:
            score = float(_most_likely(pa)) - float(_most_likely(pb))
        diff: dict[float, float] = {}
        for a, p in pa.items():  # the difference's distribution, the two ratings read as independent
            for b, q in pb.items():
                diff[float(a) - float(b)] = diff.get(float(a) - float(b), 0.0) + p * q
        verdict = "A" if score > 0 else "B" if score < 0 else "tie"
        if part == "BA":  # told in the item's own terms, as generated pairwise judgments are
            score, verdict = -score, {"A": "B", "B": "A"}.get(verdict, verdict)
            diff = {-d + 0.0: p for d, p in diff.items()}  # + 0.0: no "-0" level
        probs = {f"{d:g}": diff[d] for d in sorted(diff)}
        result.update(rating_a_probs=pa, rating_b_probs=pb, expected_rating_a=ea, expected_rating_b=eb,
                      coverage=min(ca, cb), preference=verdict,
                      probs_note="difference of the two ratings, read as independent")
        return dict(score=score, verdict=verdict, probs=probs, result=result, rationale=None)
    dist, coverage = dists[0]
    expected = _expected(dist)
    score = expected if rule == "expected" else float(_most_likely(dist))
    result.update(rating=_most_likely(dist), expected_rating=expected, coverage=coverage)
    return dict(score=score, probs=dist, result=result, rationale=None)


__all__ = ["DECISION_FAMILIES", "MODES", "NO_RATIONALE", "SCORE_RULES", "Decision", "check_mode", "decide_one",
           "decision_chats", "decision_decoding", "decision_prediction"]
