"""Checklist compliance and agreement with human verdicts, computed from a run-store DataFrame alone.

Compliance of a report (ResearchRubrics): Σ(weight × score) ÷ Σ(positive weights), with score 1 for
satisfied, 0.5 for partially and 0 for not satisfied. A satisfied penalty criterion (negative weight)
subtracts; penalties never enter the denominator. Per axis, the same ratio over that axis's criteria.

Abstentions are never scored 0. Each report shows its **coverage** (criteria judged ÷ criteria in its
rubric) and compliance under an explicit policy for the criteria without a verdict (abstained, or never
run):

- ``judged-only`` (default): the ratio over the judged criteria, renormalised by *their* positive
  weights — the compliance the report has on what was actually judged.
- ``bounds``: no point value unless every criterion was judged; the interval
  [``compliance_lo``, ``compliance_hi``] is what the missing criteria could produce: lowest when every
  missing reward criterion is unmet and every missing penalty applies, highest in the opposite case,
  both over the full rubric's positive weights. (The interval is reported under every policy.)
- ``zero`` (**source-compatible, never the default**): every criterion without a verdict scores 0, over the
  full rubric's positive weights (0 when it has none) — how the ResearchRubrics code scores a failed
  criterion, so a published compliance number can be reproduced. It reads an abstention as "not satisfied"
  (and a missing penalty as "not applied"), which is why scijudge labels it and never uses it unasked.

Reports can also be grouped by the task's **domain** and **complexity** (``conceptual_breadth``,
``logical_nesting``, ``exploration``): ``ChecklistJudge`` writes them into each result as ``task_facets``
when the task file has them, and a task file can supply them for older runs (``facets_from_tasks``).

The rubric of a report (number of criteria and weight totals, overall and per axis) is read from the
``result.rubric`` that ``ChecklistJudge`` writes into every row, so criteria that never got a row still
count as missing. Rows of several contenders (judge, model, spec hash) are kept apart.

Agreement with human verdicts: per-task macro-F1 averaged over tasks (the benchmark's own measure,
scikit-learn ``f1_score`` with the full label set and ``zero_division=0``, so a class absent from both
sides of a task counts as F1 = 0, as in the benchmark), plus pooled accuracy, Cohen's κ and the confusion
matrix; binary mode counts ``partially`` as ``not_satisfied`` on both sides (the benchmark's rule).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel

from scijudge.errors import InputError

Policy = Literal["judged-only", "bounds", "zero"]
Mode = Literal["binary", "ternary"]
POLICIES: tuple[str, ...] = ("judged-only", "bounds", "zero")
POLICY_LABELS: dict[str, str] = {
    "judged-only": "judged-only (renormalised over judged criteria)",
    "bounds": "bounds (a value only for fully judged reports)",
    "zero": "zero (source-compatible: unjudged criteria score 0, as in ResearchRubrics)",
}
FACETS: tuple[str, ...] = ("domain", "conceptual_breadth", "logical_nesting", "exploration")
CONTENDER: list[str] = ["judge", "model", "spec_hash"]
BINARY_LABELS: tuple[str, ...] = ("satisfied", "not_satisfied")
TERNARY_LABELS: tuple[str, ...] = ("satisfied", "partially", "not_satisfied")
_EPS = 1e-12


# --- rows ----------------------------------------------------------------------------------------------


def checklist_rows(df: pd.DataFrame, *, judge: str | None = None) -> pd.DataFrame:
    """The checklist judgments of a run-store frame, one row per (contender, report, criterion), with
    ``weight``, ``axis`` and ``rubric`` unpacked from ``result``. Later rows replace earlier duplicates."""
    required = {"item_id", "judge", "part", "family", "model", "spec_hash", "status", "score", "result"}
    missing = required - set(df.columns)
    if missing:
        raise InputError(f"not a run-store frame: missing columns {sorted(missing)}", field=min(missing))
    rows = df[df["family"] == "checklist"]
    if judge is not None:
        rows = rows[rows["judge"] == judge]
    if rows.empty:
        where = f" for judge {judge!r}" if judge else ""
        raise InputError(f"no checklist judgments in the run{where}", field="judge")
    if "created_at" in rows.columns:
        rows = rows.sort_values("created_at", kind="stable")
    rows = rows.drop_duplicates(CONTENDER + ["item_id", "part"], keep="last").copy()

    def unpack(result: Any, key: str) -> Any:
        return result.get(key) if isinstance(result, dict) else None

    for key in ("weight", "axis", "rubric", "task_facets"):
        rows[key] = rows["result"].map(lambda r, k=key: unpack(r, k))
    bad = rows["weight"].isna() | rows["axis"].isna() | rows["rubric"].map(lambda r: not isinstance(r, dict))
    if bad.any():
        row = rows[bad].iloc[0]
        raise InputError(f"judgment of item {row['item_id']!r}, part {row['part']!r} by {row['judge']!r} has no "
                         "weight/axis/rubric in its result: it was not made by ChecklistJudge", field="result")
    rows["weight"] = rows["weight"].astype(float)
    for column in ("tokens_in", "tokens_out"):
        if column not in rows.columns:
            rows[column] = 0
    if "cost" not in rows.columns:
        rows["cost"] = np.nan
    rows["judged"] = (rows["status"] == "ok") & rows["score"].notna()
    return rows.reset_index(drop=True)


def _rubric_of(group: pd.DataFrame) -> dict[str, Any]:
    """The report's rubric summary; every row of a report must agree on it."""
    rubrics = group["rubric"].tolist()
    first = rubrics[0]
    for other in rubrics[1:]:
        if other != first:
            row = group.iloc[0]
            raise InputError(f"rows of item {row['item_id']!r} by {row['judge']!r} disagree about the report's "
                             "rubric (the task file changed between runs?); judge it again with one task file",
                             field="result.rubric")
    return first


