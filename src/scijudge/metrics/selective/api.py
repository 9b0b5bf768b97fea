"""``cascade(...)``: selective judging with a guaranteed agreement with humans, over stored judgments (issues 37, 50).

For each judge (rubric) the members are tried in order, cheapest first: a unit is decided by the first member
whose confidence reaches its threshold, and escalated to humans when none does. The thresholds are chosen on the
labelled units by fixed-sequence testing with exact binomial p-values (``scijudge.metrics.selective.fst``):

* ``split="whole"`` (default): ONE test over a path of threshold vectors fixed before the labels are seen --
  every member's threshold lowered together along a common confidence scale -- at the full ``risk``, on all
  trusted judgments of the cascade together. Guarantee (per judge): with probability >= 1 - risk, the trusted
  judgments of the cascade, all members together, agree with humans on >= ``target`` of the units.
* ``split="bonferroni"``: member k tested at ``risk / K`` on the labelled units no earlier member trusted;
  guarantees each member's trusted share separately (and so their union), at a cost in coverage.

Both hold for new units drawn like the labelled ones. Confidence (``confidence=``): the probability the
judgment's ``probs`` put on the level it gave (a decision probability, or a jury's vote share), or the stored
``confidence`` column; ``auto`` takes probs where a judgment has them, else the stored column. With
``calibrated=True`` (the default) each member's confidence is mapped to its agreement probability by isotonic
regression fitted on a share (``fit_share``, chosen by a fixed hash of the unit) of the labelled units, and the
test uses only the other units' labels (sample splitting keeps the guarantee); the fit also predicts where the
test's walk starts. Thresholds stay on each member's own confidence, so ``judge --cascade`` applies them
unchanged. Ties are tested as whole groups and nothing is seeded: the result is the same for every seed.
Agreement is ``|score - human| <= tolerance`` with ``human`` the mean of the raters' scores, or, for verdicts,
the judge's verdict equal to the raters' strict-majority verdict (a rater tie or no label: not labelled).
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
from scijudge.metrics.frames import Judgments
from scijudge.metrics.jury.members import Member, members_of_judge, select_members
from scijudge.metrics.selective.fst import SPLITS, cascade_core, clopper_pearson
from scijudge.records import decoding_settings
from scijudge.run.cascade import Threshold, unit_confidence
from scijudge.vocab import few_units_note

CASCADE_PREFIX = "cascade:"
ESCALATED = "escalated"
DECISION_COLUMNS = ("item_id", "judge", "part", "member", "score", "confidence", "trusted")
THRESHOLD_COLUMNS = ("judge", "member", "position", "threshold", "tie", "reason", "risk_share", "n_reached",
                     "n_trusted", "coverage", "n_calibration", "n_kept", "n_agree", "agreement", "ci_low", "ci_high",
                     "p_value", "split", "calibrated")
CONFIDENCE_SOURCES = ("auto", "probs", "stored")
JOINT_COLUMNS = ("judge", "scale_threshold", "n_calibration", "n_kept", "n_agree", "agreement", "ci_low", "ci_high",
                 "p_value", "reason")


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
    joint: pd.DataFrame = field(default_factory=pd.DataFrame)
    """Under ``split="whole"``, per judge: the one test of all trusted judgments together (common-scale
    threshold, kept and agreeing calibration units, interval, p-value)."""

    @property
    def guarantee(self) -> str:
        d = self.definition
        how = ("one fixed-sequence test over the whole cascade at the full risk: the guarantee is on all trusted "
               "judgments together" if d.get("risk_split", "whole") == "whole" else
               f"risk {d['risk']:g} split equally over each judge's members, Bonferroni: it holds for each member's "
               "trusted share too")
        return (f"with probability >= {1 - d['risk']:.3g}, the trusted judgments of each judge agree with humans "
                f"(|score - human| <= {d['tolerance']:g}) on >= {d['target']:.3g} of the items, for items drawn like "
                f"the labelled ones ({how})")

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


def _missing(value: Any) -> bool:
    """None, NaN or pandas' NA: a reindexed unlabelled row carries NaN where a label frame has None."""
    return value is None or (not isinstance(value, str) and bool(pd.isna(value)))


