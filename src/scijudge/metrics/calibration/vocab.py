"""Scales, verdict normalisation and human consensus for calibration: the one copy inside metrics.

Kept together so they can be repointed to ``scijudge.vocab`` in one place."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from scijudge.errors import InputError, ScijudgeError
from scijudge.metrics import agreement as ag
from scijudge.metrics.calibration._result import ScaleTuple

FAMILY_SCALES: dict[str, ScaleTuple] = {
    "likert": (1.0, 5.0, 1.0),
    "synthesis": (1.0, 5.0, 0.5),
    "linking": (1.0, 5.0, 0.5),
    "checklist": (0.0, 1.0, 0.5),
    "pairwise": (-4.0, 4.0, 1.0),
}


def _norm_verdict(value: Any) -> str | None:
    return None if value is None else str(value).strip().lower()


def _resolve_scales(
    df: pd.DataFrame, judges: list[str], scale: ScaleTuple | Mapping[str, ScaleTuple] | None
) -> dict[str, ScaleTuple]:
    """Scale per judge: explicit argument, else the shipped spec's scale, else the family default."""
    out: dict[str, ScaleTuple] = {}
    for judge in judges:
        if isinstance(scale, Mapping):
            if judge in scale:
                out[judge] = tuple(float(x) for x in scale[judge])  # type: ignore[assignment]
                continue
        elif scale is not None:
            out[judge] = tuple(float(x) for x in scale)  # type: ignore[assignment]
            continue
        families = df.loc[df["judge"] == judge, "family"].unique()
        family = families[0] if len(families) else "likert"
        out[judge] = _spec_scale(judge, family) or FAMILY_SCALES.get(family, FAMILY_SCALES["likert"])
    for judge, sc in out.items():
        if len(sc) != 3:
            raise InputError(f"scale for judge {judge!r} must be (lo, hi, step), got {sc!r}", field="scale")
        try:
            ag.scale_values(*sc)
        except ValueError as exc:
            raise InputError(f"judge {judge!r}: {exc}", field="scale") from None
    return out


def _spec_scale(judge: str, family: str) -> ScaleTuple | None:
    """The scale of a shipped judge spec of this name, if there is one (pairwise: rating differences)."""
    try:
        from scijudge.specs import get_spec

        spec = get_spec(judge)
    except (ScijudgeError, ImportError):  # not a shipped judge: fall back to the family default
        return None
    sc = getattr(spec, "scale", None)
    if sc is None:
        return None
    if family == "pairwise":
        return (float(sc.min - sc.max), float(sc.max - sc.min), float(sc.step))
    return (float(sc.min), float(sc.max), float(sc.step))


def _on_scale(values: np.ndarray, sc: ScaleTuple) -> np.ndarray:
    lo, hi, step = sc
    idx = np.rint((values - lo) / step)
    return (values >= lo - 1e-9) & (values <= hi + 1e-9) & np.isclose(lo + idx * step, values, atol=1e-6)


def _scale_text(sc: ScaleTuple) -> str:
    return f"{sc[0]:g}..{sc[1]:g} step {sc[2]:g}"


def _cat_index(values: np.ndarray, sc: ScaleTuple) -> np.ndarray:
    return np.rint((values - sc[0]) / sc[2]).astype(np.int64)


def _consensus(lab: pd.DataFrame, scales: dict[str, ScaleTuple]) -> tuple[pd.DataFrame, pd.DataFrame, int]:
    """Human consensus per (item, judge, part): median score snapped to the scale (half-way ties round to
    the even scale step), and majority verdict (ties have no consensus and are left out)."""
    keys = ["item_id", "judge", "part"]
    scored = lab[lab["score"].notna() & lab["judge"].isin(list(scales))]
    med = scored.groupby(keys, sort=False)["score"].agg(["median", "size"]).reset_index()
    lo = med["judge"].map(lambda j: scales[j][0]).astype(float)
    step = med["judge"].map(lambda j: scales[j][2]).astype(float)
    med["h_score"] = lo + np.round((med["median"] - lo) / step) * step
    med = med.rename(columns={"size": "n_annotators"})[[*keys, "h_score", "n_annotators"]]

    verd = lab[lab["verdict"].notna()]
    rows = []
    no_consensus = 0
    for key, group in verd.groupby(keys, sort=False):
        counts = group["verdict"].value_counts()
        if len(counts) > 1 and counts.iloc[0] == counts.iloc[1]:
            no_consensus += 1
            continue
        rows.append((*key, counts.index[0], int(counts.sum())))
    vcons = pd.DataFrame(rows, columns=[*keys, "h_verdict", "n_annotators"])
    return med, vcons, no_consensus
