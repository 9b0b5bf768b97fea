"""The one look at the test split: judge it with the base and optimized judges, compare both with the humans."""

from __future__ import annotations

import math
import numbers
import statistics
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from scijudge.data import Item
from scijudge.judges.base import Judge
from scijudge.records import JudgeResult
from scijudge.labels import HumanLabel, labels_to_frame
from scijudge.optimization._budget import BudgetStop
from scijudge.optimization._families import criterion_score
from scijudge.optimization._judge_metrics import CRITERION, ITEM, PART, JudgeMetric, example_key


def judge_examples(judges: dict[str, Judge], examples: list[Any], items: dict[str, Item],
                   threads: int) -> tuple[list[dict[str, Any]], set[str]]:
    """Judge each test example with every judge (interleaved, so a budget stop costs both alike)."""
    tasks = [(role, ex) for ex in examples for role in judges]

    def run(task: tuple[str, Any]) -> tuple[str, Any, JudgeResult | None]:
        role, ex = task
        try:
            return role, ex, judges[role].judge_item(items[ex[ITEM]], ex[PART])[0]
        except BudgetStop:
            return role, ex, None

    with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        done = list(pool.map(run, tasks))
    skipped = {example_key(ex) for _, ex, res in done if res is None}
    rows = []
    for role, ex, res in done:
        if res is None or example_key(ex) in skipped:
            continue
        row = res.model_dump(mode="json")
        row.update(key=res.key, role=role, source=role)
        criterion = ex.get(CRITERION)
        if criterion and row["status"] == "ok":  # a per-criterion label is compared with that criterion's score
            row["score"] = criterion_score(row.get("result") or {}, criterion)
        rows.append(row)
    return rows, skipped


def summaries(rows: list[dict[str, Any]], test_examples: list[Any], test_labels: list[HumanLabel],
               metric: JudgeMetric, kind: str, seed: int, n_boot: int) -> tuple[dict[str, Any], dict[str, Any], Any]:
    """Before/after statistics on the test split: the calibration report plus the recipe metric, and in ``after``
    the paired gain (``gain``, ``gain_lo``, ``gain_hi``, ``n_paired``): the recipe metric after minus before on
    each test unit both judges were scored on, its interval from the same cluster bootstrap over items."""
    import dspy
    import pandas as pd

    from scijudge.metrics.calibration import calibrate

    frame = pd.DataFrame(rows)
    out: dict[str, dict[str, Any]] = {}
    calibration = None
    if len(frame):
        labels = labels_to_frame(test_labels)
        keep = set(frame["item_id"])
        labels = labels[labels["item_id"].isin(keep)]
        calibration = calibrate(frame.drop(columns=["role"]), labels, n_boot=n_boot, seed=seed)
    by_key = {example_key(ex): ex for ex in test_examples}
    per_unit: dict[str, dict[str, tuple[str, float]]] = {}
    for role in ("before", "after"):
        mine = frame[frame["role"] == role] if len(frame) else frame
        values: dict[str, Any] = {"n_units": len(mine)}
        scores, keys = [], []
        for _, row in mine.iterrows():
            keys.append(f"{row['item_id']}\x1f{row['part'] or ''}")
            ex = by_key[keys[-1]]
            if row["status"] != "ok":
                judgment = None
            else:
                judgment = _RowJudgment(row["score"], row["verdict"])
            scores.append(metric.score(ex, dspy.Prediction(judgment=judgment, abstained=judgment is None)))
        per_unit[role] = {k: (item, s) for k, item, s in zip(keys, mine["item_id"] if len(mine) else [], scores)}
        values["score"] = float(statistics.fmean(scores)) if scores else float("nan")
        lo, hi = _item_bootstrap(list(mine["item_id"]) if len(mine) else [], scores, n_boot, seed)
        if math.isfinite(lo) and math.isfinite(hi):  # no interval entries at all without a bootstrap
            values["score_lo"], values["score_hi"] = lo, hi
        if calibration is not None and len(mine):
            table = calibration.per_rubric if kind == "score" else calibration.verdict_per_rubric
            sel = table[table["contender"].astype(str).str.endswith(f"@{role}")] if len(table) else table
            if len(sel):
                rec = sel.iloc[0].to_dict()
                for key in ("n", "coverage", "exact", "within1", "mae", "kappa_w", "spearman", "bias", "accuracy",
                            "balanced_accuracy", "kappa", "macro_f1"):
                    for name in (key, f"{key}_lo", f"{key}_hi"):  # the statistic and its 95% interval
                        value = rec.get(name)
                        if isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value):
                            values[name] = float(value)
        out[role] = values
    out["after"].update(_paired_gain(per_unit["before"], per_unit["after"], n_boot, seed))
    return out["before"], out["after"], calibration


