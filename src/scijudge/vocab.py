"""Shared vocabulary, one copy each: a judge's scale, verdict normalisation and human consensus.

Judging (output types), calibration and optimization must agree on these rules; they all import them
from here instead of keeping their own copies.
"""

from __future__ import annotations

import math
import re
import statistics
from collections import Counter
from collections.abc import Iterable
from typing import Any, NamedTuple


FEW_UNITS = 30
"""Below this many units (items, labelled units, pairs) a figure's normal-theory interval is unreliable and its
point is mostly noise: every report that prints such a figure carries its interval and a warning."""


def few_units_note(counts: Iterable[tuple[str, int]], units: str, advice: str, *, name_at_most: int | None = None,
                   collapsed: str = "") -> list[str]:
    """The one note naming each figure (``"judge / model"``, its number of units) that rests on fewer than
    ``FEW_UNITS`` ``units``, then ``advice``; none when no figure does. With ``name_at_most``, more such figures
    than that are counted instead of named, in the words of ``collapsed`` (a template of ``{k}`` figures of
    ``{total}``, ``{lo}`` to ``{hi}`` units each)."""
    counted = list(counts)
    small = [(label, int(n)) for label, n in counted if n < FEW_UNITS]
    if not small:
        return []
    if name_at_most is not None and len(small) > name_at_most:
        sizes = [n for _, n in small]
        where = collapsed.format(k=len(small), total=len(counted), lo=min(sizes), hi=max(sizes))
    else:
        where = ", ".join(f"{label} ({n})" for label, n in small)
    return [f"fewer than {FEW_UNITS} {units}: {where}; {advice}"]

