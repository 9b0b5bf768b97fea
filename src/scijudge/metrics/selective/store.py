"""A cascade's decisions as a run store (model ``cascade:NAME``), and its escalated items as a labelling queue.

Each (item, judge, part) gets one judgment: the deciding member's score, verdict, confidence and probs, or an
abstention with reason ``escalated`` when no member trusted it, so ``calibrate``, ``estimate``, ``export`` and
``view`` read a cascade like any run. Identity: ``input_hash`` is a hash of the consulted members' judgment keys,
``decoding`` the cascade's definition and thresholds (a changed cascade is a new judgment, never a silent
replacement).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from scijudge.errors import InputError
from scijudge.metrics.selective.api import CASCADE_PREFIX, ESCALATED, CascadeResult, digest
from scijudge.records import JudgeResult


def _num(value: Any) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def cascade_results(result: CascadeResult) -> list[JudgeResult]:
    """One ``JudgeResult`` per unit of the cascade."""
    thresholds = {(r["judge"], r["member"]): (None if pd.isna(r["threshold"]) else [r["threshold"], r["tie"]])
                  for r in result.thresholds.to_dict("records")}
    out: list[JudgeResult] = []
    for row in result.rows.to_dict("records"):
        judge, rec, seen = row["judge"], row["_rec"], row["_consulted"]
        decoding = json.dumps({**result.definition, "thresholds": {m: thresholds.get((judge, m))
                                                                   for m in result.definition["members"]}},
                              sort_keys=True, separators=(",", ":"))
        base = rec if rec is not None else (row.get("_last") or {})
        keys = sorted(str(r["key"]) for r in seen if r.get("key"))
        info = {"name": result.name, "member": row["member"],
                "consulted": [{"member": r["member"], "key": r.get("key", ""), "status": r["status"],
                               "confidence": _num(r["confidence"]), "score": _num(r["score"])} for r in seen]}
        costs = [_num(r.get("cost")) for r in seen]
        common: dict[str, Any] = dict(
            item_id=str(row["item_id"]), judge=str(judge), part=str(row["part"]), family=str(base.get("family") or
                                                                                             "cascade"),
            spec_hash=str(base.get("spec_hash") or "cascade"), model=CASCADE_PREFIX + result.name, endpoint="",
            input_hash=digest(keys) if keys else "", decoding=decoding,
            tokens_in=int(sum(int(r.get("tokens_in") or 0) for r in seen)),
            tokens_out=int(sum(int(r.get("tokens_out") or 0) for r in seen)),
            cost=math.fsum(c for c in costs if c is not None) if costs and None not in costs else None)
        if rec is None:
            out.append(JudgeResult(**common, status="abstained", reason=ESCALATED, result={"cascade": info}))
            continue
        probs = rec.get("probs") if isinstance(rec.get("probs"), dict) else None
        verdict = rec.get("verdict")
        out.append(JudgeResult(**common, status="ok", score=_num(rec.get("score")),
                               verdict=None if verdict is None or (isinstance(verdict, float) and math.isnan(verdict))
                               else str(verdict),
                               confidence=_num(rec["confidence"]), probs=probs, rationale=rec.get("rationale"),
                               result={"cascade": info}))
    return out


def write_cascade(out: str | Path, result: CascadeResult, *, runs: Any = None, labels: Any = None,
                  scales: dict[str, Any] | None = None) -> Path:
    """Record the cascade's judgments into ``out`` and describe the cascade in the store's meta."""
    from scijudge.run.store import Run

    path = Path(out)
    paths = [] if runs is None or isinstance(runs, pd.DataFrame) else (
        [runs] if isinstance(runs, (str, Path)) else list(runs))
    if any(Path(p).resolve() == path.resolve() for p in paths):
        raise InputError("the cascade store must not be one of the runs it reads", file=path, field="out")
    if labels is not None and isinstance(labels, (str, Path)) and Path(labels).resolve() == path.resolve():
        raise InputError("the cascade store must not be the labels file", file=path, field="out")
    results = cascade_results(result)
    with Run(path) as store:
        store.claim_writer()
        store.record_many(r.model_dump(mode="json") for r in results)
        meta = store.meta()
        cascades = dict(meta.get("cascades") or {})
        cascades[result.name] = {**result.definition, "model": CASCADE_PREFIX + result.name,
                                 "runs": [str(p) for p in paths],
                                 **({"labels": str(labels)} if isinstance(labels, (str, Path)) else {}),
                                 "thresholds": json.loads(result.thresholds.to_json(orient="records"))}
        store.set_meta(scales={**(meta.get("scales") or {}), **(scales or {})}, cascades=cascades)
    return path


QUEUE_DESIGN = "cascade-escalation"
"""The ``design`` of an escalation queue: ``read_picks`` refuses it as a sampling design."""


def escalated_picks(result: CascadeResult, columns: Sequence[str], *, seed: int = 0) -> pd.DataFrame:
    """The escalation queue: one row per escalated (item, judge, part) -- only the judges no member trusted for
    that item -- in ``select-labels``' picks columns plus ``judge`` and ``part``, with ``pi`` 1, ``picked`` true,
    ``design`` ``cascade-escalation`` (a queue for the labellers, never a sampling design: ``estimate --picks``
    refuses it), ``stratum`` the judge and ``uncertainty`` 1 - the last consulted member's confidence.
    ``columns``: ``scijudge.estimation.select.PICK_COLUMNS`` (estimation sits above metrics, so the caller passes
    them)."""
    esc = result.decisions[~result.decisions["trusted"]].sort_values(["item_id", "judge", "part"], kind="stable")
    rows = [{"item_id": str(r["item_id"]), "pi": 1.0, "picked": True, "stratum": str(r["judge"]),
             "uncertainty": 1.0 - float(r["confidence"]) if not pd.isna(r["confidence"]) else math.nan,
             "uncertainty_source": "cascade", "design": QUEUE_DESIGN, "budget": 0, "seed": seed, "tau": math.nan,
             "judge": str(r["judge"]), "part": str(r["part"])} for r in esc.to_dict("records")]
    frame = pd.DataFrame(rows, columns=[*columns, "judge", "part"])
    frame["budget"] = len(frame)
    return frame


def write_picks(out: str | Path, frame: pd.DataFrame) -> Path:
    from scijudge._files import atomic_output

    path = Path(out)
    with atomic_output(path, newline="") as handle:
        frame.to_csv(handle, index=False)
    return path