def _numbers(rows: pd.DataFrame, totals: dict[str, Any]) -> dict[str, Any]:
    """Compliance numbers of one report (or one axis of it) from its rows and its rubric totals."""
    n = int(totals["n"])
    positive, negative = float(totals["positive_weight"]), float(totals["negative_weight"])
    judged = rows[rows["judged"]]
    weights, scores = judged["weight"].to_numpy(float), judged["score"].to_numpy(float)
    numerator = math.fsum(weights * scores)
    judged_positive = math.fsum(w for w in weights if w > 0)
    judged_negative = math.fsum(w for w in weights if w < 0)
    unknown_positive = max(0.0, positive - judged_positive)
    unknown_negative = min(0.0, negative - judged_negative)
    n_judged = len(judged)
    n_abstained = int((rows["status"] == "abstained").sum())
    judged_only = numerator / judged_positive if judged_positive > _EPS else math.nan
    lo = (numerator + unknown_negative) / positive if positive > _EPS else math.nan
    hi = (numerator + unknown_positive) / positive if positive > _EPS else math.nan
    return {
        "n_criteria": n, "n_judged": n_judged, "n_abstained": n_abstained,
        "n_missing": max(0, n - n_judged - n_abstained),
        "coverage": n_judged / n if n else math.nan,
        "compliance_judged": judged_only, "compliance_lo": lo, "compliance_hi": hi,
        "compliance_zero": numerator / positive if positive > _EPS else 0.0,
        "complete": n_judged == n,
    }


def _point(numbers: dict[str, Any], policy: Policy) -> float:
    if policy == "judged-only":
        return numbers["compliance_judged"]
    if policy == "zero":
        return numbers["compliance_zero"]
    return numbers["compliance_lo"] if numbers["complete"] else math.nan


def _check_policy(policy: str) -> None:
    if policy not in POLICIES:
        raise InputError(f"unknown policy {policy!r}: use one of {', '.join(POLICIES)}", field="policy")


