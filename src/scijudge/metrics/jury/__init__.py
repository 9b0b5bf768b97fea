"""Juries over stored judgments: aggregate several judges (mean, median, strict majority, cross-fitted weights,
Dawid–Skene) into a run store of jury judgments, and compare a jury with each of its members."""

from __future__ import annotations

from scijudge.metrics.jury.api import JURY_PREFIX, METHODS, JuryResult, jury
from scijudge.metrics.jury.compare import jury_vs_best_member
from scijudge.metrics.jury.dawid_skene import DawidSkeneFit, dawid_skene
from scijudge.metrics.jury.members import Member

__all__ = ["JURY_PREFIX", "METHODS", "DawidSkeneFit", "JuryResult", "Member", "dawid_skene", "jury",
           "jury_vs_best_member"]
