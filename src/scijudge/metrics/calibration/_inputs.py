"""Checks of the labels and judgments given to ``calibrate``, and matching judgments to consensus labels."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from scijudge.errors import InputError
from scijudge.metrics.calibration._blocks import _isin
from scijudge.metrics.groups import text_column
from scijudge.metrics.calibration.scales import (
    on_scale,
    scale_text,
    in_range,
    norm_verdicts,
)
from scijudge.vocab import ScaleTuple


def _prepare_labels(labels: pd.DataFrame) -> pd.DataFrame:
    if not isinstance(labels, pd.DataFrame):
        raise InputError(f"labels must be a pandas DataFrame (see labels_to_frame), got {type(labels).__name__}")
    for column in ("item_id", "judge"):
        if column not in labels.columns:
            raise InputError("labels lack a column", field=column)
    if "score" not in labels.columns and "verdict" not in labels.columns:
        raise InputError("labels need a 'score' or a 'verdict' column", field="score")
    lab = labels.copy()
    for column, default in (("part", ""), ("annotator", ""), ("score", np.nan), ("verdict", None),
                            ("source_file", None), ("source_line", None)):
        if column not in lab.columns:
            lab[column] = default
    for column in ("item_id", "judge", "part", "annotator"):
        lab[column] = text_column(lab[column])
    lab["score"] = pd.to_numeric(lab["score"], errors="raise").astype(float)
    lab["verdict"] = lab["verdict"].astype(object).where(lab["verdict"].notna(), None)
    both = lab["score"].notna() == lab["verdict"].notna()
    if both.any():
        raise _label_error(lab[both].iloc[0], "exactly one of 'score' or 'verdict' must be given", "score")
    dup = lab.duplicated(["item_id", "judge", "part", "annotator"], keep="first")
    if dup.any():
        row = lab[dup].iloc[0]
        who = f"annotator {row['annotator']!r}" if row["annotator"] else "an unnamed annotator"
        raise _label_error(row, f"duplicate label: {who} labelled item {row['item_id']!r}, judge "
                                f"{row['judge']!r}{_part_text(row['part'])} more than once", "annotator")
    lab["verdict"] = norm_verdicts(lab["verdict"])
    return lab


_CRITERION_ID = __import__("re").compile(r"^c[0-9a-f]{10}$")


def _resolve_checklist_parts(lab: pd.DataFrame, df: pd.DataFrame, tasks: Any = None) -> pd.DataFrame:
    """Labels of checklist judges may name the criterion by its id, its text or its 1-based position in the
    task (``tasks``: ``importers.researchrubrics`` Task objects); all become the criterion id the judgments
    carry. Labels of a checklist judge no run has go to the checklist judges whose names extend it
    (``researchrubrics.checklist`` labels also calibrate ``researchrubrics.checklist.ternary``)."""
    checklist = sorted(df.loc[df["family"] == "checklist", "judge"].unique())
    if not checklist:
        return lab
    from scijudge.spec.rubric_criteria import criterion_id

    order = {t.sample_id: [c.id for c in t.rubrics] for t in tasks} if tasks is not None else None
    extended, moved = [], []
    for judge in lab["judge"].unique():
        heirs = [] if judge in checklist else [j for j in checklist if j.startswith(judge + ".")]
        if heirs:
            moved.append(judge)
            extended += [lab[lab["judge"] == judge].assign(judge=heir) for heir in heirs]
    if moved:
        lab = pd.concat([lab[~lab["judge"].isin(moved)], *extended], ignore_index=True)
    rows = lab["judge"].isin(checklist)
    judged = set(zip(df["item_id"], df["judge"], df["part"]))

    def resolve(row: pd.Series) -> str:
        part = str(row["part"]).strip()
        if _CRITERION_ID.match(part) or (row["item_id"], row["judge"], part) in judged:
            return part
        if part.isdigit():
            if order is None:
                raise _label_error(row, f"criterion {part!r} is a position in the task: pass the task file "
                                        "(--tasks) to resolve it", "part")
            ids = order.get(row["item_id"])
            if ids is None:
                raise _label_error(row, f"no task {row['item_id']!r} in the task file", "item_id")
            if not 1 <= int(part) <= len(ids):
                raise _label_error(row, f"criterion position {part} is outside task {row['item_id']!r} "
                                        f"(1..{len(ids)})", "part")
            return ids[int(part) - 1]
        if not part:
            raise _label_error(row, "a checklist label needs the criterion (id, text or position)", "part")
        return criterion_id(part)

    if rows.any():
        lab = lab.copy()
        lab.loc[rows, "part"] = [resolve(r) for _, r in lab[rows].iterrows()]
    return lab


def _part_text(part: str) -> str:
    return f", part {part!r}" if part else ""


def _label_error(row: pd.Series, message: str, field: str) -> InputError:
    line = row.get("source_line")
    line = int(line) if line is not None and not pd.isna(line) else None
    file = row.get("source_file")
    file = file if isinstance(file, str) and file else None
    if file is None and line is None:
        message = f"label for item {row['item_id']!r}, judge {row['judge']!r}: {message}"
    return InputError(message, file=file, line=line, field=field)


def _check_unknown_items(df: pd.DataFrame, lab: pd.DataFrame) -> None:
    unknown = lab[~_isin(lab["item_id"], df["item_id"].unique())]
    if unknown.empty:
        return
    ids = list(dict.fromkeys(unknown["item_id"]))
    shown = ", ".join(repr(i) for i in ids[:5]) + (" ..." if len(ids) > 5 else "")
    raise _label_error(
        unknown.iloc[0],
        f"labels for {len(ids)} {'item' if len(ids) == 1 else 'items'} that no run judged ({shown}); check that "
        "labels and runs use the same item ids, or allow extra labels (allow_extra_labels=True)",
        "item_id",
    )


def _validate_scores(df: pd.DataFrame, lab: pd.DataFrame, scales: dict[str, ScaleTuple],
                     continuous: set[str] = frozenset(),  # type: ignore[assignment]
                     partly: set[tuple[str, str]] = frozenset()) -> None:  # type: ignore[assignment]
    """Labels and ok judgments on their judge's scale; ``partly``: (contender, judge) pairs on a continuous scale
    where the judge is not (their judgments need only be in range; labels of such a judge too)."""
    lab_scores, df_scores = lab["score"].to_numpy(float), df["score"].to_numpy(float)
    lab_scored, df_scored = ~np.isnan(lab_scores), (df["status"] == "ok").to_numpy() & ~np.isnan(df_scores)
    partly_judges = {j for _, j in partly}
    for judge, sc in scales.items():  # masks on arrays; a frame's row is taken only for the error message
        check = in_range if judge in continuous or judge in partly_judges else on_scale
        sel = (lab["judge"] == judge).to_numpy() & lab_scored
        bad = ~check(lab_scores[sel], sc)
        if bad.any():
            row = lab.iloc[np.flatnonzero(sel)[np.argmax(bad)]]
            where = scale_text(sc, judge in continuous or judge in partly_judges)
            raise _label_error(row, f"score {row['score']:g} is outside the scale {where} of judge "
                                    f"{judge!r}", "score")
        sel = (df["judge"] == judge).to_numpy() & df_scored
        rows_cont = np.full(int(sel.sum()), judge in continuous)
        if judge in partly_judges:
            rows_cont = df.loc[sel, "contender"].isin([c for c, j in partly if j == judge]).to_numpy()
        values = df_scores[sel]
        bad = np.where(rows_cont, ~in_range(values, sc), ~on_scale(values, sc))
        if bad.any():
            row = df.iloc[np.flatnonzero(sel)[np.argmax(bad)]]
            raise InputError(
                f"judgment of item {row['item_id']!r} by {row['model']!r} has score {row['score']:g}, outside the "
                f"scale {scale_text(sc, bool(rows_cont[np.argmax(bad)]))} of judge {judge!r}; pass the right scale "
                "(scale=(lo, hi, step) or (lo, hi, step, 'continuous') / --scale)",
                file=row["source"] or None, field="score",
            )


def _attach(df: pd.DataFrame, cons: pd.DataFrame) -> pd.DataFrame:
    """Judgments joined to consensus labels on (item, judge, part); pairwise orders AB/BA use a part-less label."""
    keys = ["item_id", "judge", "part"]
    judged = df.copy()
    judged["label_part"] = judged["part"]
    ordered = judged["part"].isin(["AB", "BA"])
    if ordered.any():
        have = set(map(tuple, cons[keys].to_numpy().tolist())) if len(cons) else set()
        sub = judged[ordered]
        missing = [k not in have for k in zip(sub["item_id"], sub["judge"], sub["part"])]
        judged.loc[sub.index[missing], "label_part"] = ""
    merged = judged.merge(
        cons.rename(columns={"part": "label_part"}), on=["item_id", "judge", "label_part"], how="inner"
    )
    return merged


def _check_duplicate_judgments(matched: pd.DataFrame) -> None:
    dup = matched.duplicated(["contender", "item_id", "judge", "part"])
    if dup.any():
        row = matched[dup].iloc[0]
        raise InputError(
            f"{row['contender']!r} judged item {row['item_id']!r} with {row['judge']!r}{_part_text(row['part'])} "
            "more than once; pass each run once, or split repeated samples into separate runs",
            file=row["source"] or None, field="item_id",
        )