def compliance_by_report(df: pd.DataFrame, *, judge: str | None = None,
                         policy: Policy = "judged-only") -> pd.DataFrame:
    """One row per (contender, report): compliance under ``policy``, its bounds, coverage, counts, tokens
    and cost (abstained calls included, since they were paid for)."""
    _check_policy(policy)
    rows = checklist_rows(df, judge=judge)
    records: list[dict[str, Any]] = []
    for key, group in rows.groupby(CONTENDER + ["item_id"], sort=True):
        numbers = _numbers(group, _rubric_of(group))
        costs = group["cost"].dropna()
        facets = next((f for f in group["task_facets"] if isinstance(f, dict)), {})
        records.append({
            **dict(zip(CONTENDER + ["item_id"], key)), "compliance": _point(numbers, policy), **numbers,
            **{name: facets.get(name) for name in FACETS},
            "tokens_in": int(group["tokens_in"].fillna(0).sum()),
            "tokens_out": int(group["tokens_out"].fillna(0).sum()),
            "cost": float(costs.sum()) if len(costs) else math.nan,
        })
    return pd.DataFrame.from_records(records)


def compliance_by_axis(df: pd.DataFrame, *, judge: str | None = None,
                       policy: Policy = "judged-only") -> pd.DataFrame:
    """One row per (contender, report, axis): the same numbers over that axis's criteria. An axis with only
    penalty criteria has no positive weight, so its compliance is undefined (NaN)."""
    _check_policy(policy)
    rows = checklist_rows(df, judge=judge)
    records: list[dict[str, Any]] = []
    for key, group in rows.groupby(CONTENDER + ["item_id"], sort=True):
        rubric = _rubric_of(group)
        for axis, totals in sorted(rubric.get("axes", {}).items()):
            numbers = _numbers(group[group["axis"] == axis], totals)
            records.append({**dict(zip(CONTENDER + ["item_id"], key)), "axis": axis,
                            "compliance": _point(numbers, policy), **numbers})
    return pd.DataFrame.from_records(records)


def compliance_summary(per_report: pd.DataFrame) -> pd.DataFrame:
    """Per contender: mean compliance over reports (NaN reports left out), mean bounds and coverage, how
    many reports were fully judged, and total tokens and cost."""
    records = []
    for key, group in per_report.groupby(CONTENDER, sort=True):
        costs = group["cost"].dropna()
        records.append({
            **dict(zip(CONTENDER, key)), "reports": len(group), "complete_reports": int(group["complete"].sum()),
            "compliance": float(group["compliance"].mean()), "compliance_lo": float(group["compliance_lo"].mean()),
            "compliance_hi": float(group["compliance_hi"].mean()), "coverage": float(group["coverage"].mean()),
            "n_abstained": int(group["n_abstained"].sum()), "n_missing": int(group["n_missing"].sum()),
            "tokens_in": int(group["tokens_in"].sum()), "tokens_out": int(group["tokens_out"].sum()),
            "cost": float(costs.sum()) if len(costs) else math.nan,
        })
    return pd.DataFrame.from_records(records)


def facets_from_tasks(per_report: pd.DataFrame, tasks: Iterable[Any]) -> pd.DataFrame:
    """Fill the facet columns of a per-report frame from task objects (``sample_id`` + facet attributes),
    for runs made before judgments carried them; values already in the run are kept."""
    by_id = {t.sample_id: t for t in tasks}
    out = per_report.copy()
    for name in FACETS:
        from_tasks = out["item_id"].map(lambda i, n=name: getattr(by_id.get(i), n, None))
        out[name] = out[name].where(out[name].notna(), from_tasks) if name in out.columns else from_tasks
    return out