def _agreement(score: Any, verdict: Any, h_score: Any, h_verdict: Any, tolerance: float) -> float:
    """1.0 / 0.0 when the judgment can be compared with its label, NaN when unlabelled (no label, or the raters'
    verdicts tie)."""
    if not _missing(h_score) and not _missing(score):
        return float(abs(float(score) - float(h_score)) <= tolerance + 1e-9)
    if not _missing(verdict) and not _missing(h_verdict):  # calibrate lower-cases verdicts; a labels file may not
        return float(str(verdict).strip().lower() == str(h_verdict).strip().lower())
    return math.nan


def _decoding_of(rows: pd.DataFrame) -> dict[str, Any]:
    """How a member's judgments were made (so ``judge --cascade`` makes new ones the same way)."""
    texts = rows["decoding"].astype(str) if "decoding" in rows else pd.Series([], dtype=str)
    common = texts.mode().iloc[0] if len(texts) and texts.str.len().gt(0).any() else ""
    settings = decoding_settings(common)
    if settings.get("mode") == "decision":
        return {"mode": "decision", "decision_score": settings.get("decision_score", "expected"),
                "rating_probs": False}
    return {"mode": "generate", "decision_score": "expected", "rating_probs": True}


def cascade(judgments: Any, labels: Any, *, members: Sequence[str | Member], target: float, risk: float = 0.1,
            tolerance: float = 0.0, seed: int = 0, name: str = "cascade", split: str = "whole",
            confidence: str = "auto", calibrated: bool = True, fit_share: float = 0.5) -> CascadeResult:
    """Choose each member's confidence threshold on the labelled items and decide every stored unit.

    Args:
        judgments: a run-store frame (``Run.to_pandas()`` rows, several models), or run store paths.
        labels: human labels (path, HumanLabels or a labels frame); several raters per item -> their mean.
        members: the contenders in order, cheapest first, written as ``jury --member`` writes them
            (``MODEL``, ``MODEL@ENDPOINT``, either with ``#JUDGE``); each needs a confidence (below).
        target: the agreement to guarantee on the trusted judgments, in (0, 1).
        risk: the probability the guarantee may fail, in (0, 1).
        tolerance: agreement is ``|score - human| <= tolerance`` (0: exact match).
        seed: recorded in the definition only: ties are tested as whole groups and the calibration split is a
            fixed hash of the unit, so no seed changes the result.
        split: ``whole`` (one test over the whole cascade at the full risk; the guarantee is on all trusted
            judgments together) or ``bonferroni`` (risk / K per member; the guarantee holds per member too).
        confidence: ``auto`` (probs, else the stored ``confidence`` column), ``probs`` or ``stored``.
        calibrated: map each member's confidence to its agreement probability (isotonic regression fitted on
            ``fit_share`` of the labelled units; the test uses only the rest). Default on: in the simulation of
            ``benchmarks/bench_cascade.py`` it kept 0.83 of the items against 0.10 on raw confidences.
            Without ``MIN_FIT`` fitting units for any member the raw confidences are tested on every label.

    Decision rule: module docstring and ``scijudge.metrics.selective.fst``.
    """
    _check(target, risk, tolerance, name, split, confidence, fit_share)
    sel, specs = select_members(Judgments.read(judgments).frame, members, minimum=1)
    sel = _with_confidence(sel, specs, confidence)
    targets = label_targets(labels).set_index(["item_id", "judge", "part"])
    lab = targets.reindex(pd.MultiIndex.from_arrays([sel["item_id"], sel["judge"], sel["part"]]))
    sel["agree"] = [_agreement(s, v, hs, hv, tolerance) for s, v, hs, hv in
                    zip(sel["score"], sel["verdict"], lab["h_score"].to_numpy(float), lab["h_verdict"].to_numpy(object))]
    definition = {"members": [s.label for s in specs], "target": float(target), "risk": float(risk),
                  "tolerance": float(tolerance), "seed": int(seed), "risk_split": split, "confidence": confidence,
                  "calibrated": bool(calibrated), **({"fit_share": float(fit_share)} if calibrated else {})}
    decisions: list[dict[str, Any]] = []
    thresholds: list[dict[str, Any]] = []
    joints: list[dict[str, Any]] = []
    notes: list[str] = []
    for judge in sorted(sel["judge"].unique()):
        _judge_cascade(sel[sel["judge"] == judge], judge, members_of_judge(specs, judge), definition, decisions,
                       thresholds, joints)
    dec = pd.DataFrame(decisions)
    result = CascadeResult(name, definition, dec[[*DECISION_COLUMNS, "labelled", "agree"]],
                           pd.DataFrame(thresholds, columns=list(THRESHOLD_COLUMNS)),
                           [{"member": s.label, "model": s.model,
                             "endpoint": s.endpoint if s.endpoint is not None else _endpoint(sel, s.label),
                             **_decoding_of(sel[sel["member"] == s.label]),
                             "confidence": _source_of(sel[sel["member"] == s.label], confidence)} for s in specs],
                           rows=dec, notes=notes, joint=pd.DataFrame(joints, columns=list(JOINT_COLUMNS)))
    reached = result.thresholds[result.thresholds["n_reached"] > 0]
    notes.extend(few_units_note([(f"{r['judge']} / {r['member']}", r["n_calibration"]) for r in reached.to_dict("records")],
                                "labelled calibration items", "their thresholds and agreement intervals are wide"))
    return result


