"""Optimization experiments: several recipes × models on ONE split, a comparison table and a plot.

Every recipe is checked against the data before the first LM call. Each model is preflighted and its base
judge is judged on the test split once (the table's ``(base judge)`` row); each recipe then optimizes and
tests only its own judge on that same split. A recipe that fails becomes a row with status ``failed`` and
its reason; the others still run. The plot shows, per model, the baseline once (at 0 calls) and each
recipe's held-out agreement at the LM calls it used, with n per point.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from scijudge.errors import InputError, ModelError, ScijudgeError
from scijudge.records import model_name
from scijudge.optimization._api import prepare, run_plan
from scijudge.optimization._evaluate import judge_baseline, summaries
from scijudge.optimization._judge_metrics import JudgeMetric
from scijudge.optimization._recipes import SplitSpec, resolve_recipe
from scijudge.optimization._result import INTERRUPTED
from scijudge.optimization._retry import FatalModelError, RetryPolicy, preflight

AGREEMENT_COLUMNS = ("exact", "balanced_accuracy", "score")
BASELINE = "(base judge)"
STATS = ("score", "exact", "within1", "mae", "kappa_w", "accuracy", "balanced_accuracy", "coverage", "robustness",
         "n_variants")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "model"


def _split_text(split: SplitSpec) -> str:
    return f"{split.train:g}/{split.dev:g}/{split.test:g} seed {split.seed}"


def run_experiment(recipes: list[Any], models: list[Any], *, judge: Any, items: Any, labels: Any,
                   prompt_lm: Any = None, api_base: str | None = None, out: str | Path | None = None,
                   track: str | None = None, n_boot: int = 200, split: SplitSpec | None = None,
                   retry: RetryPolicy | None = None, check_model: bool = True, robustness: Any = None,
                   mode: str = "generate", decision_score: str = "expected") -> Any:
    """Run each recipe with each model on one split; return the table (one baseline row per model, one row per run).

    Args:
        recipes: Recipe objects, recipe paths or shipped recipe names.
        models: model strings (built with ``make_lm``, ``api_base`` applied) or DSPy LMs.
        split: split ratios and seed for every recipe (default: the first recipe's).
        out: folder for each run's spec/program/report (``<out>/<model>/``), ``experiment.csv`` and
            ``experiment.png``.
        mode, decision_score: as ``optimize``'s (every recipe and the baseline judged in that mode).
    """
    import pandas as pd

    resolved = [resolve_recipe(r) for r in recipes]
    split = split or resolved[0].split
    plans, problems = [], []
    for recipe in resolved:  # every recipe against the data, before the first call
        try:
            plans.append(prepare(judge, items, labels, recipe, split=split, roles=1, robustness=robustness, mode=mode,
                                 decision_score=decision_score))
        except InputError as exc:
            problems.append(f"recipe {recipe.name}: {exc}")
    if problems:
        raise InputError("; ".join(problems) + f" (split {_split_text(split)})")
    first = plans[0]

    rows: list[dict[str, Any]] = []
    fatal: tuple[str, str] | None = None
    fatal_errors: list[Exception] = []
    interrupted = False  # Ctrl-C in one run stops the experiment: no later run makes a call
    for model in models:
        if interrupted:
            name = model if isinstance(model, str) else model_name(model)
            rows += [_failed_row(first, plan, name, split, f"not run: {INTERRUPTED}") for plan in plans]
            continue
        if isinstance(model, str):
            from scijudge.lm import make_lm

            lm = make_lm(model, api_base=api_base)
        else:
            lm = model
        name = model_name(lm)
        if check_model:
            for probe in [lm] + ([prompt_lm] if prompt_lm is not None else []):
                preflight(probe)
        threads = max(int(p.recipe.settings.get("num_threads", 1)) for p in plans)
        items_by_id = {i.id: i for i in first.items}
        baseline = judge_baseline(first, items_by_id, lm, threads)
        rows.append(_baseline_row(first, baseline, name, split, n_boot))
        target = Path(out) / _slug(name) if out is not None else None
        for plan in plans:
            if interrupted:
                rows.append(_failed_row(first, plan, name, split, f"not run: {INTERRUPTED}"))
                continue
            if fatal is not None and fatal[0] == name:  # the model became unusable: the rest of its recipes cannot run
                rows.append(_failed_row(first, plan, name, split, f"not run: {fatal[1]}"))
                continue
            try:
                result = run_plan(plan, lm, prompt_lm=prompt_lm, out=target, track=track, n_boot=n_boot,
                                  baseline=baseline, check_model=False, retry=retry, robustness=robustness)
            except (ScijudgeError, Exception) as exc:
                rows.append(_failed_row(first, plan, name, split, f"{type(exc).__name__}: {exc}".replace("\n", " ")))
                if isinstance(exc, (FatalModelError, ModelError)):
                    fatal = (name, str(exc))
                    fatal_errors.append(exc)
                continue
            interrupted = result.interrupted
            row = result.summary()
            for key in STATS:  # the baseline is its own row: recipe rows hold the optimized judge only
                row.pop(f"{key}_before", None)
            rows.append(row)
    frame = pd.DataFrame(rows)
    if out is not None:
        folder = Path(out)
        folder.mkdir(parents=True, exist_ok=True)
        frame.to_csv(folder / "experiment.csv", index=False)
        plot_experiment(frame, folder / "experiment.png")
    if fatal_errors:  # the table is written; the run still ends with the model's error (a non-zero exit)
        raise fatal_errors[0]
    return frame


def _failed_row(first: Any, plan: Any, model: str, split: SplitSpec, reason: str) -> dict[str, Any]:
    return {"judge": first.spec.name, "recipe": plan.recipe.name, "optimizer": plan.recipe.optimizer,
            "metric": plan.recipe.metric, "model": model, "status": "failed", "split": _split_text(split),
            "stopped": "", "reason": reason}


def _baseline_row(plan: Any, baseline: Any, model: str, split: SplitSpec, n_boot: int) -> dict[str, Any]:
    """The table row of a model's base judge on the experiment's test split."""
    lo, hi, step = plan.data.scale
    metric = JudgeMetric(name=plan.recipe.metric, lo=lo, hi=hi, step=step)
    test_ids = set(plan.split.test)
    labels = [lab for lab in plan.data.labels if lab.item_id in test_ids]
    rows = baseline.rows_for(plan.test, exclude=set())
    rows += [{**r, "role": "after", "source": "after"} for r in rows]  # calibrate tells contenders apart by source
    before, _, _ = summaries(rows, plan.test, labels, metric, plan.data.kind, split.seed, n_boot)
    if baseline.variant_rows:
        from scijudge.optimization._robustness import Robustness

        before.update(Robustness.report(baseline.rows, baseline.variant_rows))
    row: dict[str, Any] = {"judge": plan.spec.name, "recipe": BASELINE, "optimizer": "", "metric": plan.recipe.metric,
                           "model": model, "status": "ok", "split": _split_text(split), "lm_calls": baseline.lm_calls,
                           "n_test": before.get("n_units"), "stopped": "", "reason": ""}
    for key in STATS:
        if key in before:
            row[f"{key}_after"] = before[key]
            row[f"{key}_after_lo"] = before.get(f"{key}_lo", float("nan"))
            row[f"{key}_after_hi"] = before.get(f"{key}_hi", float("nan"))
    return row


def agreement_column(frame: Any) -> str:
    """The agreement statistic in the table: exact agreement (scores), balanced accuracy (verdicts), or the metric."""
    for name in AGREEMENT_COLUMNS:
        if f"{name}_after" in frame.columns and frame[f"{name}_after"].notna().any():
            return name
    raise ValueError("the experiment table has no agreement column")


def plot_experiment(frame: Any, path: str | Path | None = None) -> Any:
    """Held-out agreement against LM calls: each model's base judge once at 0 calls, each recipe at its calls."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.2))
    ax = fig.subplots()
    ok = frame[frame["status"] != "failed"] if "status" in frame.columns else frame
    try:
        stat = agreement_column(ok)
    except ValueError:
        stat = None
    models = list(dict.fromkeys(frame["model"]))
    colors = {m: f"C{i % 10}" for i, m in enumerate(models)}
    if stat is not None:
        for model in models:
            sub = ok[ok["model"] == model]
            base = sub[sub["recipe"] == BASELINE]
            if len(base):
                b = base.iloc[0]
                ax.scatter([0], [b[f"{stat}_after"]], marker="o", facecolors="none", edgecolors=colors[model],
                           label=f"{model}: base judge (n={int(b['n_test'])})")
            for _, row in sub[sub["recipe"] != BASELINE].iterrows():
                x, y = row["lm_calls"], row[f"{stat}_after"]
                if len(base):
                    ax.plot([0, x], [base.iloc[0][f"{stat}_after"], y], color=colors[model], alpha=0.4, linewidth=1)
                marker = "x" if row.get("status") == "stopped early" else "o"
                ax.scatter([x], [y], color=colors[model], marker=marker, zorder=3)
                ax.annotate(f"{row['recipe']} (n={int(row['n_test'])})", (x, y), textcoords="offset points",
                            xytext=(4, 4), fontsize=8)
    failed = frame[frame["status"] == "failed"] if "status" in frame.columns else frame.iloc[0:0]
    if len(failed):
        ax.set_title("failed: " + ", ".join(f"{r['recipe']} ({r['model']})" for _, r in failed.iterrows()), fontsize=8)
    label = {"exact": "exact agreement", "balanced_accuracy": "balanced accuracy", "score": "metric score",
             None: "agreement"}[stat]
    ax.set_xlabel("LM calls (optimization + test evaluation); x = stopped early")
    ax.set_ylabel(f"held-out {label} with humans")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    if stat is not None:
        ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    if path is not None:
        fig.savefig(str(path), dpi=120)
    return fig
