"""The judgments frames people have, completed into run-store rows: one normaliser every API uses.

``complete_judgments(frame)`` takes a minimal frame -- ``item_id``, ``judge``, ``score`` (or ``verdict``), and
optionally ``model``, ``probs``, ``status``, ``part``, ``family``, ``spec_hash``, ``source`` -- and fills the
run-store columns that ``calibrate``, ``estimate``, ``select_labels``, ``jury`` and ``cascade`` read, with these
documented defaults (a column that is present is never changed):

==============  =========================================================================================
``model``       ``"model"`` (one contender)
``status``      ``"ok"`` where a score or verdict is given, ``"abstained"`` where neither is
``part``        ``""`` (a whole-item judgment)
``family``      ``"likert"`` (a rating scale; its default scale 1..5 step 1 unless ``scale=`` says otherwise)
``spec_hash``   ``""`` (no spec known: the scale comes from ``scale=`` or the family)
``verdict``     ``None``
``probs``       ``None``
``decoding``    ``'{"decision_score":"expected"}'`` on rows whose score is the expectation of their ``probs``
                (a frame of expected scores from rating probabilities), so the judge's scale is read as
                continuous; ``""`` elsewhere
==============  =========================================================================================

Run-store frames (``Run(path).to_pandas()``) already hold every column and pass through unchanged.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from scijudge.errors import InputError

MINIMAL_COLUMNS: tuple[str, ...] = ("item_id", "judge", "score")
DEFAULT_MODEL = "model"
DEFAULT_FAMILY = "likert"
EXPECTED_DECODING = json.dumps({"decision_score": "expected"}, separators=(",", ":"))
"""The ``decoding`` a decision judgment scored by its expected level stores (what ``_resolve_scales`` reads)."""


def _expected(probs: Any) -> float | None:
    """The expectation of a rating distribution ``{level: p}``; None when it is not one."""
    if not isinstance(probs, Mapping) or not probs:
        return None
    try:
        pairs = [(float(k), float(v)) for k, v in probs.items()]
    except (TypeError, ValueError):
        return None
    total = sum(p for _, p in pairs)
    if not total > 0 or not math.isfinite(total):
        return None
    return sum(level * p for level, p in pairs) / total


def _is_expected_score(score: Any, probs: Any) -> bool:
    """True when ``score`` equals the expectation of ``probs`` and is not itself one of the levels."""
    mean = _expected(probs)
    if mean is None or score is None or isinstance(score, bool):
        return False
    try:
        value = float(score)
    except (TypeError, ValueError):
        return False
    if not math.isfinite(value) or abs(value - mean) > 1e-6:
        return False
    return all(abs(value - float(level)) > 1e-9 for level in probs)


def complete_judgments(judgments: Any) -> Any:
    """``judgments`` with every run-store column the metrics read, defaults filled (see the module docstring).

    Only missing columns are added; the input frame is never modified. A frame without ``item_id`` or
    ``judge``, or with neither ``score`` nor ``verdict``, is one error naming the column.
    """
    import pandas as pd

    if not isinstance(judgments, pd.DataFrame):
        raise InputError(f"judgments must be a pandas DataFrame, got {type(judgments).__name__}")
    for column in ("item_id", "judge"):
        if column not in judgments.columns:
            raise InputError("judgments lack a column (a minimal frame has item_id, judge, score)", field=column)
    if "score" not in judgments.columns and "verdict" not in judgments.columns:
        raise InputError("judgments need a 'score' or a 'verdict' column", field="score")
    missing = [c for c in ("model", "status", "part", "family", "spec_hash", "verdict", "score", "probs",
                           "decoding") if c not in judgments.columns]
    if not missing:
        return judgments
    df = judgments.copy()
    if "score" not in df.columns:
        df["score"] = math.nan
    if "verdict" not in df.columns:
        df["verdict"] = None
    if "model" in missing:
        df["model"] = DEFAULT_MODEL
    if "status" in missing:
        answered = pd.to_numeric(df["score"], errors="coerce").notna() | df["verdict"].notna()
        df["status"] = answered.map({True: "ok", False: "abstained"})
    if "part" in missing:
        df["part"] = ""
    if "family" in missing:
        df["family"] = DEFAULT_FAMILY
    if "spec_hash" in missing:
        df["spec_hash"] = ""
    if "probs" in missing:
        df["probs"] = None
    if "decoding" in missing:
        has = df["probs"].map(lambda p: isinstance(p, Mapping) and bool(p))
        df["decoding"] = ""
        if has.any():
            expected = [_is_expected_score(s, p) for s, p in zip(df.loc[has, "score"], df.loc[has, "probs"])]
            df.loc[has[has].index[expected], "decoding"] = EXPECTED_DECODING
    return df