def is_finite(value: float) -> bool:
    """``math.isfinite``, but False for an integer beyond any float (10**400) where ``math.isfinite`` raises
    OverflowError: no scale, weight or score can hold one, and bad input must get one clear line."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def number_text(value: float) -> str:
    """A number as a message shows it: its repr, or for an integer beyond any float its size in words (its digits
    can pass Python's limit on turning integers into text, and would fill the line)."""
    if isinstance(value, int) and not is_finite(value):
        return f"an integer of about {int(value.bit_length() * math.log10(2)) + 1} digits"
    return repr(value)


class ScaleTuple(NamedTuple):
    """A numeric scale: lowest value, highest value, step between allowed values."""

    lo: float
    hi: float
    step: float

    def levels(self) -> list[float]:
        """Every allowed value, lowest first."""
        count = int(round((self.hi - self.lo) / self.step))
        return [self.lo + i * self.step for i in range(count + 1)]

    @property
    def integral(self) -> bool:
        """True when every level is a whole number (ratings are then integers)."""
        return all(float(v).is_integer() for v in (self.lo, self.hi, self.step))

    def text(self) -> str:
        """``1..5`` or ``0..4 step 0.5``."""
        return f"{self.lo:g}..{self.hi:g}" + (f" step {self.step:g}" if self.step != 1 else "")


DEFAULT_SCALE = ScaleTuple(1.0, 5.0, 1.0)

# --- perturbed variants (``scijudge perturb``) ------------------------------------------------------------
INJECTION = "injection"
"""The rubric name of the prompt-injection probe; its variants count for every judge."""
VARIANT_ID = re.compile(r"^(?P<base>.+)::(?P<rubric>[a-z_]+)::(?P<level>subtle|extreme)$")
"""A variant's id: ``<id>::<rubric>::<level>`` (groups ``base``, ``rubric``, ``level``)."""


def rubric_of_judge(judge: str) -> str:
    """The rubric a judge rates, for matching perturbed variants: the last dotted part of its name that is
    not ``pairwise`` (``yescieval.qa.cohesion`` → ``cohesion``)."""
    parts = [p for p in judge.split(".") if p != "pairwise"]
    return parts[-1] if parts else judge


def scale_of(spec: Any) -> ScaleTuple:
    """The rating scale a spec declares (``[scale]``), or the 1..5 default: what the model is asked for."""
    scale = getattr(spec, "scale", None)
    if scale is None:
        return DEFAULT_SCALE
    return ScaleTuple(float(scale.min), float(scale.max), float(scale.step))


def score_scale_of(spec: Any) -> ScaleTuple:
    """The scale of the run store's ``score`` column for this spec: the rating scale, or for a pairwise
    judge the difference rating_a - rating_b (from lo-hi to hi-lo)."""
    lo, hi, step = scale_of(spec)
    if getattr(spec, "family", None) == "pairwise":
        return ScaleTuple(lo - hi, hi - lo, step)
    return ScaleTuple(lo, hi, step)


def snap(value: float, scale: ScaleTuple) -> float:
    """The nearest allowed value of the scale (half-way ties go to the even step, as ``round`` does)."""
    lo, hi, step = scale
    return min(hi, max(lo, lo + round((value - lo) / step) * step))


def norm_verdict(value: Any) -> str | None:
    """The one normalisation of a verdict word, for judges and humans alike: a criterion verdict in any spelling
    (``Not Satisfied``, ``not_satisfied``, ``Partially Satisfied``, ``partially``) becomes its canonical form
    (``not_satisfied``, ``partially``, ``satisfied``); any other verdict (``yes``, ``A``, ``tie``) compares
    case- and space-insensitively (``" A "`` is ``"a"``). Generic words such as yes/no keep their own class:
    only a checklist judge's output reads them as criterion verdicts (``criterion_verdict``)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    text = " ".join(str(value).split()).lower()
    canonical = criterion_verdict(value)
    if canonical is not None and ("satisf" in text or "partial" in text):
        return canonical
    return text


CRITERION_VERDICTS: tuple[str, ...] = ("satisfied", "partially", "not_satisfied")
"""The canonical verdicts on one checklist criterion (``partially`` only on a ternary checklist)."""
VERDICT_SYNONYMS: dict[str, str] = {
    "satisfied": "satisfied", "yes": "satisfied", "met": "satisfied",
    "partially": "partially", "partially satisfied": "partially", "partial": "partially",
    "partly satisfied": "partially",
    "not satisfied": "not_satisfied", "unsatisfied": "not_satisfied", "no": "not_satisfied",
    "not met": "not_satisfied",
}
"""Words a judge or an annotator may use for a criterion verdict (keys as ``criterion_verdict`` reads them)."""


def criterion_verdict(value: Any) -> str | None:
    """A criterion verdict as written (``Partially Satisfied``, ``not_satisfied``, ``Yes.``) → its canonical
    form (``partially``, ``not_satisfied``, ``satisfied``); None when it is no known verdict word."""
    if not isinstance(value, str):
        return None
    key = " ".join(value.replace("_", " ").replace("-", " ").strip().strip(".").casefold().split())
    return VERDICT_SYNONYMS.get(key)


def canonical_verdict(value: Any) -> str:
    """A human's criterion verdict (``Satisfied`` / ``Partially Satisfied`` / ``Not Satisfied``, any case, ``_``
    or spaces) in canonical form; anything else is a ValueError (what pydantic validators raise)."""
    if not isinstance(value, str):
        raise ValueError(f"verdict must be a string, got {type(value).__name__}")  # pydantic wants ValueError
    verdict = criterion_verdict(value)
    if verdict is None:
        raise ValueError(f"unknown verdict {value!r}: use Satisfied, Partially Satisfied or Not Satisfied")
    return verdict


def consensus_score(scores: Iterable[float], scale: ScaleTuple) -> float | None:
    """Human consensus of scores: their median snapped to the scale (None when there are none)."""
    values = [float(s) for s in scores if s is not None and not math.isnan(float(s))]
    if not values:
        return None
    return snap(statistics.median(values), scale)


def majority_verdict(verdicts: Iterable[Any]) -> str | None:
    """Human consensus of verdicts: the most common normalised verdict; a tie for first has no consensus."""
    counts = Counter(v for v in (norm_verdict(x) for x in verdicts) if v is not None).most_common(2)
    if not counts or (len(counts) == 2 and counts[0][1] == counts[1][1]):
        return None
    return counts[0][0]
