"""Calibration of judges against human labels: agreement, optimism bias, intervals and paired comparisons.

One module per concern: ``ordinal`` (scores on a scale), ``continuous`` (scores between the steps),
``verdict`` (categorical judgments), ``ceiling`` (agreement among annotators), ``paired`` (contender A − B),
``position`` (pairwise judges in both orders), ``vocab`` (scales, verdict normalisation, human consensus) and
``_api`` (``calibrate`` itself). The public names below are the ones this module has always exported.
"""


from scijudge.metrics.calibration._api import calibrate
from scijudge.metrics.calibration._blocks import COVERAGE_FLOOR
from scijudge.metrics.calibration._inputs import (
    _attach,
    _prepare_labels,
    _validate_scores,
)
from scijudge.metrics.calibration._result import (
    PAIRED_METRICS,
    POOLED,
    CalibrationResult,
    ScaleTuple,
    frame_records,
)
from scijudge.metrics.calibration.ordinal import _prob_row
from scijudge.metrics.calibration.scales import FAMILY_SCALES, _consensus

__all__ = ["COVERAGE_FLOOR", "FAMILY_SCALES", "PAIRED_METRICS", "POOLED", "CalibrationResult", "ScaleTuple", "calibrate",
           "frame_records"]

# Helpers other modules took from the former single-file module (``scijudge.estimation`` reads them as
# ``calibration._prepare_labels`` etc.): kept importable here with their old signatures.
_COMPAT = (_attach, _prepare_labels, _validate_scores, _prob_row, _consensus)
