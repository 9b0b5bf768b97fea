"""Who is being compared: turn run-store rows into named contenders (model, run, spec version)."""

from __future__ import annotations

import functools
from typing import Any

from scijudge.errors import InputError

REQUIRED_JUDGMENT_COLUMNS: tuple[str, ...] = (
    "item_id", "judge", "part", "family", "spec_hash", "model", "status", "score", "verdict",
)


def prepare_judgments(judgments: Any) -> Any:
    """Check the run-store columns and normalise them (part "" not None, strings, a ``source`` column); a minimal
    frame (item_id, judge, score[, model, probs, status]) is completed first (``metrics.frames``)."""
    import pandas as pd

    from scijudge.metrics.frames import complete_judgments

    judgments = complete_judgments(judgments)
    missing = [c for c in REQUIRED_JUDGMENT_COLUMNS if c not in judgments.columns]
    if missing:
        raise InputError("judgments lack a run-store column", field=missing[0])
    df = judgments.copy()
    if "source" not in df.columns:
        df["source"] = ""
    for column in ("confidence", "probs"):
        if column not in df.columns:
            df[column] = None
    for column in ("item_id", "judge", "family", "spec_hash", "model", "status", "source", "part"):
        df[column] = text_column(df[column])
    bad = ~df["status"].isin(["ok", "abstained"])
    if bad.any():
        row = df[bad].iloc[0]
        raise InputError(f"status must be 'ok' or 'abstained', got {row['status']!r} (item {row['item_id']!r})",
                         file=row["source"] or None, field="status")
    df["score"] = pd.to_numeric(df["score"], errors="raise").astype(float)
    df["confidence"] = pd.to_numeric(df["confidence"], errors="raise").astype(float)
    df["verdict"] = df["verdict"].astype(object).where(df["verdict"].notna(), None)
    df["contender"] = contender_labels(df)
    return df


def text_column(values: Any) -> Any:
    """``values`` as text, missing values as "": ``astype(object).where(notna, "").astype(str)``, which a column
    already of pandas' text dtype gets without a round trip through one Python string per row."""
    import pandas as pd

    if isinstance(values.dtype, pd.StringDtype) and values.dtype == _text_dtype():
        return values.where(values.notna(), "") if values.hasnans else values.copy()
    return values.astype(object).where(values.notna(), "").astype(str)


@functools.cache
def _text_dtype() -> Any:
    """What ``astype(str)`` makes (pandas 3: its "str" dtype; pandas 2: object, never taken as text as it is)."""
    import pandas as pd

    return pd.Series([""]).astype(str).dtype


def contender_labels(df: Any) -> Any:
    """Name each row's contender: the model, plus the run when the model appears in several runs, plus the
    spec hash when one run holds several versions of the same judge (e.g. before/after optimization)."""
    sources_per_model = df.groupby("model")["source"].transform("nunique")
    base = df["model"].where(sources_per_model <= 1, df["model"] + " @" + df["source"])
    versions = df.assign(_base=base).groupby(["_base", "judge"])["spec_hash"].nunique()
    split = set(versions[versions > 1].index.get_level_values(0))
    with_spec = base.isin(split)
    return base.where(~with_spec, base + " #" + df["spec_hash"].str.slice(0, 8))
