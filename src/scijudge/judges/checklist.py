"""The weighted checklist judge: one verdict per (report, criterion), with chunking for long reports.

A report that fits the chunk budget is judged in one call. A longer one is split, token-aware, into
overlapping parts; each part is searched for evidence about the criterion (one call per part) and a
synthesis call turns the pooled evidence into the verdict. Every call goes through the structured chain;
if any of them fails, the whole criterion is an abstention with its reason — never a verdict of
"not satisfied" and never a score of 0.

Evidence quotes are checked against the report (whitespace-normalised, case-insensitive, typographic
quotes and dashes unified, ``...`` separating fragments that must appear in order); quotes not found are
listed in the result under ``unmatched_quotes``.

A report whose UTF-8 size is within the budget is judged in one call without counting its tokens (no
tokenizer produces more tokens than bytes). Otherwise tokens are counted, in order of preference: a
tokenizer passed in or exposed by a local model's engine (``lm.engine.tokenizer``), then
``litellm.token_counter`` for the model, then an estimate of one token per four characters
(``ceil(len(text) / 4)``), used only when neither is available. The method used is
recorded in each result (``token_counter``).

The run store's ``result`` of every judgment (abstentions included) carries the criterion's ``weight`` and
``axis`` and a summary of the task's whole rubric, so compliance and coverage can be computed from the run
store alone (``scijudge.metrics.compliance``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import dspy
from pydantic import Field, field_validator

from scijudge.data import Item
from scijudge.errors import InputError, SpecError
from scijudge.judges.base import Judge, JudgeResult, input_hash
from scijudge.outputs import JudgeOutput, RunFields, coerce_number
from scijudge.signatures import OUTPUT_FIELD, build_signature
from scijudge.specs import JudgeSpec, get_spec
from scijudge.structured import (
    _CURRENT,
    Abstained,
    StructuredChain,
    start_record,
)

CHECKLIST_SPEC = "researchrubrics.checklist"
TERNARY_SPEC = "researchrubrics.checklist.ternary"
EVIDENCE_SPEC = "researchrubrics.evidence"
SYNTHESIS_SPEC = "researchrubrics.synthesis"
DEFAULT_CHUNK_TOKENS = 96_000
DEFAULT_OVERLAP_TOKENS = 1_000
MIN_CHUNK_TOKENS = 64
_BYTE_SLACK = 8  # room for a tokenizer's word-boundary marker on top of one token per byte
SCORES: dict[str, float] = {"satisfied": 1.0, "partially": 0.5, "not_satisfied": 0.0}
_VERDICT_WORDS = {
    "satisfied": "satisfied", "yes": "satisfied", "met": "satisfied",
    "partially": "partially", "partially satisfied": "partially", "partial": "partially",
    "not satisfied": "not_satisfied", "unsatisfied": "not_satisfied", "no": "not_satisfied", "not met": "not_satisfied",
}


# --- typed outputs -----------------------------------------------------------------------------------


def _read_verdict(value: Any, allowed: tuple[str, ...]) -> str:
    if not isinstance(value, str):
        raise ValueError(f"verdict must be one of {', '.join(allowed)}")  # noqa: TRY004 - pydantic wants ValueError
    key = " ".join(value.replace("_", " ").replace("-", " ").strip().strip(".").casefold().split())
    verdict = _VERDICT_WORDS.get(key)
    if verdict not in allowed:
        raise ValueError(f"verdict must be one of {', '.join(allowed)}, got {value!r}")
    return verdict


class CriterionVerdict(JudgeOutput):
    """Whether a report meets one criterion (binary), how sure the judge is, and the evidence for it."""

    ALLOWED: ClassVar[tuple[str, ...]] = ("satisfied", "not_satisfied")

    reasoning: str = Field(description="How the report does or does not meet the criterion, citing what it says.")
    evidence_quotes: list[str] = Field(
        default_factory=list,
        description="Short passages copied word for word from the report that the verdict rests on; empty if none.")
    missing_elements: list[str] = Field(
        default_factory=list, description="What the report would need to add or fix to meet the criterion fully.")
    verdict: Literal["satisfied", "not_satisfied"] = Field(
        description="'satisfied' if the report does what the criterion describes, else 'not_satisfied'.")
    confidence: float = Field(ge=0.0, le=1.0, description="Probability from 0 to 1 that the verdict is right.")

    @field_validator("verdict", mode="before")
    @classmethod
    def _verdict(cls, value: Any) -> str:
        return _read_verdict(value, cls.ALLOWED)

    @field_validator("confidence", mode="before")
    @classmethod
    def _confidence(cls, value: Any) -> float:
        number = coerce_number(value)
        if not 0.0 <= number <= 1.0:
            raise ValueError(f"confidence must be between 0 and 1, got {number:g}")
        return number

    @field_validator("evidence_quotes", "missing_elements", mode="before")
    @classmethod
    def _strings(cls, value: Any) -> list[str]:
        if value is None:
            return []
        if isinstance(value, str):
            return [value] if value.strip() else []
        return value

    @property
    def score(self) -> float:
        """1 satisfied, 0.5 partially, 0 not satisfied."""
        return SCORES[self.verdict]

    def run_fields(self) -> RunFields:
        return RunFields(score=self.score, verdict=self.verdict, confidence=self.confidence, rationale=self.reasoning)


class TernaryCriterionVerdict(CriterionVerdict):
    """As ``CriterionVerdict``, with ``partially`` (score 0.5) for criteria met only in part."""

    ALLOWED: ClassVar[tuple[str, ...]] = ("satisfied", "partially", "not_satisfied")

    verdict: Literal["satisfied", "partially", "not_satisfied"] = Field(  # type: ignore[assignment]
        description="'satisfied' if the report fully does what the criterion describes, 'partially' if only in "
                    "part, else 'not_satisfied'.")


class ChunkEvidence(JudgeOutput):
    """What one part of a long report shows about one criterion (no verdict: that comes after all parts)."""

    quotes: list[str] = Field(
        default_factory=list,
        description="Passages copied word for word from this part that bear on the criterion; empty if none.")
    notes: str = Field(description="What this part shows about the criterion, including what it lacks.")
    bearing: Literal["supports", "contradicts", "mixed", "none"] = Field(
        description="Whether this part shows the report doing what the criterion describes ('supports'), "
                    "shows the opposite ('contradicts'), both ('mixed'), or says nothing about it ('none').")

    @field_validator("quotes", mode="before")
    @classmethod
    def _quotes(cls, value: Any) -> list[str]:
        if value is None:
            return []
        if isinstance(value, str):
            return [value] if value.strip() else []
        return value

    @field_validator("bearing", mode="before")
    @classmethod
    def _bearing(cls, value: Any) -> str:
        return str(value).strip().casefold() if isinstance(value, str) else value


# --- token counting and chunking ---------------------------------------------------------------------

TokenCounter = Callable[[str], int]


def _tokenizer_counter(tokenizer: Any) -> TokenCounter:
    """Counter from a tokenizer object (HF ``encode(text, add_special_tokens=False)``, tiktoken
    ``encode_ordinary``) or a plain ``str -> int`` function."""
    if hasattr(tokenizer, "encode_ordinary"):
        return lambda text: len(tokenizer.encode_ordinary(text))
    if hasattr(tokenizer, "encode"):
        def count(text: str) -> int:
            try:
                return len(tokenizer.encode(text, add_special_tokens=False))
            except TypeError:
                return len(tokenizer.encode(text))
        return count
    if callable(tokenizer):
        return lambda text: int(tokenizer(text))
    raise TypeError("tokenizer must have encode()/encode_ordinary() or be a function text -> token count")


def _local_tokenizer(lm: Any) -> Any:
    """The tokenizer of an in-process model, when its LM or engine exposes one."""
    for owner in (getattr(lm, "engine", None), lm):
        tokenizer = getattr(owner, "tokenizer", None)
        if tokenizer is not None and (hasattr(tokenizer, "encode") or hasattr(tokenizer, "encode_ordinary")):
            return tokenizer
    return None


def chars_per_token_estimate(text: str) -> int:
    """Fallback estimate: one token per four characters, rounded up (documented, used only as a last resort)."""
    return math.ceil(len(text) / 4)


@functools.lru_cache(maxsize=64)
def _litellm_counter(model: str) -> TokenCounter | None:
    try:
        import litellm

        litellm.token_counter(model=model, text="probe")
    except Exception:  # noqa: BLE001 - any failure (unknown model, tokenizer download offline) means "not available"
        return None
    return lambda text: int(litellm.token_counter(model=model, text=text))


def token_counter_for(lm: Any, tokenizer: Any = None) -> tuple[TokenCounter, str]:
    """The best available token counter for a model, and its name: ``tokenizer``, ``litellm`` or ``chars/4``."""
    if tokenizer is None:
        tokenizer = _local_tokenizer(lm)
    if tokenizer is not None:
        return _tokenizer_counter(tokenizer), "tokenizer"
    model = getattr(lm, "model", None)
    if isinstance(model, str) and model:
        counter = _litellm_counter(model)
        if counter is not None:
            return counter, "litellm"
    return chars_per_token_estimate, "chars/4"


@dataclass(frozen=True)
class Chunk:
    """A part of a report: ``text[start:end]``, with its token count."""

    start: int
    end: int
    tokens: int


_SEPARATORS: tuple[str, ...] = ("\n\n", "\n", ". ", " ")


def _pieces(text: str, start: int, end: int, separator: str) -> list[tuple[int, int]]:
    """Contiguous spans of ``text[start:end]`` split after each separator (separators stay attached)."""
    spans: list[tuple[int, int]] = []
    cursor = start
    while cursor < end:
        found = text.find(separator, cursor, end)
        if found < 0:
            spans.append((cursor, end))
            break
        stop = found + len(separator)
        spans.append((cursor, stop))
        cursor = stop
    return spans


def _units(text: str, start: int, end: int, budget: int, count: TokenCounter, level: int,
           tokens: int | None = None) -> list[tuple[int, int, int]]:
    """Split ``text[start:end]`` into contiguous (start, end, tokens) units of at most ``budget`` tokens,
    preferring paragraph, then line, then sentence, then word boundaries; hard character cuts last."""
    if tokens is None:
        tokens = count(text[start:end])
    if tokens <= budget:
        return [(start, end, tokens)]
    if level >= len(_SEPARATORS):
        return _hard_split(text, start, end, budget, count, tokens)
    spans = _pieces(text, start, end, _SEPARATORS[level])
    if len(spans) == 1:
        return _units(text, start, end, budget, count, level + 1, tokens)
    out: list[tuple[int, int, int]] = []
    for a, b in spans:
        out.extend(_units(text, a, b, budget, count, level + 1))
    return out


def _hard_split(text: str, start: int, end: int, budget: int, count: TokenCounter,
                tokens: int) -> list[tuple[int, int, int]]:
    """Cut a span with no usable boundary into pieces of at most ``budget`` tokens (character cuts)."""
    out: list[tuple[int, int, int]] = []
    cursor = start
    chars_per_token = max(1.0, (end - start) / max(1, tokens))
    while cursor < end:
        size = max(1, int(budget * chars_per_token * 0.9))
        stop = min(end, cursor + size)
        piece_tokens = count(text[cursor:stop])
        while piece_tokens > budget and stop - cursor > 1:
            stop = cursor + max(1, (stop - cursor) * 3 // 4)
            piece_tokens = count(text[cursor:stop])
        out.append((cursor, stop, piece_tokens))
        cursor = stop
    return out


def _fit(text: str, units: list[tuple[int, int, int]], first: int, last: int, budget: int,
         count: TokenCounter) -> tuple[int, int]:
    """Count the packed chunk as one text (pieces counted apart undercount it slightly: tokens merge across
    joins) and drop units from its end until it fits; returns the new end index and the chunk's count."""
    while True:
        tokens = count(text[units[first][0]:units[last - 1][1]])
        if tokens <= budget or last - first == 1:
            return last, tokens
        excess, dropped = tokens - budget, 0
        while last - first > 1 and dropped < excess * 1.1 + 1:
            last -= 1
            dropped += units[last][2]


