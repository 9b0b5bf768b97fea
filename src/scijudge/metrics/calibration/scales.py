"""Scales, verdict normalisation and human consensus for calibration: the one copy inside metrics.

Kept together so they can be repointed to ``scijudge.vocab`` in one place."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from scijudge.errors import InputError
from scijudge.metrics import agreement as ag
from scijudge.spec.scales import Scale, default_scale, recorded_scale, specs_by_hash
from scijudge.vocab import ScaleTuple, majority_verdict, norm_verdict


class _FamilyScales(Mapping[str, ScaleTuple]):
    """Default score scale per registered judge family (``scijudge.spec.families``), read live from the registry."""

    def __getitem__(self, name: str) -> ScaleTuple:
        from scijudge.spec.families import find_family

        found = find_family(name)
        if found is None:
            raise KeyError(name)
        return ScaleTuple(*found.score_scale)

    def __iter__(self) -> Any:
        from scijudge.spec.families import family_names

        return iter(family_names())

    def __len__(self) -> int:
        from scijudge.spec.families import family_names

        return len(family_names())


FAMILY_SCALES: Mapping[str, ScaleTuple] = _FamilyScales()


# CONTINUOUS (``spec.scales``): the fourth element of a scale (``(1, 5, 0.5, "continuous")``): scores may fall
# between the steps (a mean of criteria); MAE, bias, correlations and ICC use the raw values, κ/α/AC2/exact
# agreement the step grid.
ScaleInput = ScaleTuple | tuple[float, float, float, str] | Mapping[str, Any] | None


def parse_scale(value: Any, judge: str = "") -> tuple[ScaleTuple, bool]:
    """``(grid, continuous)`` of a scale in any form ``spec.scales.Scale.parse`` reads; lo < hi and step > 0 are
    checked later, per judge, by ``metrics.agreement.scale_values``."""
    sc = Scale.parse(value, f"judge {judge!r}" if judge else "", check=False)
    return sc.grid, sc.continuous


def resolve_scales(
    df: pd.DataFrame, judges: list[str], scale: ScaleInput, specs: Any = None
) -> tuple[dict[str, ScaleTuple], set[str], list[str]]:
    """Scale per judge and the judges on a continuous scale, plus notes on how each scale was chosen.

    Order: an explicit ``scale`` (one for all, or a mapping judge → scale); else the scale of the judge spec
    whose hash is the stored ``spec_hash`` (specs passed in, then shipped ones; never a shipped spec that
    merely shares the name); else the family default. A judge counts as continuous here when it is continuous
    for every contender (``resolve_contender_scales`` gives the contenders of a judge that is continuous for
    some of them only).
    """
    scales, continuous, _, notes = resolve_contender_scales(df, judges, scale, specs)
    return scales, continuous, notes


def resolve_contender_scales(
    df: pd.DataFrame, judges: list[str], scale: ScaleInput, specs: Any = None,
    run_scales: Mapping[str, Mapping[str, Any]] | None = None,
) -> tuple[dict[str, ScaleTuple], set[str], set[tuple[str, str]], list[str]]:
    """The grid (lo, hi, step) of each judge, and which contenders are calibrated on it as a continuous scale.

    The rule (issue 35): **each contender is calibrated on its own scale**, so no contender's presence changes
    another's figures. One judge has one grid (lo, hi, step), shared by its contenders (confusion matrices and
    paired comparisons need it); whether the scale is continuous is decided per contender:

    - an explicit ``scale`` (one for all, or judge → scale) holds for every contender of that judge;
    - otherwise the scale a contender's run recorded for the judge (``run_scales``: the ``source`` a judgment
      row names → judge → 'lo,hi,step[,continuous]', the store meta importers and ``scijudge jury`` write);
    - otherwise the spec whose hash the judgments record, else the family default (``resolve_scales``'s order),
      continuous when the family's track is; and a contender whose judgments of the judge are decision
      judgments scored by the expected level is continuous.

    Runs whose grids for one judge differ are refused (pass ``scale=``); a run that records no scale and whose spec
    is unknown takes the grid the other runs recorded (the family default is only a guess). Returns the grid per judge, the judges
    continuous for every contender, the (contender, judge) pairs continuous where the judge's other contenders
    are not, and notes (one per judge whose contenders differ, naming each contender's scale).
    """
    out: dict[str, ScaleTuple] = {}
    continuous: set[str] = set()
    partly: set[tuple[str, str]] = set()
    notes: list[str] = []
    by_hash: dict[str, Any] | None = None
    has_source = "source" in df.columns and bool(run_scales)
    decided = (df["decoding"].fillna("").astype(str).str.contains('"decision_score":"expected"', regex=False)
               if "decoding" in df else pd.Series(False, index=df.index))
    decision_notes: list[str] = []
    own_scale: dict[tuple[tuple[str, ...], ScaleTuple], list[str]] = {}
    for judge in judges:
        of_judge = (df["judge"] == judge).to_numpy()
        rows = df.loc[of_judge]
        sources = rows["source"] if "source" in rows else pd.Series("", index=rows.index)
        contenders = rows["contender"] if "contender" in rows else pd.Series("", index=rows.index)
        given = scale.get(judge) if isinstance(scale, Mapping) else scale
        recorded: dict[str, tuple[ScaleTuple, bool]] = {}
        default_cont = False
        if given is not None:
            out[judge], default_cont = parse_scale(given, judge)
        else:
            if has_source:
                for source in sources.unique().tolist():
                    value = (run_scales.get(source) or {}).get(judge)  # type: ignore[union-attr]
                    if value is not None:
                        recorded[source] = parse_scale(value, judge)
            if len({sc for sc, _ in recorded.values()}) > 1:  # the one rule for stores that disagree (refuses)
                recorded_scale(judge, {source: (run_scales or {})[source][judge] for source in recorded})
            unrecorded = rows[~sources.isin(list(recorded))] if recorded else rows
            grids: dict[ScaleTuple, list[str]] = {}
            for source, (sc, _) in sorted(recorded.items()):
                grids.setdefault(sc, []).append(f"run {source!r}")
            if len(unrecorded):
                if by_hash is None:
                    by_hash = specs_by_hash(specs)
                sc, default_cont, note = _default_scale(unrecorded, judge, by_hash)
                if note and len(grids) == 1:  # a family guess yields to the one grid the other runs recorded
                    sc = next(iter(grids))
                else:
                    grids.setdefault(sc, []).append("the spec of the runs recording no scale" if recorded
                                                    else "the spec")
                    if note:
                        notes.append(note)
            if len(grids) > 1:
                shown = "; ".join(f"{scale_text(sc)} ({', '.join(who)})" for sc, who in grids.items())
                raise InputError(f"judge {judge!r} is on different scales in the runs: {shown}; calibrate them "
                                 "separately or pass one scale (scale= / --scale JUDGE=lo,hi,step)", field="scale")
            out[judge] = next(iter(grids))
        stated: dict[str, bool] = {}  # contender → continuous by its recorded (or default) scale
        by_decision: set[str] = set()  # contenders made continuous by their decision judgments only
        for contender, source, dec in zip(contenders.tolist(), sources.tolist(), decided.to_numpy()[of_judge]):
            is_cont = recorded[source][1] if source in recorded else default_cont
            stated[contender] = stated.get(contender, False) or is_cont
            if dec:
                by_decision.add(contender)
        by_decision -= {c for c, v in stated.items() if v}
        if by_decision:
            decision_notes.append(f"judge {judge!r}: decision judgments score the expected level, so its scale "
                                  f"{scale_text(out[judge], True)} is treated as continuous")
        on_cont = sorted(c for c, v in stated.items() if v or c in by_decision)
        if on_cont and len(on_cont) == len(stated):
            continuous.add(judge)
        elif on_cont:
            partly.update((c, judge) for c in on_cont)
            own_scale.setdefault((tuple(on_cont), out[judge]), []).append(judge)
        elif given is not None and default_cont:  # an explicit continuous scale for a judge with no judgment here
            continuous.add(judge)
    for (names, sc), named in own_scale.items():  # one note per set of contenders and scale, not per judge
        who = f"judge {named[0]!r}" if len(named) == 1 else f"{len(named)} judges ({', '.join(map(repr, named))})"
        notes.append(f"{who}: each contender is calibrated on its own scale: {', '.join(names)} on "
                     f"{scale_text(sc, True)} (raw values, raw human median), the others on {scale_text(sc)}")
    notes += decision_notes
    for judge, sc in out.items():
        try:
            ag.scale_values(*sc)
        except ValueError as exc:
            raise InputError(f"judge {judge!r}: {exc}", field="scale") from None
    return out, continuous, partly, notes


def _default_scale(rows: pd.DataFrame, judge: str, by_hash: dict[str, Any]) -> tuple[ScaleTuple, bool, str]:
    """A judge's scale from its rows' spec hashes, else its family's: (scale, continuous, note or "")
    (``spec.scales.default_scale``, the rule the viewer's label page uses too)."""
    family = rows["family"].iloc[0] if len(rows) else "likert"
    sc, note = default_scale(judge, family, rows["spec_hash"].unique().tolist(), by_hash)
    return sc.grid, sc.continuous, note


def in_range(values: np.ndarray, sc: ScaleTuple) -> np.ndarray:
    """Within [lo, hi] (the only check for a continuous scale)."""
    return (values >= sc[0] - 1e-9) & (values <= sc[1] + 1e-9)


def to_grid(values: np.ndarray, sc: ScaleTuple) -> np.ndarray:
    """Values rounded to the scale's steps, half-way cases to the even step (numpy's round): the stated
    rounding that puts continuous scores on the grid for κ, α, AC2 and confusion matrices."""
    return sc[0] + np.round((np.asarray(values, float) - sc[0]) / sc[2]) * sc[2]


def on_scale(values: np.ndarray, sc: ScaleTuple) -> np.ndarray:
    lo, hi, step = sc
    idx = np.rint((values - lo) / step)
    return (values >= lo - 1e-9) & (values <= hi + 1e-9) & np.isclose(lo + idx * step, values, atol=1e-6)


def scale_text(sc: ScaleTuple, continuous: bool = False) -> str:
    return f"{sc[0]:g}..{sc[1]:g} step {sc[2]:g}" + (" (continuous)" if continuous else "")


def _cat_index(values: np.ndarray, sc: ScaleTuple) -> np.ndarray:
    return np.rint((values - sc[0]) / sc[2]).astype(np.int64)


def norm_verdicts(verdicts: pd.Series) -> pd.Series:
    """``verdicts.map(norm_verdict)`` on a column whose missing values are None; a column with no verdict at all
    (every score judgment, every score label) becomes the same all-None column without a call per row."""
    if len(verdicts) and verdicts.isna().all():
        return pd.Series([None] * len(verdicts), index=verdicts.index, dtype=object, name=verdicts.name)
    return verdicts.map(norm_verdict)


def _consensus(lab: pd.DataFrame, scales: dict[str, ScaleTuple],
               continuous: set[str] = frozenset()) -> tuple[pd.DataFrame, pd.DataFrame, int]:  # type: ignore[assignment]
    """Human consensus per (item, judge, part): ``scijudge.vocab.consensus_score`` (median snapped to the scale,
    half-way ties to the even step; a continuous scale keeps the median; ``h_median`` is always the raw median, which
    a contender calibrated on a continuous scale uses where the judge's scale is not), vectorised over groups (a test checks
    it equals the scalar rule), and ``scijudge.vocab.majority_verdict`` (ties have no consensus, left out)."""
    keys = ["item_id", "judge", "part"]
    scored = lab[lab["score"].notna() & lab["judge"].isin(list(scales))]
    if scored.duplicated(keys).any():
        med = scored.groupby(keys, sort=False)["score"].agg(["median", "size"]).reset_index()
    else:  # one label per unit (the usual case): its score is its median, without a group-by over three text keys
        med = scored[keys].reset_index(drop=True).assign(median=scored["score"].to_numpy(),
                                                         size=np.ones(len(scored), dtype=np.int64))
    codes, judges = pd.factorize(med["judge"])  # each judge's scale looked up once, then taken by code
    lo = np.array([float(scales[j][0]) for j in judges])[codes]  # every judge here has a scale (scored's filter)
    step = np.array([float(scales[j][2]) for j in judges])[codes]
    median = med["median"].to_numpy(float)
    snapped = lo + np.round((median - lo) / step) * step
    med["h_score"] = np.where(np.isin(codes, [k for k, j in enumerate(judges) if j in continuous]), median, snapped)
    med["h_median"] = median  # the raw median, for a contender on a continuous scale where the judge is not
    med = med.rename(columns={"size": "n_annotators"})[[*keys, "h_score", "h_median", "n_annotators"]]

    verd = lab[lab["verdict"].notna()]
    rows = []
    no_consensus = 0
    for key, group in verd.groupby(keys, sort=False):
        majority = majority_verdict(group["verdict"])
        if majority is None:
            no_consensus += 1
            continue
        rows.append((*key, majority, len(group)))
    vcons = pd.DataFrame(rows, columns=[*keys, "h_verdict", "n_annotators"])
    return med, vcons, no_consensus
