"""``cascade(...)``: selective judging with a guaranteed agreement with humans, over stored judgments (issue 37).

For each judge (rubric) the members are tried in order, cheapest first. Member k sees the units no earlier member
trusted; its threshold is chosen by fixed-sequence testing (``scijudge.metrics.selective.fst``) on the labelled
units it sees, at level ``risk / K`` (K: the members covering the judge, a Bonferroni split fixed in advance);
it trusts the units whose confidence reaches the threshold and passes the rest on. What no member trusts is
escalated to humans.

Guarantee (per judge): each member's test errs with probability <= risk/K, so with probability >= 1 - risk no
member's trusted share has agreement below ``target``, and then neither has their union: the agreement of all
trusted judgments of the cascade is >= ``target``. It holds for new units drawn like the labelled ones.

Confidence is the probability the judge put on the level it gave (``probs``, see
``scijudge.run.cascade.confidence_of``); agreement is ``|score - human| <= tolerance`` with ``human`` the mean of
the raters' scores, or, for verdicts, the judge's verdict equal to the raters' strict-majority verdict.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from scijudge.errors import InputError
from scijudge.metrics.jury.api import read_runs
from scijudge.metrics.jury.members import Member, members_of_judge, select_members
from scijudge.metrics.selective.fst import cascade_core, clopper_pearson
from scijudge.run.cascade import Threshold, confidence_of, tie_key

CASCADE_PREFIX = "cascade:"
ESCALATED = "escalated"
DECISION_COLUMNS = ("item_id", "judge", "part", "member", "score", "confidence", "trusted")
THRESHOLD_COLUMNS = ("judge", "member", "position", "threshold", "tie", "reason", "risk_share", "n_reached",
                     "n_trusted", "coverage", "n_calibration", "n_kept", "n_agree", "agreement", "ci_low", "ci_high",
                     "p_value")
RISK_SPLIT = "bonferroni"


@dataclass
class CascadeResult:
    """A cascade's outcome: one decision per (item, judge, part), the thresholds and the guarantee."""

    name: str
    definition: dict[str, Any]
    decisions: pd.DataFrame
    thresholds: pd.DataFrame
    members: list[dict[str, Any]]
    rows: pd.DataFrame = field(repr=False, default_factory=pd.DataFrame)
    notes: list[str] = field(default_factory=list)

    @property
    def guarantee(self) -> str:
        d = self.definition
        return (f"with probability >= {1 - d['risk']:.3g}, the trusted judgments of each judge agree with humans "
                f"(|score - human| <= {d['tolerance']:g}) on >= {d['target']:.3g} of the items, for items drawn like "
                f"the labelled ones (risk {d['risk']:g} split equally over each judge's members, Bonferroni)")

    def coverage(self) -> pd.DataFrame:
        """Per judge and member: the share of all units it decided (``member`` '' = escalated)."""
        d = self.decisions
        share = d.groupby(["judge", "member"]).size().rename("n").reset_index()
        share["share"] = share["n"] / share.groupby("judge")["n"].transform("sum")
        return share

    def save(self, path: str | Path) -> Path:
        """Write the thresholds file ``scijudge judge --cascade`` reads (written to a temp file, then renamed)."""
        out = Path(path)
        by_member: dict[str, dict[str, Any]] = {}
        for row in self.thresholds.to_dict("records"):
            thr = None if pd.isna(row["threshold"]) else Threshold(float(row["threshold"]), float(row["tie"]))
            by_member.setdefault(row["member"], {})[row["judge"]] = None if thr is None else thr.as_dict()
        doc = {"format": "scijudge-cascade/1", "name": self.name, **self.definition,
               "members": [{**m, "thresholds": by_member.get(m["member"], {})} for m in self.members]}
        from scijudge._files import write_text

        write_text(out, json.dumps(doc, indent=2, sort_keys=False) + "\n")
        return out


def label_targets(labels: Any) -> pd.DataFrame:
    """Labels (path, HumanLabels or frame) -> per (item_id, judge, part): the raters' mean score ``h_score``, their
    strict-majority verdict ``h_verdict`` (None on a tie) and ``n_raters``."""
    from scijudge.labels import labels_frame_of

    frame = labels_frame_of(labels)
    for column in ("item_id", "judge"):
        if column not in frame.columns:
            raise InputError("labels lack a column", field=column)
    for column in ("part", "verdict", "score"):
        if column not in frame.columns:
            frame[column] = "" if column == "part" else None
    frame["part"] = frame["part"].astype(object).where(frame["part"].notna(), "").astype(str)
    frame["item_id"] = frame["item_id"].astype(str)
    frame["score"] = pd.to_numeric(frame["score"], errors="coerce")
    out = []
    for (item, judge, part), g in frame.groupby(["item_id", "judge", "part"], sort=True):
        scores = g["score"].dropna()
        verdicts = g["verdict"].dropna().astype(str)
        top = None
        if len(verdicts):
            counts = verdicts.value_counts()
            top = str(counts.index[0]) if 2 * int(counts.iloc[0]) > len(verdicts) else None
        out.append((item, judge, part, float(scores.mean()) if len(scores) else math.nan, top, len(g)))
    return pd.DataFrame(out, columns=["item_id", "judge", "part", "h_score", "h_verdict", "n_raters"])


