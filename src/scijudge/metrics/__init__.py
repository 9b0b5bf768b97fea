"""Metrics: agreement with humans, bootstrap, calibration (and the other engineers' compliance/figures).

``calibrate`` and ``CalibrationResult`` are re-exported lazily so that importing one metrics module does
not pull scikit-learn and statsmodels into every caller.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CalibrationResult", "calibrate"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from scijudge.metrics import calibration

        return getattr(calibration, name)
    raise AttributeError(f"module 'scijudge.metrics' has no attribute {name!r}")
