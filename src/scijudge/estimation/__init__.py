"""Human labels as a correction: prediction-powered estimates (PPI++), their anytime-valid confidence sequences
and conformal sets of human scores."""

from scijudge.estimation.estimate import ESTIMATE_COLUMNS, METHODS, estimate, estimate_units, labels_needed_units
from scijudge.estimation.intervals import conformal, conformal_units
from scijudge.estimation._units import Units, item_meta_map, match_units
from scijudge.estimation.sequential import SEQUENTIAL_COLUMNS, sequential, sequential_units

__all__ = [
    "ESTIMATE_COLUMNS", "METHODS", "SEQUENTIAL_COLUMNS", "Units", "conformal", "conformal_units", "estimate", "estimate_units",
    "item_meta_map", "labels_needed_units", "match_units", "sequential", "sequential_units",
]