def _check(target: float, risk: float, tolerance: float, name: str, split: str, confidence: str,
           fit_share: float) -> None:
    if not 0 < target < 1:
        raise InputError(f"target must be between 0 and 1, got {target}", field="target")
    if not 0 < risk < 1:
        raise InputError(f"risk must be between 0 and 1, got {risk}", field="risk")
    if not (tolerance >= 0 and math.isfinite(tolerance)):
        raise InputError(f"tolerance must be >= 0, got {tolerance}", field="tolerance")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._\-]*", name or ""):
        raise InputError(f"cascade name {name!r}: use letters, digits, '.', '_' or '-'", field="name")
    if split not in SPLITS:
        raise InputError(f"split must be one of {', '.join(SPLITS)}, got {split!r}", field="split")
    if confidence not in CONFIDENCE_SOURCES:
        raise InputError(f"confidence must be one of {', '.join(CONFIDENCE_SOURCES)}, got {confidence!r}",
                         field="confidence")
    if not 0 < fit_share < 1:
        raise InputError(f"fit_share must be between 0 and 1, got {fit_share}", field="fit_share")


def _with_confidence(sel: pd.DataFrame, specs: Sequence[Member], source: str) -> pd.DataFrame:
    """``confidence`` of every ok judgment from its source (``unit_confidence``); a member with none is refused."""
    for column in ("probs", "confidence"):
        if column not in sel:
            sel[column] = None
    ok = (sel["status"] == "ok").to_numpy()
    sel["confidence"] = pd.to_numeric(pd.Series(
        [unit_confidence(s, v, p, c, source) if good else None
         for s, v, p, c, good in zip(sel["score"], sel["verdict"], sel["probs"], sel["confidence"], ok)],
        index=sel.index, dtype=object), errors="coerce").astype(float)
    for spec in specs:
        mine = sel[(sel["member"] == spec.label) & ok]
        if len(mine) and mine["confidence"].isna().all():
            what = {"probs": "rating probabilities", "stored": "stored confidence",
                    "auto": "rating probabilities or stored confidence"}[source]
            raise InputError(f"member {spec.label!r} has no {what}: judge it with --mode decision or --rating-probs, "
                             "use a majority or dawid-skene jury (whose rows carry vote shares), or a store with a "
                             "confidence column", field="member")
    return sel


def _source_of(rows: pd.DataFrame, source: str) -> str:
    """Where a member's confidence came from, for judge time: ``probs`` or ``stored`` (``auto`` resolved)."""
    if source != "auto":
        return source
    has = rows["probs"].map(lambda p: isinstance(p, dict) and bool(p)) if "probs" in rows else pd.Series([False])
    return "probs" if bool(has.any()) else "stored"


def _endpoint(sel: pd.DataFrame, label: str) -> str:
    found = sorted(set(sel.loc[sel["member"] == label, "endpoint"]))
    return found[0] if found else ""


