"""The checklist judge itself: one verdict per (report, criterion), through evidence and synthesis steps."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from typing import Any

import dspy

from scijudge.data import Item
from scijudge.errors import InputError, SpecError
from scijudge.judges.base import Judge
from scijudge.records import Identity, JudgeResult, input_hash
from scijudge.judges.checklist._chunking import (
    _BYTE_SLACK,
    DEFAULT_CHUNK_TOKENS,
    MIN_CHUNK_TOKENS,
    Chunk,
    default_overlap,
    split_report,
    token_counter_for,
)
from scijudge.judges.checklist._outputs import ChunkEvidence, CriterionVerdict
from scijudge.judges.checklist._quotes import unmatched_quotes
from scijudge.judges.checklist._rubric import rubric_entries as _rubric_entries
from scijudge.judges.checklist._rubric import rubric_summary, task_facets
from scijudge.spec.signatures import OUTPUT_FIELD, build_signature
from scijudge.spec.judge_spec import JudgeSpec, get_spec
from scijudge.chain.chain import Abstained, StructuredChain, recording

CHECKLIST_SPEC = "researchrubrics.checklist"
TERNARY_SPEC = "researchrubrics.checklist.ternary"
EVIDENCE_SPEC = "researchrubrics.evidence"
SYNTHESIS_SPEC = "researchrubrics.synthesis"


def _render_evidence(findings: list[dict[str, Any]]) -> str:
    """Pooled evidence as the synthesis step reads it: part by part, quotes marked when not found verbatim."""
    blocks = []
    total = len(findings)
    for finding in findings:
        head = f"Part {finding['part']} of {total} ({finding['bearing']})"
        lines = [head, f"Notes: {finding['notes'].strip() or '(none)'}"]
        unmatched = set(finding["unmatched_quotes"])
        if finding["quotes"]:
            lines.append("Quotes:")
            for quote in finding["quotes"]:
                flag = "  [not found verbatim in the report]" if quote in unmatched else ""
                lines.append(f"- {json.dumps(quote, ensure_ascii=False)}{flag}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


class _Layout:
    """A report's token count and chunks, filled once under its own lock."""

    def __init__(self, report: str) -> None:
        self.report = report
        self.lock = threading.Lock()
        self.total: int | None = None
        self.chunks: list[Chunk] = []


class _LayoutCache:
    """The last few reports' layouts, shared by the threads judging their criteria (a copy starts empty)."""

    SIZE = 64

    def __init__(self) -> None:
        self._entries: dict[tuple[Any, ...], _Layout] = {}
        self._lock = threading.Lock()

    def entry(self, report: str, counter_key: tuple[Any, ...]) -> _Layout:
        key = (*counter_key, len(report), hash(report))
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry.report != report:
                entry = self._entries[key] = _Layout(report)
                while len(self._entries) > self.SIZE:
                    self._entries.pop(next(iter(self._entries)))
            return entry

    def __deepcopy__(self, memo: dict[int, Any]) -> _LayoutCache:
        return _LayoutCache()