def facet_summary(per_report: pd.DataFrame, facet: str) -> pd.DataFrame:
    """Per contender and value of one facet (domain or a complexity dimension): mean compliance over its
    reports (NaN left out), mean bounds and coverage. Reports without the facet are left out; an empty frame
    means the task file has no such field."""
    if facet not in FACETS:
        raise InputError(f"unknown facet {facet!r}: use one of {', '.join(FACETS)}", field="facet")
    if facet not in per_report.columns:
        return pd.DataFrame(columns=[*CONTENDER, facet, "reports", "compliance"])
    rows = per_report[per_report[facet].notna()]
    if rows.empty:
        return pd.DataFrame(columns=[*CONTENDER, facet, "reports", "compliance"])
    return (rows.groupby(CONTENDER + [facet], sort=True)
            .agg(reports=("item_id", "nunique"), compliance=("compliance", "mean"),
                 compliance_lo=("compliance_lo", "mean"), compliance_hi=("compliance_hi", "mean"),
                 coverage=("coverage", "mean"))
            .reset_index())


def axis_summary(per_axis: pd.DataFrame) -> pd.DataFrame:
    """Per contender and axis: mean over reports of the axis compliance (NaN left out) and mean coverage."""
    out = (per_axis.groupby(CONTENDER + ["axis"], sort=True)
           .agg(reports=("item_id", "nunique"), compliance=("compliance", "mean"),
                compliance_lo=("compliance_lo", "mean"), compliance_hi=("compliance_hi", "mean"),
                coverage=("coverage", "mean"), n_criteria=("n_criteria", "sum"), n_judged=("n_judged", "sum"))
           .reset_index())
    return out


# --- agreement with human verdicts ---------------------------------------------------------------------


class ChecklistAgreement(BaseModel):
    """Agreement of one contender's verdicts with human verdicts."""

    judge: str
    model: str
    spec_hash: str
    mode: Mode
    labels: list[str]
    n_labels: int
    n_pairs: int
    n_abstained: int
    n_unjudged: int
    n_tasks: int
    macro_f1: float
    per_task_f1: dict[str, float]
    accuracy: float
    kappa: float
    confusion: list[list[int]]

    def confusion_frame(self) -> pd.DataFrame:
        """The confusion matrix with human verdicts as rows and judge verdicts as columns."""
        return pd.DataFrame(self.confusion, index=[f"human:{v}" for v in self.labels],
                            columns=[f"judge:{v}" for v in self.labels])


def _labels_frame(labels: Any) -> pd.DataFrame:
    """Human labels (HumanLabels or a frame with item_id, part, verdict[, annotator]) as a frame."""
    from scijudge.vocab import canonical_verdict

    if isinstance(labels, pd.DataFrame):
        frame = labels.copy()
    else:
        frame = pd.DataFrame([{"item_id": lab.item_id, "part": lab.part, "verdict": lab.verdict,
                               "annotator": lab.annotator} for lab in labels])
    for column in ("item_id", "part", "verdict"):
        if column not in frame.columns:
            raise InputError(f"human verdicts need a {column!r} column", field=column)
    if "annotator" not in frame.columns:
        frame["annotator"] = None
    if frame["verdict"].isna().any():
        row = frame[frame["verdict"].isna()].iloc[0]
        raise InputError(f"human label for item {row['item_id']!r}, part {row['part']!r} has no verdict",
                         field="verdict")
    try:
        frame["verdict"] = frame["verdict"].map(canonical_verdict)
    except ValueError as exc:
        raise InputError(str(exc), field="verdict") from None
    return frame


def _to_mode(values: Iterable[str], mode: Mode) -> list[str]:
    if mode == "binary":
        return ["not_satisfied" if v == "partially" else v for v in values]
    return list(values)


def task_macro_f1(human: Sequence[str], judge: Sequence[str], tasks: Sequence[str],
                  labels: Sequence[str]) -> tuple[float, dict[str, float]]:
    """Macro-F1 within each task over the full label set (zero_division=0), and its mean over tasks."""
    from sklearn.metrics import f1_score

    per_task: dict[str, float] = {}
    h, j, t = np.asarray(human, dtype=object), np.asarray(judge, dtype=object), np.asarray(tasks, dtype=object)
    for task in sorted(set(t.tolist())):
        mask = t == task
        per_task[str(task)] = float(f1_score(h[mask], j[mask], labels=list(labels), average="macro",
                                             zero_division=0))
    mean = float(np.mean(list(per_task.values()))) if per_task else math.nan
    return mean, per_task