def _agreement(score: float, verdict: Any, h_score: float, h_verdict: Any, tolerance: float) -> float:
    """1.0 / 0.0 when the judgment can be compared with its label, NaN when unlabelled."""
    if not math.isnan(h_score) and score is not None and not math.isnan(score):
        return float(abs(score - h_score) <= tolerance + 1e-9)
    if verdict is not None and h_verdict is not None:
        return float(str(verdict) == str(h_verdict))
    return math.nan


def _decoding_of(rows: pd.DataFrame) -> dict[str, Any]:
    """How a member's judgments were made (so ``judge --cascade`` makes new ones the same way)."""
    texts = rows["decoding"].astype(str) if "decoding" in rows else pd.Series([], dtype=str)
    common = texts.mode().iloc[0] if len(texts) and texts.str.len().gt(0).any() else ""
    try:
        settings = json.loads(common) if common else {}
    except ValueError:
        settings = {}
    if settings.get("mode") == "decision":
        return {"mode": "decision", "decision_score": settings.get("decision_score", "expected"),
                "rating_probs": False}
    return {"mode": "generate", "decision_score": "expected", "rating_probs": True}


def cascade(judgments: Any, labels: Any, *, members: Sequence[str | Member], target: float, risk: float = 0.1,
            tolerance: float = 0.0, seed: int = 0, name: str = "cascade") -> CascadeResult:
    """Choose each member's confidence threshold on the labelled items and decide every stored unit.

    Args:
        judgments: a run-store frame (``Run.to_pandas()`` rows, several models), or run store paths.
        labels: human labels (path, HumanLabels or a labels frame); several raters per item -> their mean.
        members: the contenders in order, cheapest first, written as ``jury --member`` writes them
            (``MODEL``, ``MODEL@ENDPOINT``, either with ``#JUDGE``); each needs stored ``probs``.
        target: the agreement to guarantee on the trusted judgments, in (0, 1).
        risk: the probability the guarantee may fail, in (0, 1), split equally over each judge's members.
        tolerance: agreement is ``|score - human| <= tolerance`` (0: exact match).
        seed: orders judgments of equal confidence (a seeded hash of the unit), so a threshold can keep part of
            a tie; the same seed orders them the same way at judge time.

    Decision rule: member k (of K) of a judge sees the units earlier members did not trust; on its labelled ones,
    from the most confident down, starting at the candidate that keeps 10% of them (or the fewest, n0, that a
    test can reject with: target**n0 <= risk/K), it tests H0 "agreement of the kept < target" with the exact
    binomial p-value P(Bin(n, target) >= agreeing) at level risk/K and stops at the first non-rejection; its
    threshold is the last rejected candidate (none if the first is not rejected: it then trusts nothing). A unit
    is trusted when (confidence, tie key) >= the threshold; the first member that trusts it decides it.
    """
    if not 0 < target < 1:
        raise InputError(f"target must be between 0 and 1, got {target}", field="target")
    if not 0 < risk < 1:
        raise InputError(f"risk must be between 0 and 1, got {risk}", field="risk")
    if not (tolerance >= 0 and math.isfinite(tolerance)):
        raise InputError(f"tolerance must be >= 0, got {tolerance}", field="tolerance")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._\-]*", name or ""):
        raise InputError(f"cascade name {name!r}: use letters, digits, '.', '_' or '-'", field="name")
    frame, _ = read_runs(judgments)
    sel, specs = select_members(frame, members, minimum=1)
    if "probs" not in sel:
        sel["probs"] = None
    targets = label_targets(labels).set_index(["item_id", "judge", "part"])
    ok = (sel["status"] == "ok").to_numpy()
    sel["confidence"] = [confidence_of(s, v, p) if good else None
                         for s, v, p, good in zip(sel["score"], sel["verdict"], sel["probs"], ok)]
    sel["confidence"] = pd.to_numeric(sel["confidence"], errors="coerce").astype(float)
    for spec in specs:
        mine = sel[(sel["member"] == spec.label) & ok]
        if len(mine) and mine["confidence"].isna().all():
            raise InputError(f"member {spec.label!r} has no rating probabilities: judge it with --mode decision or "
                             "--rating-probs (or use a majority or dawid-skene jury, whose rows carry vote shares)",
                             field="member")
    sel["tie"] = [tie_key(seed, i, j, p) for i, j, p in zip(sel["item_id"], sel["judge"], sel["part"])]
    lab = targets.reindex(pd.MultiIndex.from_arrays([sel["item_id"], sel["judge"], sel["part"]]))
    sel["agree"] = [_agreement(s, v, hs, hv, tolerance) for s, v, hs, hv in
                    zip(sel["score"], sel["verdict"], lab["h_score"].to_numpy(float), lab["h_verdict"].to_numpy(object))]
    definition = {"members": [s.label for s in specs], "target": float(target), "risk": float(risk),
                  "tolerance": float(tolerance), "seed": int(seed), "risk_split": RISK_SPLIT}
    decisions: list[dict[str, Any]] = []
    thresholds: list[dict[str, Any]] = []
    notes: list[str] = []
    for judge in sorted(sel["judge"].unique()):
        _judge_cascade(sel[sel["judge"] == judge], judge, members_of_judge(specs, judge), definition, decisions,
                       thresholds, notes)
    dec = pd.DataFrame(decisions)
    result = CascadeResult(name, definition, dec[[*DECISION_COLUMNS, "labelled", "agree"]],
                           pd.DataFrame(thresholds, columns=list(THRESHOLD_COLUMNS)),
                           [{"member": s.label, "model": s.model,
                             "endpoint": s.endpoint if s.endpoint is not None else _endpoint(sel, s.label),
                             **_decoding_of(sel[sel["member"] == s.label])} for s in specs],
                           rows=dec, notes=notes)
    small = result.thresholds[(result.thresholds["n_calibration"] < 30) & (result.thresholds["n_reached"] > 0)]
    if len(small):
        where = ", ".join(f"{r['judge']} / {r['member']} ({r['n_calibration']})" for r in small.to_dict("records"))
        notes.append(f"fewer than 30 labelled calibration items: {where}; their thresholds and agreement intervals "
                     "are wide")
    return result


