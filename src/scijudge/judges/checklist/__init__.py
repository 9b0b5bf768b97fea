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

from scijudge.judges.checklist._chunking import (
    DEFAULT_CHUNK_TOKENS,
    DEFAULT_OVERLAP_TOKENS,
    MIN_CHUNK_TOKENS,
    Chunk,
    TokenCounter,
    _litellm_counter,
    chars_per_token_estimate,
    default_overlap,
    split_report,
    token_counter_for,
)
from scijudge.judges.checklist._judge import (
    CHECKLIST_SPEC,
    EVIDENCE_SPEC,
    SYNTHESIS_SPEC,
    TERNARY_SPEC,
    ChecklistJudge,
    load_checklist_judge,
)
from scijudge.judges.checklist._outputs import (
    SCORES,
    ChunkEvidence,
    CriterionVerdict,
    TernaryCriterionVerdict,
)
from scijudge.judges.checklist._quotes import (
    normalise_for_quotes,
    quote_found,
    unmatched_quotes,
)
from scijudge.judges.checklist._rubric import rubric_entries, rubric_summary

__all__ = [
    "CHECKLIST_SPEC",
    "DEFAULT_CHUNK_TOKENS",
    "DEFAULT_OVERLAP_TOKENS",
    "EVIDENCE_SPEC",
    "MIN_CHUNK_TOKENS",
    "SCORES",
    "SYNTHESIS_SPEC",
    "TERNARY_SPEC",
    "ChecklistJudge",
    "Chunk",
    "ChunkEvidence",
    "CriterionVerdict",
    "TernaryCriterionVerdict",
    "TokenCounter",
    "_litellm_counter",
    "chars_per_token_estimate",
    "default_overlap",
    "load_checklist_judge",
    "normalise_for_quotes",
    "quote_found",
    "rubric_entries",
    "rubric_summary",
    "split_report",
    "token_counter_for",
    "unmatched_quotes",
]