def _judge_cascade(rows: pd.DataFrame, judge: str, order: list[str], definition: dict[str, Any],
                   decisions: list[dict[str, Any]], thresholds: list[dict[str, Any]],
                   joints: list[dict[str, Any]]) -> None:
    """The cascade of one judge (``cascade_core`` on its members' arrays), then one decision per unit."""
    units = sorted(set(zip(rows["item_id"], rows["part"])))
    index = pd.MultiIndex.from_tuples(units, names=["item_id", "part"])
    by_member = [rows[rows["member"] == m].set_index(["item_id", "part"]).reindex(index) for m in order]
    usable = [(g["status"] == "ok").to_numpy() & g["confidence"].notna().to_numpy() for g in by_member]
    conf = np.array([np.where(u, g["confidence"].to_numpy(float), np.nan) for g, u in zip(by_member, usable)])
    agree = np.array([np.where(u, g["agree"].to_numpy(float), np.nan) for g, u in zip(by_member, usable)])
    scale, test = None, None
    if definition["calibrated"]:
        from scijudge.metrics.selective.scale import calibrated_scale, fit_units

        fit = fit_units([(str(i), judge, str(p)) for i, p in units], definition["fit_share"])
        scale = calibrated_scale(conf, agree, fit)
        test = None if scale is None else ~fit
    split = definition["risk_split"]
    core = cascade_core(conf, agree, target=definition["target"], risk=definition["risk"], split=split,
                        scale=scale, test=test)
    share = definition["risk"] / len(order) if split == "bonferroni" else definition["risk"]
    decided = core.decided
    for k, (member, fst, n_reached) in enumerate(zip(order, core.tests, core.reached)):
        thr = fst.threshold
        n_trusted = int((decided == k).sum())
        lo, hi = clopper_pearson(fst.n_agree, fst.n_kept) if thr is not None else (math.nan, math.nan)
        thresholds.append({
            "judge": judge, "member": member, "position": k + 1,
            "threshold": thr[0] if thr else math.nan, "tie": thr[1] if thr else math.nan,
            "reason": "" if thr else fst.reason, "risk_share": share, "n_reached": n_reached,
            "n_trusted": n_trusted, "coverage": n_trusted / len(units) if units else math.nan,
            "n_calibration": fst.n_calibration, "n_kept": fst.n_kept if thr else 0,
            "n_agree": fst.n_agree if thr else 0, "agreement": fst.agreement if thr else math.nan,
            "ci_low": lo, "ci_high": hi, "p_value": fst.p_value, "split": split, "calibrated": scale is not None})
    if core.joint is not None:
        j = core.joint
        lo, hi = clopper_pearson(j.n_agree, j.n_kept) if j.threshold else (math.nan, math.nan)
        joints.append({"judge": judge, "scale_threshold": j.threshold[0] if j.threshold else math.nan,
                       "n_calibration": j.n_calibration, "n_kept": j.n_kept, "n_agree": j.n_agree,
                       "agreement": j.agreement, "ci_low": lo, "ci_high": hi, "p_value": j.p_value,
                       "reason": j.reason})
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
        out.append({"judge": judge, "last_member": g["last_member"].iloc[0], "units": len(g),
                    "cascade_calls": float(g["calls"].mean()), "escalated": float((g["member"] == "").mean()),
                    "cascade_cost": float(g["cost"].mean()) if g["cost"].notna().all() else math.nan,
                    "last_cost": float(g["last_cost"].mean()) if g["last_cost"].notna().all() else math.nan})
    return pd.DataFrame(out, columns=["judge", "last_member", "units", "cascade_calls", "escalated", "cascade_cost",
                                      "last_cost"])


def _source(value: Any, file: Path, where: str) -> str:
    if value not in CONFIDENCE_SOURCES:
        raise InputError(f"confidence must be one of {', '.join(CONFIDENCE_SOURCES)}, got {value!r}", file=file,
                         field=where)
    return str(value)


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
                    "confidence": _source(m.get("confidence", "auto"), file, f"{where}.confidence"),
                    "thresholds": thresholds})
    try:
        seed = int(doc.get("seed", 0))
    except (TypeError, ValueError):
        raise InputError("seed must be an integer", file=file, field="seed") from None
    return {"name": str(doc.get("name") or ""), "seed": seed, "members": out}
