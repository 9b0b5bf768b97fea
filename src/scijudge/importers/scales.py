"""The scale an imported judge's scores must fit, and the rows that do not fit it (refused at import, by line).

A judge's scale is *declared* by ``--scale`` (``JUDGE=LO,HI,STEP[,continuous]``, or ``LO,HI,STEP`` for every
judge), else by the run store's recorded scale for it (``meta.scales``: an earlier import, an export), else by a
registered judge family named in the row (``family: likert``). Calibrate and estimate read a judge on that scale,
so a score off it (7 for a 1..5 judge) would make them refuse the whole run later: it is a bad row now, named by
its line. A judge with no declared scale is read by calibrate on the default Likert 1..5 scale; scores off that are
counted (``Undeclared``), so the command can say so and name the option that records the right scale.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from scijudge.errors import InputError
from scijudge.records import Columns, Same

CONTINUOUS = "continuous"
_ALL = ""


def parse_scales(values: Iterable[str] | None) -> dict[str, list[Any]]:
    """``--scale`` values (``spec.scales.parse_scale_options``: ``[JUDGE=]1,5,1``, ``1:5:1``, ``1..5``, ``,continuous``)
    as judge -> ``[lo, hi, step(, "continuous")]``, the form import records in the store (judge ``""``: every
    judge)."""
    from scijudge.spec.scales import parse_scale_options

    out: dict[str, list[Any]] = {}
    for value in values or []:
        try:
            ((judge, scale),) = parse_scale_options([value]).items()
        except InputError:
            raise InputError(f"--scale {value!r}: expected [JUDGE=]LO,HI,STEP[,continuous] with LO < HI and "
                             "STEP > 0 (e.g. correctness=1,5,1)", field="scale") from None
        out[judge] = [scale.lo, scale.hi, scale.step, *([CONTINUOUS] if scale.continuous else [])]
    return out


def fits(score: float, scale: list[Any]) -> bool:
    """The score lies on the scale (within [lo, hi]; on a step unless the scale is continuous)."""
    lo, hi, step = (float(x) for x in scale[:3])
    if not lo - 1e-9 <= score <= hi + 1e-9:
        return False
    if len(scale) == 4 and str(scale[3]).lower() == CONTINUOUS:
        return True
    steps = (score - lo) / step
    return abs(steps - round(steps)) < 1e-6


def _shipped_scale(judge: str) -> list[Any] | None:
    """The score scale of the shipped spec named ``judge`` (``vocab.score_scale_of``), or None."""
    return _shipped_scales().get(judge)


@functools.cache
def _shipped_scales() -> dict[str, list[Any]]:
    from scijudge.errors import ScijudgeError
    from scijudge.vocab import score_scale_of

    try:
        from scijudge.spec.judge_spec import list_specs

        specs = list_specs(include_steps=True)
    except (ScijudgeError, ImportError):
        return {}
    return {spec.name: [float(x) for x in score_scale_of(spec)] for spec in specs
            if getattr(spec, "scale", None) is not None}


def _text(scale: list[Any]) -> str:
    return f"{float(scale[0]):g}..{float(scale[1]):g} step {float(scale[2]):g}" + (
        " (continuous)" if len(scale) == 4 else "")


@dataclass
class Undeclared:
    """Scores of judges with no declared scale that the default 1..5 scale does not fit: judge -> (count, line)."""

    off: dict[str, list[Any]] = field(default_factory=dict)

    def note(self, default: list[Any]) -> str:
        if not self.off:
            return ""
        parts = [f"{judge!r} ({n} scores, first on line {line}: {score:g})" for judge, (n, line, score) in
                 sorted(self.off.items())]
        return (f"no declared scale for {', '.join(parts)}: calibrate and estimate read a judge with none on "
                f"{_text(default)}; give --scale JUDGE=LO,HI,STEP to record its scale")


class ScaleCheck:
    """Refuse imported rows whose score is off their judge's declared scale (see the module docstring)."""

    def __init__(self, given: Mapping[str, list[Any]], stored: Mapping[str, Any], source: str) -> None:
        self.given, self.stored, self.source = dict(given), dict(stored), source
        self.undeclared = Undeclared()
        self.seen: set[str] = set()
        self._family: dict[str, tuple[list[Any] | None, str]] = {}

    def scale_of(self, judge: str, family: str) -> tuple[list[Any] | None, str]:
        """(scale, where it was declared) of a judge, or (None, "") when none is."""
        if judge in self.given:
            return self.given[judge], "--scale"
        if _ALL in self.given:
            return self.given[_ALL], "--scale"
        stored = self.stored.get(judge)
        if stored is not None:  # a list (an import) or 'lo,hi,step' text (a jury): the one parser reads both
            from scijudge.spec.scales import Scale

            sc = Scale.parse(stored, f"judge {judge!r} in the run store")
            return [sc.lo, sc.hi, sc.step, *([CONTINUOUS] if sc.continuous else [])], "the run store's recorded scale"
        shipped = _shipped_scale(judge)
        if shipped is not None:
            return shipped, f"its shipped spec {judge!r}"
        if family not in self._family:
            from scijudge.spec.families import find_family

            found = find_family(family) if family and family != "imported" else None
            self._family[family] = (list(found.score_scale), f"family {family!r}") if found else (None, "")
        return self._family[family]

    def check(self, chunk: Columns, errors: list[InputError]) -> Columns:
        """The chunk without its off-scale rows, which are added to ``errors`` (file, line, field score)."""
        from scijudge.vocab import DEFAULT_SCALE

        scores, judges, families = chunk.column("score"), chunk.column("judge"), chunk.column("family")
        results, probs = chunk.column("result"), chunk.values.get("probs")
        probs = probs.value if isinstance(probs, Same) else probs
        drop: list[int] = []
        self.seen.update(judges)
        for n, (score, judge, family) in enumerate(zip(scores, judges, families)):
            if score is None:
                continue
            scale, where = self.scale_of(judge, family)
            line = (results[n] or {}).get("line")
            if scale is None:
                if not fits(score, list(DEFAULT_SCALE)):
                    seen = self.undeclared.off.setdefault(judge, [0, line, score])
                    seen[0] += 1
                continue
            if (probs[n] if isinstance(probs, list) else probs) and len(scale) == 3:
                scale = [*scale, CONTINUOUS]  # a decision judgment: the expected level of its probabilities
            if not fits(score, scale):
                errors.append(InputError(f"score {score:g} is outside the scale {_text(scale)} of judge {judge!r} "
                                         f"({where})", file=self.source, line=line, field="score"))
                drop.append(n)
        if not drop:
            return chunk
        keep = [n for n in range(chunk.n) if n not in set(drop)]
        values = {name: value if not isinstance(value, list) else [value[n] for n in keep]
                  for name, value in chunk.values.items()}
        return Columns(len(keep), values)

    def recorded(self) -> dict[str, list[Any]]:
        """The ``--scale`` values to record in the run store: each named judge's, and the one for every judge
        for each judge seen."""
        every = {judge: self.given[_ALL] for judge in self.seen} if _ALL in self.given else {}
        return {**every, **{judge: scale for judge, scale in self.given.items() if judge != _ALL}}
