"""Who sits on a jury: the ``--member`` syntax and the stored judgments each member contributes."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from scijudge.errors import InputError

UNIT = ["item_id", "judge", "part"]
_MEMBER = re.compile(r"^(?P<model>.+?)(?:@(?P<endpoint>[A-Za-z][A-Za-z0-9+.\-]*://[^#]*))?(?:#(?P<judge>[^#]+))?$")
MEMBER_SYNTAX = "MODEL, MODEL@ENDPOINT or either with #JUDGE (a judge name, dotted prefix or glob)"


@dataclass(frozen=True)
class Member:
    """``MODEL``, ``MODEL@ENDPOINT`` or either with ``#JUDGE``.

    An endpoint must contain '://' (model names such as ``claude-3-5-sonnet@20240620`` contain '@' themselves);
    a stored endpoint never contains '#' (``records.safe_endpoint`` drops fragments), so '#' is unambiguous.
    """

    model: str
    endpoint: str | None = None
    judge: str | None = None

    @classmethod
    def parse(cls, text: str | Member) -> Member:
        if isinstance(text, Member):
            return text
        found = _MEMBER.match(str(text).strip())
        if not found or not found["model"]:
            raise InputError(f"member {text!r}: expected {MEMBER_SYNTAX}", field="member")
        endpoint = found["endpoint"].rstrip("/") if found["endpoint"] is not None else None
        return cls(found["model"], endpoint, found["judge"])

    @property
    def label(self) -> str:
        """How jury rows name the member: the model, plus the endpoint when one was given."""
        return self.model if self.endpoint is None else f"{self.model}@{self.endpoint}"

    def covers_judge(self, judge: str) -> bool:
        pattern = self.judge
        return pattern is None or judge == pattern or judge.startswith(pattern + ".") or fnmatch.fnmatch(judge, pattern)


def normalise(frame: pd.DataFrame) -> pd.DataFrame:
    """Run-store rows with the columns a jury reads, strings as strings and scores as floats."""
    missing = [c for c in ("item_id", "judge", "model", "status", "score") if c not in frame.columns]
    if missing:
        raise InputError("judgments lack a run-store column", field=missing[0])
    df = frame.copy()
    defaults: dict[str, Any] = {"part": "", "endpoint": "", "verdict": None, "key": "", "family": "", "spec_hash": "",
                                "input_hash": "", "reason": None, "cost": np.nan, "tokens_in": 0, "tokens_out": 0,
                                "latency_s": 0.0, "source": ""}
    for column, default in defaults.items():
        if column not in df.columns:
            df[column] = default
    for column in ("item_id", "judge", "part", "model", "endpoint", "status", "family", "spec_hash", "input_hash",
                   "key", "source"):
        df[column] = df[column].astype(object).where(df[column].notna(), "").astype(str)
    bad = ~df["status"].isin(["ok", "abstained"])
    if bad.any():
        row = df[bad].iloc[0]
        raise InputError(f"status must be 'ok' or 'abstained', got {row['status']!r} (item {row['item_id']!r})",
                         file=row["source"] or None, field="status")
    df["score"] = pd.to_numeric(df["score"], errors="coerce").astype(float)
    df["verdict"] = df["verdict"].astype(object).where(df["verdict"].notna(), None)
    return df


def select_members(frame: pd.DataFrame, members: Sequence[str | Member], *,
                   minimum: int = 2) -> tuple[pd.DataFrame, list[Member]]:
    """Rows of ``frame`` that belong to a member, with a ``member`` column (its label), and the members.

    Refuses (one line each): fewer than ``minimum`` members (a jury: two; a cascade: one), a member given twice,
    a member matching no row, a member without endpoint whose model was judged at several endpoints, two members
    claiming one row, and a member with two rows for one (item, judge, part) (the same run passed twice).
    """
    specs = [Member.parse(m) for m in members]
    if len(specs) < minimum:
        raise InputError("a jury needs at least two members (--member MODEL, repeated)" if minimum == 2 else
                         f"give at least {minimum} member(s) (--member MODEL)", field="member")
    labels = [s.label for s in specs]
    for label in labels:
        if labels.count(label) > 1:
            raise InputError(f"member {label!r} is given twice", field="member")
    df = normalise(frame)
    pieces = []
    for spec in specs:
        sel = df[(df["model"] == spec.model) & df["judge"].map(spec.covers_judge)]
        if spec.endpoint is not None:
            sel = sel[sel["endpoint"] == spec.endpoint]
        if sel.empty:
            judged = ", ".join(sorted(df["model"].unique())[:8])
            narrowed = f" (judge {spec.judge})" if spec.judge else ""
            raise InputError(f"member {spec.label!r}{narrowed} has no judgment in the runs (models there: {judged})",
                             field="member")
        endpoints = sorted(sel["endpoint"].unique())
        if spec.endpoint is None and len(endpoints) > 1:
            raise InputError(f"member {spec.model!r} was judged at {len(endpoints)} endpoints {endpoints}: name one as "
                             f"{spec.model}@ENDPOINT", field="member")
        dup = sel.duplicated(UNIT)
        if dup.any():
            row = sel[dup].iloc[0]
            part = f", part {row['part']!r}" if row["part"] else ""
            raise InputError(f"member {spec.label!r} has several judgments of item {row['item_id']!r} "
                             f"({row['judge']}{part}); pass each run once", file=row["source"] or None, field="item_id")
        pieces.append(sel.assign(member=spec.label))
    out = pd.concat(pieces, ignore_index=True)
    claimed = out.duplicated(["item_id", "judge", "part", "model", "endpoint"], keep=False)
    if claimed.any():
        row = out[claimed].iloc[0]
        raise InputError(f"the judgment of item {row['item_id']!r} by {row['model']!r} belongs to two members; narrow "
                         "them by judge (MODEL#JUDGE) so that they do not overlap", field="member")
    return out, specs


def members_of_judge(specs: Sequence[Member], judge: str) -> list[str]:
    return [s.label for s in specs if s.covers_judge(judge)]


def wide(sel: pd.DataFrame, judge: str, labels: Sequence[str], value: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(values, status) of one judge: index (item_id, part), one column per member; status ok|abstained|missing."""
    rows = sel[sel["judge"] == judge]
    answered = (rows["status"] == "ok") & rows[value].notna()
    vals = rows.assign(_v=rows[value].where(answered)).pivot(index=["item_id", "part"], columns="member", values="_v")
    status = rows.assign(_s=np.where(answered, "ok", "abstained")).pivot(
        index=["item_id", "part"], columns="member", values="_s")
    vals = vals.reindex(columns=list(labels))
    status = status.reindex(columns=list(labels)).fillna("missing")
    return vals.sort_index(), status.sort_index()


def absent_text(status: pd.Series) -> str:
    """'abstained: a, b; missing: c' for one unit's member statuses ('' when every member answered)."""
    parts = []
    for kind in ("abstained", "missing"):
        who = [str(m) for m, s in status.items() if s == kind]
        if who:
            parts.append(f"{kind}: {', '.join(who)}")
    return "; ".join(parts)