def _endpoint(sel: pd.DataFrame, label: str) -> str:
    found = sorted(set(sel.loc[sel["member"] == label, "endpoint"]))
    return found[0] if found else ""


def _judge_cascade(rows: pd.DataFrame, judge: str, order: list[str], definition: dict[str, Any],
                   decisions: list[dict[str, Any]], thresholds: list[dict[str, Any]], notes: list[str]) -> None:
    """The cascade of one judge (``cascade_core`` on its members' arrays), then one decision per unit."""
    units = sorted(set(zip(rows["item_id"], rows["part"])))
    index = pd.MultiIndex.from_tuples(units, names=["item_id", "part"])
    by_member = [rows[rows["member"] == m].set_index(["item_id", "part"]).reindex(index) for m in order]
    usable = [(g["status"] == "ok").to_numpy() & g["confidence"].notna().to_numpy() for g in by_member]
    conf = np.array([np.where(u, g["confidence"].to_numpy(float), np.nan) for g, u in zip(by_member, usable)])
    agree = np.array([np.where(u, g["agree"].to_numpy(float), np.nan) for g, u in zip(by_member, usable)])
    tie = np.nanmax(np.array([g["tie"].to_numpy(float) for g in by_member]), axis=0)
    core = cascade_core(conf, tie, agree, target=definition["target"], risk=definition["risk"])
    delta = definition["risk"] / len(order)
    decided = core.decided
    for k, (member, fst, n_reached) in enumerate(zip(order, core.tests, core.reached)):
        thr = fst.threshold
        n_trusted = int((decided == k).sum())
        lo, hi = clopper_pearson(fst.n_agree, fst.n_kept) if thr is not None else (math.nan, math.nan)
        thresholds.append({
            "judge": judge, "member": member, "position": k + 1,
            "threshold": thr[0] if thr else math.nan, "tie": thr[1] if thr else math.nan,
            "reason": "" if thr else fst.reason, "risk_share": delta, "n_reached": n_reached,
            "n_trusted": n_trusted, "coverage": n_trusted / len(units) if units else math.nan,
            "n_calibration": fst.n_calibration, "n_kept": fst.n_kept if thr else 0,
            "n_agree": fst.n_agree if thr else 0, "agreement": fst.agreement if thr else math.nan,
            "ci_low": lo, "ci_high": hi, "p_value": fst.p_value})
    records = [g.to_dict("records") for g in by_member]
    tested = [t.threshold is not None for t in core.tests]
    for u, unit in enumerate(units):
        d = int(decided[u])
        stop = d if d >= 0 else len(order) - 1
        seen = [{**records[k][u], "member": order[k]} for k in range(stop + 1)
                if tested[k] and isinstance(records[k][u].get("status"), str)]
        rec = {**records[d][u], "member": order[d]} if d >= 0 else None
        judged = [{**records[k][u], "member": order[k]} for k in range(len(order))
                  if isinstance(records[k][u].get("status"), str)]
        last = rec if rec is not None else (seen[-1] if seen else (judged[-1] if judged else None))
        costs = [float(r["cost"]) for r in seen if r.get("cost") is not None and not pd.isna(r.get("cost"))]
        final = records[-1][u]
        last_cost = final.get("cost") if isinstance(final.get("status"), str) else None
        decisions.append({
            "item_id": unit[0], "judge": judge, "part": unit[1], "member": order[d] if d >= 0 else "",
            "score": _float(last["score"]) if last is not None else math.nan,
            "confidence": _float(last["confidence"]) if last is not None else math.nan,
            "trusted": d >= 0, "labelled": bool(last is not None and not pd.isna(last["agree"])),
            "agree": _float(last["agree"]) if last is not None else math.nan,
            "cost": math.fsum(costs) if len(costs) == len(seen) else math.nan, "calls": len(seen),
            "last_cost": _float(last_cost), "last_member": order[-1], "_rec": rec, "_consulted": seen, "_last": last})


