"""Optimization experiments: several recipes × models in one go, a comparison table and a plot.

Every (recipe, model) pair runs ``scijudge.optimization.optimize`` on the same items, labels and split seed
of its recipe, so rows differ only by what the recipe and model change. The plot shows, per run, the
held-out agreement of the base judge (at 0 LM calls) joined to the optimized judge's (at the LM calls
the run used).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from scijudge.judges.base import model_name

AGREEMENT_COLUMNS = ("exact", "balanced_accuracy", "score")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "model"


def run_experiment(recipes: list[Any], models: list[Any], *, judge: Any, items: Any, labels: Any,
                   prompt_lm: Any = None, api_base: str | None = None, out: str | Path | None = None,
                   track: str | None = None, n_boot: int = 200) -> Any:
    """Run each recipe with each model; return one row per run (see ``OptimizationResult.summary``).

    Args:
        recipes: Recipe objects, recipe paths or shipped recipe names.
        models: model strings (built with ``make_lm``, ``api_base`` applied) or DSPy LMs.
        out: folder for each run's spec/program/report (``<out>/<model>/``), ``experiment.csv`` and
            ``experiment.png``.
    """
    import pandas as pd

    from scijudge.optimization._recipes import resolve_recipe
    from scijudge.optimization import optimize

    rows = []
    resolved = [resolve_recipe(r) for r in recipes]  # every recipe is checked before the first run starts
    for model in models:
        if isinstance(model, str):
            from scijudge.lm import make_lm

            lm = make_lm(model, api_base=api_base)
        else:
            lm = model
        for recipe in resolved:
            target = Path(out) / _slug(model_name(lm)) if out is not None else None
            result = optimize(judge, items, labels, lm, recipe, prompt_lm=prompt_lm, out=target, track=track,
                              n_boot=n_boot)
            rows.append(result.summary())
    frame = pd.DataFrame(rows)
    if out is not None:
        folder = Path(out)
        folder.mkdir(parents=True, exist_ok=True)
        frame.to_csv(folder / "experiment.csv", index=False)
        plot_experiment(frame, folder / "experiment.png")
    return frame


def agreement_column(frame: Any) -> str:
    """The agreement statistic in the table: exact agreement (scores), balanced accuracy (verdicts), or the metric."""
    for name in AGREEMENT_COLUMNS:
        if f"{name}_after" in frame.columns and frame[f"{name}_after"].notna().any():
            return name
    raise ValueError("the experiment table has no agreement column")


def plot_experiment(frame: Any, path: str | Path | None = None) -> Any:
    """Test agreement against LM calls: base judge at 0 calls, optimized judge at the calls each run used."""
    from matplotlib.figure import Figure

    stat = agreement_column(frame)
    fig = Figure(figsize=(6.4, 4.2))
    ax = fig.subplots()
    models = list(dict.fromkeys(frame["model"]))
    colors = {m: f"C{i % 10}" for i, m in enumerate(models)}
    for _, row in frame.iterrows():
        x = [0, row["lm_calls"]]
        y = [row[f"{stat}_before"], row[f"{stat}_after"]]
        ax.plot(x, y, color=colors[row["model"]], alpha=0.5, linewidth=1)
        ax.scatter([x[1]], [y[1]], color=colors[row["model"]], zorder=3)
        ax.annotate(str(row["recipe"]), (x[1], y[1]), textcoords="offset points", xytext=(4, 4), fontsize=8)
    for model in models:
        sub = frame[frame["model"] == model]
        ax.scatter([0] * len(sub), sub[f"{stat}_before"], marker="o", facecolors="none",
                   edgecolors=colors[model], label=f"{model} (base judge at 0 calls)")
    label = {"exact": "exact agreement", "balanced_accuracy": "balanced accuracy", "score": "metric score"}[stat]
    ax.set_xlabel("LM calls (optimization + test evaluation)")
    ax.set_ylabel(f"held-out {label} with humans")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    if path is not None:
        fig.savefig(str(path), dpi=120)
    return fig
