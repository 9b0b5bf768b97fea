"""The one ``Scale`` of a judge's scores, its one parser, and the rules that say which scale a judge is on.

Every command, importer and analysis verb parses scales here: ``1..5``, ``0..4 step 0.5``, ``1:5:1``,
``1,5,1,continuous``, a tuple or list of 3 (or 4, the last ``"continuous"``) numbers, and on the command line
``JUDGE=...`` for one judge (``parse_scale_options``). Stores record scales in their meta as ``'lo,hi,step'`` text or
as lists; both read the same.

The rules (public, used by calibrate, estimate, jury, cascade, select-labels and the viewer):

- ``recorded_scale``: when several sources (run stores) record a scale for one judge, they must agree on the grid
  (lo, hi, step); two that differ are refused in one line naming each source, whatever their order. The scale is
  continuous when any source records it so (a continuous scale accepts every value the stepped one does).
- ``family_scale`` / ``specs_by_hash`` / ``spec_scale``: what a judge's family or the spec whose hash its
  judgments record declares, when no store records a scale.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from scijudge.errors import InputError, ScijudgeError
from scijudge.vocab import ScaleTuple

CONTINUOUS = "continuous"
"""Fourth element of a scale: scores may fall between the steps (a mean of criteria or of jury members)."""
_DOTS = re.compile(r"^\s*(?P<lo>[^.\s][^\s]*?)\s*\.\.\s*(?P<hi>[^\s(]+)(?:\s+step\s+(?P<step>[^\s(]+))?"
                   r"\s*(?P<cont>\(?\s*continuous\s*\)?)?\s*$", re.IGNORECASE)


class Scale(NamedTuple):
    """A judge's score scale: lowest value, highest value, step between allowed values, and whether scores may lie
    between the steps."""

    lo: float
    hi: float
    step: float
    continuous: bool = False

    @classmethod
    def parse(cls, value: Any, where: str = "", *, check: bool = True) -> Scale:
        """A scale from text (``1..5``, ``1:5:1``, ``1,5,1,continuous``), a 3- or 4-sequence or a ``Scale``.

        ``where`` names what the scale is for in the error (``"judge 'x'"``); ``check=False`` leaves lo < hi and
        step > 0 to the caller (calibration reports those per judge)."""
        if isinstance(value, Scale):
            return value
        who = f" for {where}" if where else ""
        parts = _parts(value)
        continuous = len(parts) == 4 and str(parts[3]).strip().lower() in (CONTINUOUS, "true")
        if len(parts) != 3 and not continuous:
            raise InputError(f"scale{who} must be 'lo,hi,step', 'lo..hi' or 'lo,hi,step,continuous', got {value!r}",
                             field="scale")
        try:
            lo, hi, step = float(parts[0]), float(parts[1]), float(parts[2])
        except (TypeError, ValueError):
            raise InputError(f"scale{who} must hold numbers, got {value!r}", field="scale") from None
        if check and not (all(map(math.isfinite, (lo, hi, step))) and hi > lo and step > 0):
            raise InputError(f"scale{who} needs lo < hi and step > 0, got {value!r}", field="scale")
        return cls(lo, hi, step, continuous)

    @property
    def grid(self) -> ScaleTuple:
        """(lo, hi, step): what κ, α and the confusion matrices count on."""
        return ScaleTuple(self.lo, self.hi, self.step)

    def text(self) -> str:
        """``1..5 step 1`` or ``1..5 step 0.5 (continuous)``: how messages and reports name a scale."""
        return f"{self.lo:g}..{self.hi:g} step {self.step:g}" + (" (continuous)" if self.continuous else "")

    def meta(self, continuous: bool | None = None) -> str:
        """The store-meta form: 'lo,hi,step' or 'lo,hi,step,continuous'."""
        cont = self.continuous if continuous is None else continuous
        return f"{self.lo:g},{self.hi:g},{self.step:g}" + (",continuous" if cont else "")

    def fits(self, value: float) -> bool:
        """The value lies in [lo, hi], and on a step unless the scale is continuous."""
        if not self.lo - 1e-9 <= value <= self.hi + 1e-9:
            return False
        return self.continuous or self.on_grid(value)

    def on_grid(self, value: float) -> bool:
        k = round((value - self.lo) / self.step)
        return self.lo - 1e-9 <= value <= self.hi + 1e-9 and abs(self.lo + k * self.step - value) < 1e-6

    def categories(self) -> list[float]:
        n = int(round((self.hi - self.lo) / self.step))
        return [round(self.lo + i * self.step, 9) for i in range(n + 1)]


def _parts(value: Any) -> list[Any]:
    if not isinstance(value, str):
        return list(value)
    found = _DOTS.match(value)
    if found:
        return [found["lo"], found["hi"], found["step"] or "1", *([CONTINUOUS] if found["cont"] else [])]
    return [p.strip() for p in value.replace(":", ",").split(",")]


ALL_JUDGES = ""
"""The key ``parse_scale_options`` gives a scale without ``JUDGE=``: it holds for every judge."""


def parse_scale_options(values: Iterable[str] | str | None, field: str = "scale") -> dict[str, Scale]:
    """``--scale`` values: ``JUDGE=SCALE`` for one judge, or ``SCALE`` for every judge (key ``ALL_JUDGES``).

    Each is parsed by ``Scale.parse``; a bad one is one error naming the judge."""
    out: dict[str, Scale] = {}
    for text in [values] if isinstance(values, str) else values or []:
        name, sep, value = text.rpartition("=")
        judge = name.strip() if sep else ALL_JUDGES
        out[judge] = Scale.parse(value, f"judge {judge!r}" if judge else "")
    return out


def scale_mapping(judges: Iterable[str], options: Iterable[str] | str | None = None,
                  recorded: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """The scale of each of ``judges`` that something states: ``recorded`` (judge -> scale, e.g.
    ``Judgments.recorded_scales()``), overridden by ``--scale`` ``options`` (``parse_scale_options``); None when
    nothing does (the spec or family then decides)."""
    names = list(judges)
    mapping: dict[str, Any] = {j: v for j, v in (recorded or {}).items() if j in names}
    for name, value in parse_scale_options(options).items():
        mapping.update(dict.fromkeys(names, value) if name == ALL_JUDGES else {name: value})
    return mapping or None


def recorded_scale(judge: str, recorded: Mapping[str, Any]) -> Scale | None:
    """The one scale sources record for ``judge`` (``{source: scale}``, sources recording none left out).

    Sources that disagree on the grid are refused in one line naming each (sorted: never order-dependent); the
    scale is continuous when any source records it so. None when no source records one."""
    parsed = {source: Scale.parse(value, f"judge {judge!r} in {source}") for source, value in recorded.items()
              if value is not None}
    if not parsed:
        return None
    grids: dict[ScaleTuple, list[str]] = {}
    for source in sorted(parsed):
        grids.setdefault(parsed[source].grid, []).append(repr(source))
    if len(grids) > 1:
        shown = "; ".join(f"{Scale(*grid).text()} (run {', run '.join(who)})" for grid, who in grids.items())
        raise InputError(f"judge {judge!r} is on different scales in the runs: {shown}; read them separately or pass "
                         "one scale for it (scale= / --scale JUDGE=lo,hi,step)", field="scale")
    return Scale(*next(iter(grids)), continuous=any(s.continuous for s in parsed.values()))


def recorded_scales(by_source: Mapping[str, Mapping[str, Any]], judges: Iterable[str] | None = None) -> dict[str, Scale]:
    """``recorded_scale`` of every judge some source records (or of ``judges``): judge -> Scale."""
    names = sorted({j for scales in by_source.values() for j in scales}) if judges is None else list(judges)
    out: dict[str, Scale] = {}
    for judge in names:
        found = recorded_scale(judge, {s: scales.get(judge) for s, scales in by_source.items()})
        if found is not None:
            out[judge] = found
    return out


def family_scale(family: str) -> Scale | None:
    """The default scale of a registered judge family (continuous when its track is), or None."""
    from scijudge.spec.families import find_family

    found = find_family(family) if family else None
    if found is None:
        return None
    lo, hi, step = (float(x) for x in found.score_scale)
    return Scale(lo, hi, step, getattr(found, "track", "") == CONTINUOUS)


def specs_by_hash(specs: Any = None) -> dict[str, Any]:
    """Judge specs by content hash: every shipped spec (steps included), then the ones passed in."""
    found: dict[str, Any] = {}
    try:
        from scijudge.spec.judge_spec import list_specs

        shipped = list_specs(include_steps=True)
    except (ScijudgeError, ImportError):
        shipped = []
    for spec in [*shipped, *(specs or [])]:
        found[spec.spec_hash()] = spec
    return found


def default_scale(judge: str, family: str, spec_hashes: Iterable[str], by_hash: Mapping[str, Any]) -> tuple[Scale, str]:
    """A judge's scale when no run records one: the scale of the specs whose hashes its judgments record (never a
    shipped spec that merely shares the name), else its family's default, continuous when the family's track is
    (the Likert 1..5 scale for an unknown family), with a note saying the family's scale was guessed. Specs of
    different scales are refused. (pandas-free: ``metrics.calibration`` and the viewer's label page share it.)"""
    from scijudge.spec.families import find_family, score_scale_of_family

    found = [by_hash[h] for h in dict.fromkeys(spec_hashes) if h in by_hash]
    grids = {s.grid for s in (spec_scale(spec) for spec in found) if s is not None}
    if len(grids) == 1:
        return Scale(*grids.pop()), ""
    if len(grids) > 1:
        raise InputError(f"judge {judge!r} was run with specs of different scales {sorted(tuple(s) for s in grids)}; "
                         "calibrate one spec version at a time or pass scale=", field="scale")
    declared = find_family(family)
    sc = Scale(*score_scale_of_family(family), continuous=declared is not None and declared.track == CONTINUOUS)
    return sc, (f"judge {judge!r}: no known spec has its stored spec hash, so the {family!r} family scale "
                f"{sc.text()} is used; pass scale= (--scale) or the spec (specs=) if that is wrong")


def spec_scale(spec: Any) -> Scale | None:
    """The run-store score scale of a spec (``scijudge.vocab.score_scale_of``: pairwise gives the range of
    rating differences); None when the spec declares no scale."""
    if getattr(spec, "scale", None) is None:
        return None
    from scijudge.vocab import score_scale_of

    lo, hi, step = (float(x) for x in score_scale_of(spec))
    return Scale(lo, hi, step)