def _paired_gain(before: dict[str, tuple[str, float]], after: dict[str, tuple[str, float]], n_boot: int,
                 seed: int) -> dict[str, Any]:
    """The recipe metric after minus before on the units both judges were scored on, with its cluster-bootstrap
    interval (items resampled, each unit's two scores kept together)."""
    common = [k for k in before if k in after]
    if not common:
        return {}
    items = [before[k][0] for k in common]
    diffs = [after[k][1] - before[k][1] for k in common]
    gain: dict[str, Any] = {"gain": float(statistics.fmean(diffs)), "n_paired": len(common)}
    lo, hi = _item_bootstrap(items, diffs, n_boot, seed)
    if math.isfinite(lo) and math.isfinite(hi):
        gain["gain_lo"], gain["gain_hi"] = lo, hi
    return gain


def _item_bootstrap(item_ids: list[str], scores: list[float], n_boot: int, seed: int,
                    level: float = 0.95) -> tuple[float, float]:
    """Percentile interval of the mean per-unit metric score, resampling items (all units of an item together),
    the same cluster bootstrap as calibration's intervals; NaN when there is nothing to resample."""
    import numpy as np

    if n_boot <= 0 or not scores:
        return float("nan"), float("nan")
    from scijudge.metrics.bootstrap import bootstrap_sums, percentile_interval

    index = {item: i for i, item in enumerate(dict.fromkeys(item_ids))}
    sums = np.zeros((len(index), 2))
    for item, value in zip(item_ids, scores):
        sums[index[item]] += (value, 1.0)
    reps = bootstrap_sums(sums, n_boot, seed)
    with np.errstate(invalid="ignore", divide="ignore"):
        lo, hi = percentile_interval(reps[:, 0] / reps[:, 1], level)
    return float(lo), float(hi)


class _RowJudgment:
    """A stored judgment seen through ``run_fields`` (so the recipe metric can score run-store rows)."""

    def __init__(self, score: Any, verdict: Any) -> None:
        self._score = None if score is None or (isinstance(score, float) and math.isnan(score)) else float(score)
        self._verdict = verdict

    def run_fields(self) -> Any:
        from scijudge.spec.outputs import RunFields

        return RunFields(score=self._score, verdict=self._verdict)


@dataclass
class Baseline:
    """The base judge's test judgments, made once and shared by every recipe of an experiment (same split)."""

    rows: list[dict[str, Any]]
    skipped: set[str]
    lm_calls: int
    variant_rows: list[dict[str, Any]] = field(default_factory=list)

    def rows_for(self, examples: list[Any], exclude: set[str]) -> list[dict[str, Any]]:
        """The baseline rows of ``examples``, without those the optimized judge could not be tested on."""
        keys = {example_key(ex) for ex in examples} - exclude
        return [dict(r) for r in self.rows if f"{r['item_id']}\x1f{r['part'] or ''}" in keys]


def judge_baseline(plan: Any, items: dict[str, Item], lm: Any, threads: int) -> Baseline:
    """Judge a plan's test split (and its perturbed variants, if any) once with the base judge, in the plan's mode
    (calls counted, no limit)."""
    from scijudge.optimization._budget import Budget, Gate, budgeted

    budget = Budget()
    judge = plan.judge(plan.spec, budgeted(lm, Gate(budget, "baseline")))  # (with the spec's demos, as every Judge)
    rows, skipped = judge_examples({"before": judge}, plan.test, items, threads)
    variant_rows: list[dict[str, Any]] = []
    variants = plan.test_variants
    if variants:
        from scijudge.optimization._robustness import judge_variants

        variant_rows, _ = judge_variants(judge, variants, threads, "before")
    return Baseline(rows=rows, skipped=skipped, lm_calls=budget.calls, variant_rows=variant_rows)