def split_report(text: str, budget: int, overlap: int, count: TokenCounter,
                 total_tokens: int | None = None) -> list[Chunk]:
    """Overlapping chunks of at most ``budget`` tokens (each counted as a whole) covering ``text``;
    consecutive chunks share up to ``overlap`` tokens of whole units (paragraphs, lines, sentences or words)."""
    if budget < 1 or overlap < 0 or overlap >= budget:
        raise ValueError(f"need budget >= 1 and 0 <= overlap < budget, got budget={budget}, overlap={overlap}")
    units = _units(text, 0, len(text), budget, count, 0, total_tokens)
    chunks: list[Chunk] = []
    first = 0
    while first < len(units):
        last, tokens = first, 0
        while last < len(units) and (last == first or tokens + units[last][2] <= budget):
            tokens += units[last][2]
            last += 1
        last, tokens = _fit(text, units, first, last, budget, count)
        chunks.append(Chunk(units[first][0], units[last - 1][1], tokens))
        if last >= len(units):
            break
        back, carried = last, 0
        while back - 1 > first and carried + units[back - 1][2] <= overlap:
            back -= 1
            carried += units[back][2]
        first = back
    return chunks


# --- quote checking ----------------------------------------------------------------------------------

_TYPOGRAPHY = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-",
                             "\u2014": "-", "\u00a0": " "})
