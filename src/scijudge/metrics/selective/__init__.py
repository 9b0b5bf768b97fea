"""Selective judging and cascades over stored judgments (Jung, Brahman & Choi, "Trust or Escalate", ICLR 2025):
confidence thresholds chosen by fixed-sequence testing so that the trusted judgments agree with humans on at
least a target share of items with probability >= 1 - risk; what no member trusts is escalated to humans."""

from __future__ import annotations

from scijudge.metrics.selective.api import CASCADE_PREFIX, ESCALATED, CascadeResult, cascade, cost_per_item, label_targets
from scijudge.metrics.selective.fst import FixedSequence, fixed_sequence, selective_curve
from scijudge.metrics.selective.store import escalated_picks, write_cascade

__all__ = ["CASCADE_PREFIX", "ESCALATED", "CascadeResult", "FixedSequence", "cascade", "cost_per_item",
           "escalated_picks", "fixed_sequence", "label_targets", "selective_curve", "write_cascade"]
