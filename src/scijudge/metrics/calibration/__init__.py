"""Calibration of judges against human labels: agreement, optimism bias, intervals and paired comparisons.

One module per concern: ``ordinal`` (scores on a scale), ``verdict`` (categorical judgments), ``ceiling``
(agreement among annotators), ``paired`` (contender A − B), ``position`` (pairwise judges in both orders),
``vocab`` (scales, verdict normalisation, human consensus) and ``_api`` (``calibrate`` itself). The public
names below are the ones ``scijudge.metrics.calibration`` has always exported.
"""

from scijudge.metrics.calibration._api import calibrate
from scijudge.metrics.calibration._result import (
           PAIRED_METRICS,
           POOLED,
           CalibrationResult,
           ScaleTuple,
           frame_records,
)
from scijudge.metrics.calibration.vocab import FAMILY_SCALES

__all__ = ["FAMILY_SCALES", "PAIRED_METRICS", "POOLED", "CalibrationResult", "ScaleTuple", "calibrate",
           "frame_records"]
