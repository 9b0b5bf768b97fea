"""What one run invocation did: counts, tokens and cost of the judgments made now, and why some were not."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from scijudge.records import JudgeResult

DEFAULT_BREAKER = 8
"""Judgments in a row that got no answer (timeouts, 5xx, resets) before the run stops."""
DEFAULT_GRACE = 10.0
"""Seconds a stopped run waits for requests in flight, so that answers already paid for are stored."""


@dataclass
class RunSummary:
    """What one invocation did: counts, tokens and cost of the judgments made now."""

    planned: int = 0
    skipped_done: int = 0
    not_applicable: int = 0
    changed: int = 0
    damaged: int = 0
    """Stored rows found damaged (a JSON text cut short) and judged again."""
    judged: int = 0
    ok: int = 0
    abstained: int = 0
    no_answer: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost: float = 0.0
    cost_known: int = 0
    cached: int = 0
    seconds: float = 0.0
    interrupted: bool = False
    abandoned: int = 0
    """Judgments sent (in flight: a request, a worker's request, a batch line at the provider) whose answer was
    not stored when the run stopped; a re-run asks for them again (a recorded batch is collected)."""
    not_sent: int = 0
    """Judgments planned but never sent when the run stopped (queued); a re-run sends them."""
    resumable: bool = True
    abstention_reasons: dict[str, int] = field(default_factory=dict)
    no_answer_reasons: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def add(self, result: JudgeResult) -> None:
        self.judged += 1
        self.tokens_in += result.tokens_in
        self.tokens_out += result.tokens_out
        if result.cost is not None:
            self.cost += result.cost
            self.cost_known += 1
        if _served_from_cache(result.attempts):
            self.cached += 1
        if result.ok:
            self.ok += 1
        else:
            self.abstained += 1
            reason = reason_class(result.reason or "unknown")
            self.abstention_reasons[reason] = self.abstention_reasons.get(reason, 0) + 1

    def add_no_answer(self, reason: str) -> None:
        """A judgment that got no answer (not stored; a re-run tries it again)."""
        self.no_answer += 1
        key = reason_class(reason)
        self.no_answer_reasons[key] = self.no_answer_reasons.get(key, 0) + 1

    def unfinished(self) -> str:
        """What a stopped run left, the same words for every executor: "3 in flight got no answer in time,
        176 not sent yet, 2 got no answer (not stored)" (empty when nothing was left): with the judgments stored,
        every planned judgment is counted once."""
        said = []
        if self.abandoned:
            said.append(f"{self.abandoned} in flight got no answer in time")
        if self.not_sent:
            said.append(f"{self.not_sent} not sent yet")
        if self.no_answer:  # with the stored ones, these add up to every planned judgment
            said.append(f"{self.no_answer} got no answer (not stored)")
        return ", ".join(said)

    @property
    def complete(self) -> bool:
        """Every planned judgment was made and stored."""
        return (not self.interrupted and self.no_answer == 0 and self.abandoned == 0 and self.not_sent == 0
                and self.judged == self.planned)


def _served_from_cache(attempts: list[Any]) -> bool:
    """The judgment's answer came from the response cache (attempts may be models or, from a worker, dicts)."""
    def cached(attempt: Any) -> bool:
        return bool(attempt.get("cached") if isinstance(attempt, dict) else attempt.cached)

    return bool(attempts) and cached(attempts[-1])


def reason_class(reason: str) -> str:
    """A short class of an abstention reason for summaries ("all strategies failed: validation_error")."""
    head, _, rest = reason.partition(":")
    if "last problem" in head and rest:
        return f"all strategies failed: {rest.strip().split(':')[0][:60]}"
    return head[:80]


Progress = Callable[[JudgeResult, RunSummary], None]
"""Called after each stored result (progress bars, logging)."""


def merged(summaries: Sequence[RunSummary]) -> RunSummary:
    """One summary of several stages: counts, tokens and cost added; interrupted if any stage was."""
    out = RunSummary()
    for s in summaries:
        for f in fields(RunSummary):
            value, mine = getattr(s, f.name), getattr(out, f.name)
            if f.name == "interrupted":
                out.interrupted = out.interrupted or s.interrupted
            elif f.name == "resumable":
                out.resumable = out.resumable and s.resumable
            elif isinstance(value, dict):
                for k, v in value.items():
                    mine[k] = mine.get(k, 0) + v
            elif isinstance(value, list):
                mine.extend(value)
            else:
                setattr(out, f.name, mine + value)
    return out