_ELLIPSIS = re.compile(r"\s*(?:\.\.\.|\u2026|\[\.\.\.\])\s*")
_SPACE = re.compile(r"\s+")


def normalise_for_quotes(text: str) -> str:
    """Whitespace collapsed, case folded, typographic quotes and dashes made plain."""
    return _SPACE.sub(" ", text.translate(_TYPOGRAPHY)).strip().casefold()


@functools.lru_cache(maxsize=16)
def _normalised_report(text: str) -> str:
    return normalise_for_quotes(text)


def quote_found(quote: str, normalised_source: str) -> bool:
    """Whether a quote appears in the (normalised) source; ``...`` separates fragments found in order."""
    fragments = [f.strip(" \"'") for f in _ELLIPSIS.split(normalise_for_quotes(quote))]
    fragments = [f for f in fragments if f]
    if not fragments:
        return False
    cursor = 0
    for fragment in fragments:
        found = normalised_source.find(fragment, cursor)
        if found < 0:
            return False
        cursor = found + len(fragment)
    return True


def unmatched_quotes(quotes: list[str], source: str) -> list[str]:
    """The quotes that do not appear in ``source`` (see ``quote_found``)."""
    normalised = _normalised_report(source)
    return [q for q in quotes if not quote_found(q, normalised)]