def checklist_agreement(df: pd.DataFrame, labels: Any, *, mode: Mode = "binary", judge: str | None = None,
                        annotator: str | None = None) -> list[ChecklistAgreement]:
    """Agreement of each contender's verdicts with human verdicts, matched on (item_id, criterion id).

    Labels are matched by item and criterion id only (criterion ids are content hashes), so binary and
    ternary judges compare against the same labels. Abstained and missing judgments are counted, never
    imputed. Several annotators for one criterion need ``annotator`` to choose one.
    """
    if mode not in ("binary", "ternary"):
        raise InputError(f"unknown mode {mode!r}: use binary or ternary", field="mode")
    from sklearn.metrics import accuracy_score, cohen_kappa_score, confusion_matrix

    human = _labels_frame(labels)
    if annotator is not None:
        human = human[human["annotator"] == annotator]
        if human.empty:
            raise InputError(f"no human verdicts by annotator {annotator!r}", field="annotator")
    duplicated = human.duplicated(["item_id", "part"], keep=False)
    if duplicated.any():
        row = human[duplicated].iloc[0]
        raise InputError(f"several human verdicts for item {row['item_id']!r}, criterion {row['part']!r}; "
                         "choose one annotator", field="annotator")
    classes = list(BINARY_LABELS if mode == "binary" else TERNARY_LABELS)
    rows = checklist_rows(df, judge=judge)
    out: list[ChecklistAgreement] = []
    for key, group in rows.groupby(CONTENDER, sort=True):
        merged = human.merge(group[["item_id", "part", "status", "verdict", "judged"]], on=["item_id", "part"],
                             how="left", suffixes=("_human", "_judge"))
        paired = merged[merged["judged"].eq(True)]
        n_abstained = int((merged["status"] == "abstained").sum())
        n_unjudged = int(merged["status"].isna().sum())
        h = _to_mode(paired["verdict_human"], mode)
        j = _to_mode(paired["verdict_judge"], mode)
        unknown = sorted(set(h + j) - set(classes))
        if unknown:
            raise InputError(f"verdict {unknown[0]!r} is not a {mode} class ({', '.join(classes)})", field="verdict")
        if h:
            macro, per_task = task_macro_f1(h, j, paired["item_id"].tolist(), classes)
            accuracy = float(accuracy_score(h, j))
            kappa = (float(cohen_kappa_score(h, j, labels=classes)) if len(set(h) | set(j)) > 1 else math.nan)
            confusion = confusion_matrix(h, j, labels=classes).tolist()
        else:
            macro, per_task, accuracy, kappa = math.nan, {}, math.nan, math.nan
            confusion = [[0] * len(classes) for _ in classes]
        out.append(ChecklistAgreement(
            judge=key[0], model=key[1], spec_hash=key[2], mode=mode, labels=classes, n_labels=len(human),
            n_pairs=len(h), n_abstained=n_abstained, n_unjudged=n_unjudged, n_tasks=len(per_task),
            macro_f1=macro, per_task_f1=per_task, accuracy=accuracy, kappa=kappa, confusion=confusion,
        ))
    return out


__all__ = [
    "BINARY_LABELS",
    "CONTENDER",
    "FACETS",
    "POLICIES",
    "POLICY_LABELS",
    "TERNARY_LABELS",
    "ChecklistAgreement",
    "Policy",
    "axis_summary",
    "checklist_agreement",
    "checklist_rows",
    "compliance_by_axis",
    "compliance_by_report",
    "compliance_summary",
    "facet_summary",
    "facets_from_tasks",
    "task_macro_f1",
]