class _Failed(Exception):
    """A step of the procedure abstained: carries which step and why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ChecklistJudge(Judge):
    """Judge each criterion of a report's rubric (one part per criterion id), chunking long reports.

    Args:
        spec: the verdict spec (``researchrubrics.checklist`` binary, or ``...checklist.ternary``); its
            output type (binary or ternary) is also used by the synthesis step.
        evidence_spec / synthesis_spec: specs of the per-part evidence step and the synthesis step.
        chunk_tokens: the report budget per call; a longer report is chunked into parts of this size.
        overlap_tokens: tokens shared by consecutive parts, so that a passage cut at a boundary is seen whole
            (default: 1,000, at most an eighth of ``chunk_tokens``).
        tokenizer: a tokenizer (``encode``) or ``text -> count`` function; default: see the module docstring.
    """

    def __init__(self, spec: JudgeSpec | None = None, *, lm: Any = None, chain: StructuredChain | None = None,
                 evidence_spec: JudgeSpec | None = None, synthesis_spec: JudgeSpec | None = None,
                 chunk_tokens: int = DEFAULT_CHUNK_TOKENS, overlap_tokens: int | None = None,
                 tokenizer: Any = None) -> None:
        spec = spec or get_spec(CHECKLIST_SPEC)
        if spec.family != "checklist":
            raise SpecError(f"the checklist judge needs a spec of family 'checklist', got {spec.family!r}",
                            file=spec.source, field="family")
        output = spec.output_type()
        if not (isinstance(output, type) and issubclass(output, CriterionVerdict)):
            step = (f"; {spec.name} is a step inside the checklist judge, not a judge: use {CHECKLIST_SPEC} or "
                    f"{TERNARY_SPEC}" if spec.name in (EVIDENCE_SPEC, SYNTHESIS_SPEC) else "")
            raise SpecError(f"the checklist judge's output must be CriterionVerdict or a subclass{step}",
                            file=spec.source, field="output")
        if chunk_tokens < MIN_CHUNK_TOKENS:
            raise InputError(f"chunk budget must be at least {MIN_CHUNK_TOKENS} tokens, got {chunk_tokens}",
                             field="chunk_tokens")
        if overlap_tokens is None:  # the default adjusts to the budget, so any allowed budget works alone
            overlap_tokens = default_overlap(chunk_tokens)
        if not 0 <= overlap_tokens <= chunk_tokens // 2:
            raise InputError(f"overlap must be between 0 and half the chunk budget ({chunk_tokens // 2}), "
                             f"got {overlap_tokens}", field="overlap_tokens")
        super().__init__(spec, lm=lm, chain=chain)
        self.output_type: type[CriterionVerdict] = output
        self.evidence_spec = evidence_spec or get_spec(EVIDENCE_SPEC)
        synthesis = synthesis_spec or get_spec(SYNTHESIS_SPEC)
        # The synthesis step answers with the same verdict type as the single-call path (binary or ternary).
        self.synthesis_spec = synthesis.model_copy(update={"output": spec.output})
        self.evidence = dspy.Predict(build_signature(self.evidence_spec))
        self.synthesize = dspy.Predict(build_signature(self.synthesis_spec))
        self.chunk_tokens = chunk_tokens
        self.overlap_tokens = overlap_tokens
        self.tokenizer = tokenizer
        self._layouts = _LayoutCache()
        payload = [spec.spec_hash(), self.evidence_spec.spec_hash(), self.synthesis_spec.spec_hash(),
                   chunk_tokens, overlap_tokens]
        self._spec_hash = hashlib.sha256(json.dumps(payload).encode()).hexdigest()[:16]

    # --- parts and inputs ----------------------------------------------------------------------------
    def parts(self, item: Item) -> list[str]:
        """One part per criterion: the criterion ids, in rubric order."""
        return [e["id"] for e in _rubric_entries(item)]

    def _entry(self, item: Item, part: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        entries = _rubric_entries(item)
        for entry in entries:
            if entry["id"] == part:
                return entry, entries
        file, line = item.origin
        raise InputError(f"item {item.id!r} has no criterion with id {part!r}", file=file, line=line,
                         field="meta.rubrics")

    def inputs_for(self, item: Item, part: str = "") -> dict[str, Any]:
        """Keyword inputs of one criterion's judgment: report first (the shared, cacheable prefix), then
        the task, the criterion and its axis."""
        if not part:
            part = self.parts(item)[0]
        return self._inputs(item, self._entry(item, part)[0])

    def _inputs(self, item: Item, entry: dict[str, Any]) -> dict[str, Any]:
        if not item.answer or not item.answer.strip():
            file, line = item.origin
            raise InputError(f"item {item.id!r} has an empty report", file=file, line=line, field="answer")
        return {"report": item.answer, "task": item.question or None, "criterion": entry["criterion"],
                "axis": entry["axis"]}

    # --- the procedure -------------------------------------------------------------------------------
    def _layout(self, report: str) -> tuple[int | None, list[Chunk], str]:
        """Token count and chunks of a report (none when it fits), computed once per report and shared by
        all its criteria: counting and splitting a 300k-token report takes about a second."""
        if len(report.encode("utf-8")) + _BYTE_SLACK <= self.chunk_tokens:
            # Every token covers at least one byte, so this report fits without counting (and without
            # importing a tokenizer: litellm alone takes seconds to import).
            return None, [], "not counted: fewer UTF-8 bytes than the budget"
        count, method = token_counter_for(self.lm, self.tokenizer)
        entry = self._layouts.entry(report, (method, getattr(self.lm, "model", None)))
        with entry.lock:
            if entry.total is None:
                total = count(report)
                entry.chunks = (split_report(report, self.chunk_tokens, self.overlap_tokens, count, total)
                                if total > self.chunk_tokens else [])
                entry.total = total
        return entry.total, entry.chunks, method

    def _call(self, predictor: dspy.Predict, step: str, **inputs: Any) -> Any:
        try:
            with dspy.context(adapter=self.chain, lm=self.lm):
                return getattr(predictor(**inputs), OUTPUT_FIELD)
        except Abstained as exc:
            raise _Failed(f"{step}: {exc.reason}") from exc

    def forward(self, report: str, criterion: str, task: str | None = None,  # type: ignore[override]
                axis: str | None = None) -> dspy.Prediction:
        """Judge one criterion against one report; returns ``judgment`` (typed verdict or None),
        ``abstained``, ``reason``, ``attempts`` and ``details`` (chunks, evidence, unmatched quotes)."""
        details: dict[str, Any] = {}
        with recording(join=True) as record:
            try:
                judgment = self._procedure(report, criterion, task, axis, details)
                return dspy.Prediction(judgment=judgment, abstained=False, reason=None, attempts=record.attempts,
                                       details=details)
            except _Failed as exc:
                return dspy.Prediction(judgment=None, abstained=True, reason=exc.reason, attempts=record.attempts,
                                       details=details)

    def _procedure(self, report: str, criterion: str, task: str | None, axis: str | None,
                   details: dict[str, Any]) -> CriterionVerdict:
        total, chunks, method = self._layout(report)
        details.update(report_tokens=total, token_counter=method)
        if not chunks:
            details.update(mode="single", chunks=1)
            judgment = self._call(self.predict, "verdict", report=report, task=task, criterion=criterion, axis=axis)
        else:
            details.update(mode="chunked", chunks=len(chunks), chunk_evidence=[])
            findings = details["chunk_evidence"]
            for number, chunk in enumerate(chunks, start=1):
                text = report[chunk.start:chunk.end]
                position = (f"Part {number} of {len(chunks)} (characters {chunk.start}-{chunk.end} of "
                            f"{len(report)}, about {chunk.tokens} tokens)")
                found: ChunkEvidence = self._call(
                    self.evidence, f"evidence, part {number} of {len(chunks)}", report_part=text,
                    part_position=position, task=task, criterion=criterion, axis=axis)
                findings.append({"part": number, "start": chunk.start, "end": chunk.end, "tokens": chunk.tokens,
                                 "bearing": found.bearing, "notes": found.notes, "quotes": found.quotes,
                                 "unmatched_quotes": unmatched_quotes(found.quotes, text)})
            judgment = self._call(self.synthesize, "synthesis", evidence=_render_evidence(findings), task=task,
                                  criterion=criterion, axis=axis)
        details["unmatched_quotes"] = unmatched_quotes(judgment.evidence_quotes, report)
        verdict: CriterionVerdict = judgment
        return verdict

    # --- items in, typed results out ---------------------------------------------------------------
    def identity(self, item: Item, part: str = "") -> list[Identity]:
        """The one judgment of criterion ``part`` (default: the first) of the item."""
        return super().identity(item, part or self.parts(item)[0])

    def judge_one(self, item: Item, part: str = "") -> JudgeResult:
        """Judge one criterion (``part`` = its id) of an item; failures become an abstention with the reason."""
        if not part:
            part = self.parts(item)[0]
        if self.mode == "decision":
            from scijudge.judges.decision import decide_one

            return decide_one(self, item, part)
        entry, entries = self._entry(item, part)
        inputs = self._inputs(item, entry)
        with recording() as record:
            started = time.perf_counter()
            prediction = self(**inputs)
            latency = time.perf_counter() - started
        result: dict[str, Any] = {}
        judgment = prediction.judgment
        if judgment is not None:
            result.update(judgment.model_dump(mode="json"))
        result.update(
            criterion_id=entry["id"], criterion=entry["criterion"], weight=entry["weight"], axis=entry["axis"],
            rubric=rubric_summary(entries), task_facets=task_facets(item), **prediction.details,
        )
        if prediction.abstained:
            return self.result_from(item.id, part, record, latency, input_hash(inputs),
                                    abstained_reason=prediction.reason, result=result)
        fields = judgment.run_fields()
        return self.result_from(item.id, part, record, latency, input_hash(inputs), score=fields.score,
                                verdict=fields.verdict, confidence=fields.confidence, rationale=fields.rationale,
                                result=result)


def load_checklist_judge(name_or_spec: str | JudgeSpec = CHECKLIST_SPEC, *, lm: Any = None,
                         model: str | None = None, chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
                         overlap_tokens: int | None = None, tokenizer: Any = None,
                         **lm_options: Any) -> ChecklistJudge:
    """A ChecklistJudge by spec name, path or object, bound to an LM (or a model string)."""
    spec = name_or_spec if isinstance(name_or_spec, JudgeSpec) else get_spec(name_or_spec)
    if lm is None and model is not None:
        from scijudge.lm import make_lm

        lm = make_lm(model, **lm_options)
    return ChecklistJudge(spec, lm=lm, chunk_tokens=chunk_tokens, overlap_tokens=overlap_tokens,
                          tokenizer=tokenizer)