# --- the judge ---------------------------------------------------------------------------------------


def _rubric_entries(item: Item) -> list[dict[str, Any]]:
    """The item's criteria from ``meta["rubrics"]``, each with an ``id``; bad entries name the item."""
    from pydantic import ValidationError

    from scijudge.importers.researchrubrics import Criterion

    file, line = item._origin or (None, None)
    rubrics = item.meta.get("rubrics")
    if not isinstance(rubrics, list) or not rubrics:
        raise InputError(f"item {item.id!r} has no rubric: the checklist judge needs meta.rubrics "
                         "(load tasks and reports with load_checklist_items)", file=file, line=line,
                         field="meta.rubrics")
    entries: list[dict[str, Any]] = []
    seen: set[str] = set()
    for index, raw in enumerate(rubrics):
        try:
            criterion = Criterion.model_validate(raw, context={"any_axis": True})
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise InputError(first["msg"].removeprefix("Value error, "), file=file, line=line,
                             field=f"meta.rubrics.{index}" + (f".{where}" if where else "")) from None
        entry = criterion.as_meta()
        if isinstance(raw, dict) and isinstance(raw.get("id"), str) and raw["id"]:
            entry["id"] = raw["id"]
        if entry["id"] in seen:
            raise InputError(f"item {item.id!r}: duplicated criterion id {entry['id']!r}", file=file, line=line,
                             field=f"meta.rubrics.{index}")
        seen.add(entry["id"])
        entries.append(entry)
    return entries


