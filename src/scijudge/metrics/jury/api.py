"""``jury(...)``: aggregate members' stored judgments into a run store of jury judgments (model ``jury:NAME``).

A jury is a view over run stores: it reads the members' current judgments, aggregates each (item, judge, part)
and records one ``JudgeResult`` per unit through ``Run.record`` into its own store, so ``calibrate``,
``estimate``, ``export`` and ``robustness`` read it like any other run. Each row keeps its members' scores and
statuses (``result.members``) and the rule's working (``result.jury``); an abstention names the rule and the
members that abstained or had no judgment.

Identity: the row's ``input_hash`` is a hash of the members' judgment keys (a re-judged member gives the jury a
new key, and the old jury row becomes history), its ``decoding`` the jury definition (method, members, quorum
and the method's settings): a changed definition is a new judgment, never a silent replacement.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from scijudge.errors import InputError
from scijudge.metrics.frames import Judgments
from scijudge.metrics.jury.dawid_skene import dawid_skene_jury
from scijudge.metrics.jury.members import Member, members_of_judge, select_members, wide
from scijudge.metrics.jury.methods import FITS, central, default_quorum, majority, weighted
from scijudge.metrics.jury.scales import apply_maps, jury_scale, member_scales
from scijudge.spec.scales import Scale
from scijudge.records import RUN_COLUMNS, JudgeResult, result_row

METHODS = ("mean", "median", "majority", "weighted", "dawid-skene")
JURY_PREFIX = "jury:"


@dataclass
class JuryResult:
    """What a jury produced: its judgments, which units were held out (weighted), its scales and notes."""

    name: str
    method: str
    results: list[JudgeResult]
    folds: pd.DataFrame
    scales: dict[str, str]
    notes: list[str] = field(default_factory=list)
    definition: dict[str, Any] = field(default_factory=dict)
    out: Path | None = None

    @property
    def rows(self) -> pd.DataFrame:
        """The judgments as run-store rows (``RUN_COLUMNS``)."""
        return pd.DataFrame([result_row(r) for r in self.results], columns=list(RUN_COLUMNS))

    @property
    def n_ok(self) -> int:
        return sum(1 for r in self.results if r.status == "ok")


def label_consensus(labels: Any) -> pd.DataFrame:
    """Labels (a path, HumanLabels or a frame) -> one row per (item_id, judge, part): the annotators' median score
    (not snapped to the scale: it is the target of a weight fit) and the count of annotators."""
    from scijudge.labels import labels_frame_of

    frame = labels_frame_of(labels)
    for column in ("item_id", "judge", "score"):
        if column not in frame.columns:
            raise InputError("labels lack a column", field=column)
    if "part" not in frame.columns:
        frame["part"] = ""
    frame["part"] = frame["part"].astype(object).where(frame["part"].notna(), "").astype(str)
    frame["score"] = pd.to_numeric(frame["score"], errors="coerce")
    scored = frame[frame["score"].notna()]
    return (scored.groupby(["item_id", "judge", "part"])["score"].agg(["median", "size"])
            .rename(columns={"median": "h_score", "size": "n_annotators"}).reset_index())


def jury(runs: Any, members: Sequence[str | Member], *, name: str, method: str = "mean", out: str | Path | None = None,
         quorum: int | None = None, labels: Any = None, scale: Any = None, scale_map: Mapping[str, Any] | None = None,
         fit: str = "inverse_mse", folds: int = 5, seed: int = 0, ridge_alpha: float = 1.0,
         ds_max_iter: int = 10_000, ds_tol: float = 1e-8, ds_smoothing: float = 0.01, ds_floor: float = 0.0) -> JuryResult:
    """Aggregate the members' stored judgments into jury judgments, and record them into ``out`` if given.

    Args:
        runs: run store paths, a ``Judgments`` or one DataFrame of run-store rows (with a ``source`` column if
            several runs).
        members: ``MODEL``, ``MODEL@ENDPOINT`` or either with ``#JUDGE`` (narrow a member to a judge name,
            dotted prefix or glob), at least two.
        name: the jury's name; its judgments are stored with model ``jury:NAME``.
        method: ``mean`` / ``median`` over the members that answered (at least ``quorum``); ``majority``, a
            strict majority of all members (abstentions count in the denominator); ``weighted``, weights fitted
            on labelled items only and cross-fitted by item (``fit`` inverse_mse or ridge, ``folds``, ``seed``);
            ``dawid-skene``, unsupervised EM over categorical ratings or verdicts.
        quorum: the fewest answering members (default: a strict majority of the judge's members).
        labels: development labels for ``weighted`` (path, HumanLabels or frame).
        scale: members' scale when nothing stored says: one 'lo,hi,step' or ``{member | judge: scale}``.
        scale_map: ``{member: 'lo,hi,step'}`` maps a member's scores linearly onto that scale, or
            ``{member: {old: new}}``; without it, members on different scales are refused.
    """
    if method not in METHODS:
        raise InputError(f"unknown jury method {method!r}: use one of {', '.join(METHODS)}", field="method")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._\-]*", name or ""):
        raise InputError(f"jury name {name!r}: use letters, digits, '.', '_' or '-'", field="name")
    if method == "weighted" and labels is None:
        raise InputError("weighted juries learn their weights from labels: give --labels DEV.jsonl", field="labels")
    if method == "weighted" and fit not in FITS:
        raise InputError(f"unknown weight fit {fit!r}: use {' or '.join(FITS)}", field="fit")
    if out is not None and not isinstance(runs, pd.DataFrame):
        paths = _store_paths(runs)
        from scijudge._files import refuse_overwrite

        refuse_overwrite(out, [labels] if isinstance(labels, (str, Path)) else [], stores=paths, field="out")
    read = Judgments.read(runs)
    sel, specs = select_members(read.frame, members)
    scales = member_scales(sel, scale, read.scales)
    sel = apply_maps(sel, scales, scale_map)
    definition: dict[str, Any] = {"method": method, "members": [s.label for s in specs], "quorum": quorum}
    if method == "weighted":
        definition.update(fit=fit, folds=folds, seed=seed, **({"alpha": ridge_alpha} if fit == "ridge" else {}))
    if method == "dawid-skene":
        definition.update(smoothing=ds_smoothing, floor=ds_floor, max_iter=ds_max_iter, tol=ds_tol)
    if scale_map:
        definition["scale_map"] = {k: (v if isinstance(v, str) else repr(v)) for k, v in sorted(scale_map.items())}
    decoding = json.dumps(definition, sort_keys=True, separators=(",", ":"))
    cons = label_consensus(labels) if labels is not None else None
    results: list[JudgeResult] = []
    fold_tables: list[pd.DataFrame] = []
    meta_scales: dict[str, str] = {}
    notes: list[str] = []
    for judge in sorted(sel["judge"].unique()):
        labels_j = members_of_judge(specs, judge)
        if len(labels_j) < 2:
            notes.append(f"judge {judge!r}: only {labels_j[0]} covers it; no jury judgments")
            continue
        rows_j = sel[sel["judge"] == judge]
        families = sorted(set(rows_j["family"]) - {""})
        if len(families) > 1:
            raise InputError(f"judge {judge!r}: members ran different families {families}", field="member")
        q = quorum if quorum is not None else default_quorum(len(labels_j))
        if not 1 <= q <= len(labels_j):
            raise InputError(f"quorum {q} for judge {judge!r}: must be between 1 and its {len(labels_j)} members",
                             field="quorum")
        answered = rows_j[rows_j["status"] == "ok"]
        is_verdict = bool(len(answered)) and answered["score"].isna().all() and answered["verdict"].notna().any()
        if is_verdict and method not in ("majority", "dawid-skene"):
            raise InputError(f"judge {judge!r} gives verdicts, not scores: use --method majority or dawid-skene",
                             field="method")
        sc = None if is_verdict else jury_scale(sel, judge, scales)
        vals, status = wide(sel, judge, labels_j, "verdict" if is_verdict else "score")
        res = _aggregate(method, judge, vals, status, q, sc, is_verdict, rows_j, cons, fold_tables, notes,
                         fit=fit, folds=folds, seed=seed, alpha=ridge_alpha, ds=(ds_max_iter, ds_tol, ds_smoothing,
                                                                                  ds_floor))
        if sc is None and not is_verdict:
            notes.append(f"judge {judge!r}: no stored scale, known spec or family says the members' scale, so none is "
                         "recorded; calibrate then needs --scale JUDGE=lo,hi,step,continuous (or pass --scale here)")
        if sc is not None:
            meta_scales[judge] = sc.meta(continuous=sc.continuous or method in ("mean", "median", "weighted"))
        spec_hash = _spec_hash(rows_j)
        by_unit: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
        for rec in rows_j.to_dict("records"):
            by_unit.setdefault((rec["item_id"], rec["part"]), {})[rec["member"]] = rec
        for idx, r, st in zip(vals.index, res, status.to_numpy(object)):
            results.append(_result(idx, judge, families[0] if families else "", spec_hash, name, decoding, r,
                                   dict(zip(labels_j, st)), by_unit.get(idx, {}), labels_j, method, q))
    if not results:
        raise InputError("no judge is covered by two or more members: nothing to aggregate", field="member")
    folds_frame = pd.concat(fold_tables, ignore_index=True) if fold_tables else pd.DataFrame(
        columns=["judge", "item_id", "part", "labelled", "fold", "n_fit_units", "fit_items"])
    outcome = JuryResult(name, method, results, folds_frame, meta_scales, notes, definition)
    if out is not None:
        outcome.out = _write(Path(out), outcome, runs, labels)
    return outcome


def _aggregate(method: str, judge: str, vals: pd.DataFrame, status: pd.DataFrame, q: int, sc: Scale | None,
               is_verdict: bool, rows_j: pd.DataFrame, cons: pd.DataFrame | None, fold_tables: list[pd.DataFrame],
               notes: list[str], *, fit: str, folds: int, seed: int, alpha: float,
               ds: tuple[int, float, float, float]) -> list[dict[str, Any]]:
    if method in ("mean", "median"):
        return central(vals, status, method, q)
    if method == "majority":
        return majority(vals, status, scale=sc, is_verdict=is_verdict)
    if method == "weighted":
        assert cons is not None
        lab = cons[cons["judge"] == judge].set_index(["item_id", "part"])["h_score"]
        res, table = weighted(vals, status, lab, kind=fit, quorum=q, folds=folds, seed=seed, alpha=alpha, scale=sc)
        fold_tables.append(table.assign(judge=judge))
        n_lab = int(table["labelled"].sum())
        k = int(res[0]["extra"]["folds"]) if res else 0
        notes.append(f"judge {judge!r}: {n_lab} labelled unit(s) scored out-of-fold ({k}-fold by item, weights never "
                     f"fitted on their own item); {len(table) - n_lab} unlabelled unit(s) scored with weights fitted "
                     "on all labelled items")
        return res
    if is_verdict:
        cats: list[Any] = sorted({v for v in rows_j["verdict"] if v is not None})
    elif sc is not None and not sc.continuous:
        cats = sc.categories()
    else:
        raise InputError(f"dawid-skene needs the discrete scale of judge {judge!r}: pass --scale lo,hi,step",
                         field="scale")
    max_iter, tol, smoothing, floor = ds
    res, fitted = dawid_skene_jury(vals, status, categories=cats, quorum=q, is_verdict=is_verdict, max_iter=max_iter,
                                   tol=tol, smoothing=smoothing, floor=floor)
    if fitted is not None and not fitted.converged:
        step = fitted.trace[-1] - fitted.trace[-2] if len(fitted.trace) > 1 else math.nan
        notes.append(f"judge {judge!r}: dawid-skene did not converge in {max_iter} iterations (the last one still "
                     f"raised the log-likelihood by {step:.3g}, tolerance {tol:g}): raise --ds-max-iter")
    return res


def _digest(values: Sequence[str], n: int = 24) -> str:
    return hashlib.sha256("\x1f".join(values).encode()).hexdigest()[:n]


def _spec_hash(rows: pd.DataFrame) -> str:
    """The members' spec hash when they share one (calibrate then resolves the scale from the same spec)."""
    hashes = sorted(set(rows["spec_hash"]) - {""})
    if len(hashes) == 1:
        return str(hashes[0])
    return "jury-" + _digest(hashes, 16) if hashes else "jury"


def _num(value: Any) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def _result(idx: tuple[str, str], judge: str, family: str, spec_hash: str, name: str, decoding: str,
            r: dict[str, Any], status: dict[str, str], by_member: dict[str, dict[str, Any]], labels_j: list[str],
            method: str, quorum: int) -> JudgeResult:
    item_id, part = idx
    members = []
    for label in labels_j:
        row = by_member.get(label)
        entry: dict[str, Any] = {"member": label, "status": status[label]}
        if row is not None:
            entry.update(model=row["model"], endpoint=row["endpoint"], key=row["key"])
            if status[label] == "ok":
                entry["score"] = _num(row["score"])
                if row.get("verdict") is not None:
                    entry["verdict"] = row["verdict"]
            elif row.get("reason"):
                entry["reason"] = row["reason"]
        members.append(entry)
    keys = sorted(e["key"] for e in members if e.get("key"))
    costs = [c for c in (_num(row.get("cost")) for row in by_member.values()) if c is not None]
    info = {"name": name, "method": method, "quorum": quorum, "n_members": len(labels_j),
            "n_answered": sum(1 for e in members if e["status"] == "ok"), **(r.get("extra") or {})}
    return JudgeResult(
        item_id=item_id, judge=judge, part=part, family=family or "jury", spec_hash=spec_hash,
        model=JURY_PREFIX + name, endpoint="", input_hash=_digest(keys) if keys else "", decoding=decoding,
        status=r["status"], score=r.get("score"), verdict=r.get("verdict"), confidence=r.get("confidence"),
        probs=r.get("probs"), result={"jury": info, "members": members}, reason=r.get("reason"),
        tokens_in=int(sum(int(row.get("tokens_in") or 0) for row in by_member.values())),
        tokens_out=int(sum(int(row.get("tokens_out") or 0) for row in by_member.values())),
        cost=math.fsum(costs) if costs else None,
        latency_s=max([float(row.get("latency_s") or 0.0) for row in by_member.values()], default=0.0),
    )


def _store_paths(runs: Any) -> list[Any]:
    """The store paths ``runs`` names (a ``Judgments`` read from stores knows them)."""
    if isinstance(runs, Judgments):
        return list(runs.paths.values())
    return [runs] if isinstance(runs, (str, Path)) else list(runs)


def _write(out: Path, outcome: JuryResult, runs: Any, labels: Any) -> Path:
    """Record every jury judgment through ``Run.record`` and say in the store's meta what the jury is: its
    definition, its runs, and for a weighted jury which labelled units were scored out-of-fold."""
    from scijudge.run.store import Run

    held_out: dict[str, Any] = {}
    for judge, table in outcome.folds.groupby("judge", sort=True) if len(outcome.folds) else ():
        lab = table[table["labelled"]]
        held_out[str(judge)] = {
            "rule": "cross-fitted by item: a labelled unit is scored with weights fitted on other items only",
            "folds": int(lab["fold"].max()) + 1 if len(lab) else 0,
            "out_of_fold": sorted({str(i) for i in lab["item_id"]}),
            "unlabelled": sorted({str(i) for i in table.loc[~table["labelled"], "item_id"]}),
        }
    with Run(out) as store:
        store.claim_writer()
        many = getattr(store, "record_many", None)  # one transaction where the store offers it
        if many is not None:
            many(r.model_dump(mode="json") for r in outcome.results)
        else:
            for result in outcome.results:
                store.record(result)
        meta = store.meta()
        juries = dict(meta.get("juries") or {})
        juries[outcome.name] = {
            **outcome.definition, "model": JURY_PREFIX + outcome.name,
            "runs": [] if isinstance(runs, pd.DataFrame) else [str(p) for p in _store_paths(runs)],
            **({"labels": str(labels)} if isinstance(labels, (str, Path)) else {}),
            **({"held_out": held_out} if held_out else {}),
        }
        store.set_meta(scales={**(meta.get("scales") or {}), **outcome.scales}, juries=juries)
    return out


def is_jury_model(model: Any) -> bool:
    return isinstance(model, str) and model.startswith(JURY_PREFIX)


