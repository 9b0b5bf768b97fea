"""Judging with a cascade (issue 37): the trust rule of selective judging, and the judge-time policy.

A cascade is an ordered list of members (cheapest first), each with a confidence threshold per judge chosen on
labelled items by ``scijudge.metrics.selective``. A judgment is *trusted* when its confidence (the probability
its judge put on the level it gave) reaches the member's threshold; ties in confidence are ordered by a seeded
hash of the unit, so a threshold can keep part of a tie, and the same unit is ordered the same way at
calibration and at judge time.

``judge_cascade`` judges every item with the first member and each later member only for the (item, judge,
part) units no earlier member trusted, each member through the one run API (``judge_items`` with its ``select``
policy), stored under each member's own identity: a re-run resumes like any run.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scijudge.data import Item
from scijudge.run.store import Run
from scijudge.run.summary import RunSummary


DIGITS = 12
"""Confidences are compared at 12 decimals: probabilities equal up to float rounding (a sum taken in another
order, a renormalisation) form one tie group instead of being split by their last bit."""


def tie_key(seed: int, item_id: str, judge: str, part: str = "") -> float:
    """A number in [0, 1) fixed by the seed and the unit: orders judgments of equal confidence."""
    digest = hashlib.sha256(f"{seed}\x1f{item_id}\x1f{judge}\x1f{part}".encode()).hexdigest()
    return int(digest[:13], 16) / 16 ** 13


def confidence_of(score: Any, verdict: Any, probs: Any) -> float | None:
    """The probability the judgment's ``probs`` put on the level it gave (its verdict, or the level nearest its
    score), as stored (not renormalised: mass a provider did not return counts against it); None without probs."""
    if not isinstance(probs, Mapping) or not probs:
        return None
    if isinstance(verdict, str):
        for key in (verdict, verdict.lower()):
            if key in probs:
                return _prob(probs[key])
        lowered = {str(k).lower(): p for k, p in probs.items()}
        if verdict.lower() in lowered:  # a verdict stored or read in another case than its probs' keys
            return _prob(lowered[verdict.lower()])
    if score is None or (isinstance(score, float) and math.isnan(score)):
        return None
    levels: list[tuple[float, Any]] = []
    for key, p in probs.items():
        try:
            levels.append((abs(float(key) - float(score)), p))
        except (TypeError, ValueError):
            continue
    return _prob(min(levels, key=lambda kp: kp[0])[1]) if levels else None


def unit_confidence(score: Any, verdict: Any, probs: Any, stored: Any, source: str = "auto") -> float | None:
    """A judgment's confidence in a cascade: from its ``probs`` (``confidence_of``), from its stored
    ``confidence`` column, or (``auto``) from probs where it has them, else the stored column."""
    if source in ("probs", "auto"):
        found = confidence_of(score, verdict, probs)
        if found is not None or source == "probs":
            return found
    return _prob(stored) if stored is not None else None


def _prob(value: Any) -> float | None:
    try:
        p = float(value)
    except (TypeError, ValueError):
        return None
    return round(p, DIGITS) if math.isfinite(p) else None


@dataclass(frozen=True)
class Threshold:
    """Trust a judgment when (confidence, tie key) >= (value, tie) in lexicographic order."""

    value: float
    tie: float = 0.0

    def trusts(self, confidence: float | None, tie: float) -> bool:
        if confidence is None:
            return False
        return confidence > self.value or (confidence == self.value and tie >= self.tie)

    def as_dict(self) -> dict[str, float]:
        return {"value": self.value, "tie": self.tie}

    @classmethod
    def of(cls, data: Any) -> Threshold | None:
        if data is None:
            return None
        return cls(float(data["value"]), float(data.get("tie", 0.0)))


@dataclass
class Stage:
    """One member of a cascade at judge time: its judges (built for its model) and its threshold per judge name
    (None: this member trusts nothing for that judge)."""

    member: str
    judges: Sequence[Any]
    thresholds: Mapping[str, Threshold | None]
    confidence: str = "auto"
    """Where this member's confidence comes from (``unit_confidence``'s source), as at calibration."""


@dataclass
class CascadeSummary:
    """What each stage of one cascade invocation did."""

    stages: list[tuple[str, RunSummary]] = field(default_factory=list)
    sent: dict[str, int] = field(default_factory=dict)

    @property
    def last(self) -> RunSummary:
        return self.stages[-1][1] if self.stages else RunSummary()


Unit = tuple[str, str, str]


def _stage_outcome(items: Sequence[Item], store: Run, judges: Sequence[Any], thresholds: Mapping[str, Threshold | None],
                   seed: int, source: str = "auto") -> tuple[set[Unit], set[Unit]]:
    """(units the member trusted, units it has a stored judgment of), found by the identity each judgment has now
    (an item whose content changed since is not stored, so it waits for a re-run of this member)."""
    keys: dict[str, Unit] = {}
    for item in items:
        for judge in judges:
            for part in judge.parts(item):
                for identity in judge.identity(item, part):
                    keys[identity.key] = (item.id, identity.judge, part)
    trusted: set[Unit] = set()
    stored: set[Unit] = set()
    for row in store.rows(columns=["key", "status", "score", "verdict", "probs", "confidence"]):
        unit = keys.get(row["key"])
        if unit is None:
            continue
        stored.add(unit)
        threshold = thresholds.get(unit[1])
        if threshold is not None and row["status"] == "ok" and threshold.trusts(
                unit_confidence(row["score"], row["verdict"], row["probs"], row["confidence"], source),
                tie_key(seed, *unit)):
            trusted.add(unit)
    return trusted, stored


def judge_cascade(items: Sequence[Item], stages: Sequence[Stage], store: Run, *, seed: int = 0,
                  judge: Callable[..., RunSummary] | None = None, **options: Any) -> CascadeSummary:
    """Judge ``items`` through the cascade's stages; ``options`` go to ``judge_items`` (executor, concurrency, stop,
    ...). A unit goes to a member only when every earlier member that has a threshold for its judge has a stored
    judgment of it that it does not trust (one with no answer yet keeps the unit there until a re-run); a member
    judges only the judges it has a threshold for. Returns each stage's summary; a run-level fault propagates from
    the stage it happened in, after what that stage judged is stored."""
    if judge is None:
        from scijudge.run.api import judge_items

        judge = judge_items
    stop = options.get("stop")
    out = CascadeSummary()
    open_units: dict[str, set[Unit]] = {}  # judge name -> units still open; a judge not in it: every unit
    for stage in stages:
        usable = [j for j in stage.judges if stage.thresholds.get(j.name) is not None]
        if not usable:
            continue
        wanted = {name: set(units) for name, units in open_units.items()}

        def select(item: Item, judge_: Any, part: str, _wanted: dict[str, set[Unit]] = wanted) -> bool:
            units = _wanted.get(judge_.name)
            return units is None or (item.id, judge_.name, part) in units

        summary = judge(items, usable, store, select=select, **options)
        out.stages.append((stage.member, summary))
        out.sent[stage.member] = summary.judged + summary.no_answer
        if summary.interrupted or (stop is not None and stop.is_set()):
            break
        trusted, stored = _stage_outcome(items, store, usable, stage.thresholds, seed, stage.confidence)
        for j in usable:
            reached = {u for u in stored if u[1] == j.name}
            if j.name in wanted:
                reached &= wanted[j.name]
            open_units[j.name] = reached - trusted
    return out
