"""The scale of each member's scores, explicit maps between scales, and the refusal of mixed scales."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from scijudge.errors import InputError
from scijudge.spec.scales import Scale, family_scale, recorded_scale, spec_scale, specs_by_hash


def member_scales(sel: pd.DataFrame, given: Any, stored: Mapping[str, Mapping[str, Any]]) -> dict[tuple[str, str], Scale | None]:
    """The scale of each (member, judge): ``given`` (one scale, or ``{member | judge: scale}``), else the scale
    stored in the member's run store meta, else the shipped spec whose hash the rows record, else the family's
    (None when nothing says)."""
    by_hash: dict[str, Any] | None = None
    out: dict[tuple[str, str], Scale | None] = {}
    for (member, judge), rows in sel.groupby(["member", "judge"], sort=True):
        found: Scale | None = None
        if given is not None and not isinstance(given, Mapping):
            found = Scale.parse(given)
        elif isinstance(given, Mapping) and (member in given or judge in given):
            key = member if member in given else judge
            found = Scale.parse(given[key], repr(key))
        if found is None:  # the one rule: the member's stores agree on the judge's grid, or are refused
            found = recorded_scale(str(judge), {source: (stored.get(source) or {}).get(judge)
                                                for source in rows["source"].unique()})
        if found is None:
            if by_hash is None:
                by_hash = specs_by_hash()
            hits = {s for s in (spec_scale(by_hash[h]) for h in rows["spec_hash"].unique() if h in by_hash) if s}
            found = hits.pop() if len(hits) == 1 else None
        if found is None:
            found = family_scale(str(rows["family"].iloc[0]))
        out[(str(member), str(judge))] = found
    return out


def apply_maps(sel: pd.DataFrame, scales: dict[tuple[str, str], Scale | None],
               scale_map: Mapping[str, Any] | None) -> pd.DataFrame:
    """Map members' scores onto another scale: ``{member: 'lo,hi,step'}`` (linear, from the member's own scale) or
    ``{member: {old: new}}`` (a value table). Mapped members' scales are updated in ``scales``."""
    sel = sel.copy()
    known = set(sel["member"])
    for member, target in (scale_map or {}).items():
        if member not in known:
            raise InputError(f"--map-scale names {member!r}, which is not a member ({', '.join(sorted(known))})",
                             field="map-scale")
        for (m, judge), src in list(scales.items()):
            if m != member:
                continue
            mask = (sel["member"] == member) & (sel["judge"] == judge)
            if isinstance(target, Mapping):
                table = {float(k): float(v) for k, v in target.items()}
                values = sel.loc[mask & sel["score"].notna(), "score"]
                unknown = sorted(set(values) - set(table))
                if unknown:
                    raise InputError(f"member {member!r}, judge {judge!r}: score {unknown[0]:g} is not in its value map",
                                     field="map-scale")
                sel.loc[mask, "score"] = sel.loc[mask, "score"].map(lambda s, t=table: t.get(s, s))
                scales[(m, judge)] = None  # checked against the jury's scale by the range check
                continue
            dst = Scale.parse(target, f"member {member!r}")
            if src is None:
                raise InputError(f"member {member!r}, judge {judge!r}: its own scale is unknown, so it cannot be mapped; "
                                 f"declare it with --scale '{member}=lo,hi,step'", field="map-scale")
            factor = (dst.hi - dst.lo) / (src.hi - src.lo)
            sel.loc[mask, "score"] = dst.lo + (sel.loc[mask, "score"] - src.lo) * factor
            scales[(m, judge)] = Scale(dst.lo, dst.hi, dst.step, dst.continuous or src.continuous or
                                       abs(src.step * factor - dst.step) > 1e-9)
    return sel


def jury_scale(sel: pd.DataFrame, judge: str, scales: dict[tuple[str, str], Scale | None]) -> Scale | None:
    """The one scale the members of ``judge`` share; mixed scales are refused in one line, and every answered
    score must lie in its range (an undeclared 1..10 member among 1..5 ones is caught here too)."""
    per = {m: s for (m, j), s in scales.items() if j == judge and s is not None}
    grids = sorted({s.grid for s in per.values()})
    if len(grids) > 1:
        shown = ", ".join(f"{m} {s.text()}" for m, s in sorted(per.items()))
        raise InputError(f"judge {judge!r}: members use different scales ({shown}); map them explicitly "
                         "(--map-scale MEMBER=lo,hi,step)", field="member")
    if not grids:
        return None
    scale = Scale(*grids[0], continuous=any(s.continuous for s in per.values()))
    rows = sel[(sel["judge"] == judge) & (sel["status"] == "ok") & sel["score"].notna()]
    outside = rows[(rows["score"] < scale.lo - 1e-9) | (rows["score"] > scale.hi + 1e-9)]
    if len(outside):
        row = outside.iloc[0]
        raise InputError(f"member {row['member']!r} scored item {row['item_id']!r} {row['score']:g}, outside the scale "
                         f"{scale.text()} of judge {judge!r}: mixed scales? map them explicitly (--map-scale)",
                         file=row["source"] or None, field="score")
    return scale