def rubric_summary(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts and weight totals of a whole rubric, overall and per axis (what compliance needs for criteria
    that have no row in the run store)."""
    def totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
        return {"n": len(rows),
                "positive_weight": math.fsum(r["weight"] for r in rows if r["weight"] > 0),
                "negative_weight": math.fsum(r["weight"] for r in rows if r["weight"] < 0)}

    axes = sorted({e["axis"] for e in entries})
    return {**totals(entries), "axes": {a: totals([e for e in entries if e["axis"] == a]) for a in axes}}


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
        overlap_tokens: tokens shared by consecutive parts, so that a passage cut at a boundary is seen whole.
        tokenizer: a tokenizer (``encode``) or ``text -> count`` function; default: see the module docstring.
    """

    def __init__(self, spec: JudgeSpec | None = None, *, lm: Any = None, chain: StructuredChain | None = None,
                 evidence_spec: JudgeSpec | None = None, synthesis_spec: JudgeSpec | None = None,
                 chunk_tokens: int = DEFAULT_CHUNK_TOKENS, overlap_tokens: int = DEFAULT_OVERLAP_TOKENS,
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
        file, line = item._origin or (None, None)
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
            file, line = item._origin or (None, None)
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
        count, method = token_counter_for(self._lm(), self.tokenizer)
        entry = self._layouts.entry(report, (method, getattr(self._lm(), "model", None)))
        with entry.lock:
            if entry.total is None:
                total = count(report)
                entry.chunks = (split_report(report, self.chunk_tokens, self.overlap_tokens, count, total)
                                if total > self.chunk_tokens else [])
                entry.total = total
        return entry.total, entry.chunks, method

    def _call(self, predictor: dspy.Predict, step: str, **inputs: Any) -> Any:
        try:
            with dspy.context(adapter=self.chain, lm=self._lm()):
                return getattr(predictor(**inputs), OUTPUT_FIELD)
        except Abstained as exc:
            raise _Failed(f"{step}: {exc.reason}") from exc

    def forward(self, report: str, criterion: str, task: str | None = None,  # type: ignore[override]
                axis: str | None = None) -> dspy.Prediction:
        """Judge one criterion against one report; returns ``judgment`` (typed verdict or None),
        ``abstained``, ``reason``, ``attempts`` and ``details`` (chunks, evidence, unmatched quotes)."""
        record, token = (_CURRENT.get(), None) if _CURRENT.get() is not None else start_record()
        details: dict[str, Any] = {}
        try:
            judgment = self._procedure(report, criterion, task, axis, details)
            return dspy.Prediction(judgment=judgment, abstained=False, reason=None, attempts=record.attempts,
                                   details=details)
        except _Failed as exc:
            return dspy.Prediction(judgment=None, abstained=True, reason=exc.reason, attempts=record.attempts,
                                   details=details)
        finally:
            if token is not None:
                _CURRENT.reset(token)

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
        return judgment

    # --- items in, typed results out ---------------------------------------------------------------
    def judge_item(self, item: Item, part: str = "") -> JudgeResult:
        """Judge one criterion (``part`` = its id) of an item; failures become an abstention with the reason."""
        if not part:
            part = self.parts(item)[0]
        entry, entries = self._entry(item, part)
        inputs = self._inputs(item, entry)
        prediction, record, latency = self._run_recorded(inputs)
        result: dict[str, Any] = {}
        judgment = prediction.judgment
        if judgment is not None:
            result.update(judgment.model_dump(mode="json"))
        result.update(
            criterion_id=entry["id"], criterion=entry["criterion"], weight=entry["weight"], axis=entry["axis"],
            rubric=rubric_summary(entries), **prediction.details,
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
                         overlap_tokens: int = DEFAULT_OVERLAP_TOKENS, tokenizer: Any = None,
                         **lm_options: Any) -> ChecklistJudge:
    """A ChecklistJudge by spec name, path or object, bound to an LM (or a model string)."""
    spec = name_or_spec if isinstance(name_or_spec, JudgeSpec) else get_spec(name_or_spec)
    if lm is None and model is not None:
        from scijudge.lm import make_lm

        lm = make_lm(model, **lm_options)
    return ChecklistJudge(spec, lm=lm, chunk_tokens=chunk_tokens, overlap_tokens=overlap_tokens,
                          tokenizer=tokenizer)


__all__ = [
    "CHECKLIST_SPEC",
    "DEFAULT_CHUNK_TOKENS",
    "DEFAULT_OVERLAP_TOKENS",
    "EVIDENCE_SPEC",
    "SCORES",
    "SYNTHESIS_SPEC",
    "TERNARY_SPEC",
    "ChecklistJudge",
    "Chunk",
    "ChunkEvidence",
    "CriterionVerdict",
    "TernaryCriterionVerdict",
    "load_checklist_judge",
    "quote_found",
    "rubric_summary",
    "split_report",
    "token_counter_for",
    "unmatched_quotes",
]
