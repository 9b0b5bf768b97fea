"""What ``calibrate`` returns: the result frames, their JSON form, and shared names."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from scijudge.vocab import ScaleTuple

POOLED = "(pooled)"
PAIRED_METRICS = {"ordinal": ("kappa_w", "mae"), "verdict": ("kappa", "accuracy")}


@dataclass
class CalibrationResult:
    """Everything ``calibrate`` measured, as pandas DataFrames (see each field's description).

    Interval columns are ``<stat>_lo`` / ``<stat>_hi`` (95% percentile bootstrap over items). A statistic
    that is undefined (e.g. kappa when every rating is equal) is NaN and its row's ``notes`` says why.
    """

    leaderboard: pd.DataFrame  # ordinal scores pooled over rubrics: one row per contender and scale, ranked
    per_rubric: pd.DataFrame  # ordinal scores per contender × rubric
    verdict_leaderboard: pd.DataFrame  # verdicts pooled per contender and judge family
    verdict_per_rubric: pd.DataFrame  # verdicts per contender × rubric
    human_ceiling: pd.DataFrame  # agreement among annotators (per rubric and pooled) where ≥2 labelled a unit
    paired: pd.DataFrame  # contender A − contender B on common units, bootstrap p-values, Holm across rubrics
    confusion: pd.DataFrame  # long format: contender, judge, track, human, judge_value, count
    reliability: pd.DataFrame  # long format reliability-diagram bins (equal-width and equal-mass)
    scales: dict[str, ScaleTuple] = field(default_factory=dict)
    n_boot: int = 1000
    seed: int = 0
    level: float = 0.95
    notes: list[str] = field(default_factory=list)
    continuous: list[str] = field(default_factory=list)  # judges calibrated on a continuous scale
    position: pd.DataFrame = field(default_factory=pd.DataFrame)  # pairwise judges: consistency across orders
    selective: pd.DataFrame = field(default_factory=pd.DataFrame)  # agreement vs coverage by confidence (issue 37)
    jury_vs_best_member: pd.DataFrame = field(default_factory=pd.DataFrame)  # juries vs each member, Holm (jury)
    provenance: dict[str, Any] = field(default_factory=dict)  # what the labels are: {"labels", "from_model", ...}

    def confusion_matrix(self, contender: str, judge: str = POOLED, track: str | None = None) -> pd.DataFrame:
        """One confusion matrix (rows human, columns judge) from the long ``confusion`` frame."""
        sel = self.confusion[(self.confusion["contender"] == contender) & (self.confusion["judge"] == judge)]
        if track is not None:
            sel = sel[sel["track"] == track]
        if sel.empty:
            raise KeyError(f"no confusion matrix for contender {contender!r}, judge {judge!r}")
        if sel["track"].nunique() > 1:
            raise KeyError(f"several tracks for {contender!r} / {judge!r}: pass track= one of {sorted(sel['track'].unique())}")
        return sel.pivot(index="human", columns="judge_value", values="count")

    def frames(self) -> dict[str, pd.DataFrame]:
        """The named DataFrames of this result."""
        return {
            "leaderboard": self.leaderboard,
            "per_rubric": self.per_rubric,
            "verdict_leaderboard": self.verdict_leaderboard,
            "verdict_per_rubric": self.verdict_per_rubric,
            "human_ceiling": self.human_ceiling,
            "paired": self.paired,
            "confusion": self.confusion,
            "reliability": self.reliability,
            "position": self.position,
            "selective": self.selective,
            "jury_vs_best_member": self.jury_vs_best_member,
        }

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: every frame as records (NaN becomes null) plus settings and notes."""
        out: dict[str, Any] = {
            "settings": {"n_boot": self.n_boot, "seed": self.seed, "level": self.level,
                         "scales": {k: list(v) for k, v in self.scales.items()},
                         "continuous": list(self.continuous)},
            "notes": list(self.notes),
            "provenance": dict(self.provenance),
        }
        for name, frame in self.frames().items():
            out[name] = frame_records(frame)
        return out


def frame_records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """DataFrame rows as JSON-safe dicts (NaN/inf → None, numpy scalars → Python)."""
    rows = []
    for record in frame.to_dict(orient="records"):
        clean = {}
        for key, value in record.items():
            if isinstance(value, (np.floating, float)):
                value = float(value)
                clean[key] = value if math.isfinite(value) else None
            elif isinstance(value, np.integer):
                clean[key] = int(value)
            elif isinstance(value, np.bool_):
                clean[key] = bool(value)
            elif value is pd.NA or value is pd.NaT:
                clean[key] = None
            else:
                clean[key] = value
        rows.append(clean)
    return rows