def _float(value: Any) -> float:
    return math.nan if value is None or pd.isna(value) else float(value)


def digest(values: Sequence[str], n: int = 24) -> str:
    return hashlib.sha256("\x1f".join(values).encode()).hexdigest()[:n]


def cost_per_item(result: CascadeResult) -> pd.DataFrame:
    """Per judge: judgments made and cost per unit by the cascade against always judging with the last member
    (``cascade_cost`` / ``last_cost`` NaN where some judgment's cost is unknown)."""
    out = []
    for judge, g in result.rows.groupby("judge", sort=True):
        out.append({"judge": judge, "last_member": g["last_member"].iloc[0], "units": len(g), "cascade_calls": float(g["calls"].mean()),
                    "cascade_cost": float(g["cost"].mean()) if g["cost"].notna().all() else math.nan,
                    "last_cost": float(g["last_cost"].mean()) if g["last_cost"].notna().all() else math.nan})
    return pd.DataFrame(out, columns=["judge", "last_member", "units", "cascade_calls", "cascade_cost", "last_cost"])


def load_thresholds(path: str | Path) -> dict[str, Any]:
    """A thresholds file written by ``scijudge cascade --save``: its members in order, each with ``model``,
    ``endpoint``, ``mode``, ``decision_score``, ``rating_probs`` and ``thresholds`` ({judge: Threshold | None});
    errors name the file and the field."""
    file = Path(path)
    try:
        doc = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError("thresholds file not found", file=file) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"not a JSON thresholds file ({exc})", file=file) from None
    if not isinstance(doc, dict) or doc.get("format") != "scijudge-cascade/1":
        raise InputError("not a thresholds file of `scijudge cascade --save` (format scijudge-cascade/1)", file=file,
                         field="format")
    members = doc.get("members")
    if not isinstance(members, list) or not members:
        raise InputError("the thresholds file names no member", file=file, field="members")
    out = []
    for i, m in enumerate(members):
        where = f"members[{i}]"
        if not isinstance(m, dict) or not isinstance(m.get("model"), str) or not m["model"]:
            raise InputError("a member needs a model", file=file, field=f"{where}.model")
        if m["model"].startswith(("jury:", CASCADE_PREFIX)):
            raise InputError(f"member {m['model']!r} is a view over stored judgments, not a model to call: a cascade "
                             "judged with --cascade needs models as members", file=file, field=f"{where}.model")
        if m.get("mode", "generate") not in ("generate", "decision"):
            raise InputError(f"mode must be generate or decision, got {m.get('mode')!r}", file=file,
                             field=f"{where}.mode")
        raw = m.get("thresholds") or {}
        if not isinstance(raw, dict):
            raise InputError("thresholds must map judge names to {value, tie} or null", file=file,
                             field=f"{where}.thresholds")
        try:
            thresholds = {str(j): Threshold.of(t) for j, t in raw.items()}
        except (KeyError, TypeError, ValueError, AttributeError):
            raise InputError("a threshold must be {\"value\": number, \"tie\": number} or null", file=file,
                             field=f"{where}.thresholds") from None
        out.append({"member": str(m.get("member") or m["model"]), "model": m["model"],
                    "endpoint": str(m.get("endpoint") or ""), "mode": m.get("mode", "generate"),
                    "decision_score": str(m.get("decision_score") or "expected"),
                    "rating_probs": bool(m.get("rating_probs", m.get("mode", "generate") == "generate")),
                    "thresholds": thresholds})
    try:
        seed = int(doc.get("seed", 0))
    except (TypeError, ValueError):
        raise InputError("seed must be an integer", file=file, field="seed") from None
    return {"name": str(doc.get("name") or ""), "seed": seed, "members": out}
