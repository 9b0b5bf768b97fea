"""The robustness page: a self-contained HTML file (inline CSS, one PNG plot) and the CSV beside it."""

from __future__ import annotations

import html
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from scijudge._files import atomic_output, refuse_overwrite, write_text
from scijudge.metrics.robustness import ALL_JUDGES, RobustnessResult
from scijudge.report.page import CSS, html_img, html_table, png_uri, pyplot


def drop_plot(table: pd.DataFrame) -> str | None:
    """Mean drop (original − variant) with its interval per judge and level, one panel per model."""
    if table is None or table.empty:
        return None
    plt = pyplot()
    models = sorted(table["model"].unique())
    levels = list(dict.fromkeys(table["level"]))
    fig, axes = plt.subplots(len(models), 1, figsize=(9, 2.8 * len(models) + 0.8), squeeze=False, layout="constrained")
    for ax, model in zip(axes[:, 0], models):
        sel = table[table["model"] == model]
        judges = list(dict.fromkeys(sel["judge"]))
        x = np.arange(len(judges))
        width = 0.8 / max(1, len(levels))
        for i, lv in enumerate(levels):
            part = sel[sel["level"] == lv].set_index("judge").reindex(judges)
            drop = part["drop"].to_numpy(float)
            err = np.vstack([drop - part["drop_lo"].to_numpy(float), part["drop_hi"].to_numpy(float) - drop])
            ax.bar(x + (i - (len(levels) - 1) / 2) * width, drop, width, yerr=np.nan_to_num(err), capsize=2, label=lv)
        ax.axhline(0, color="#888", lw=0.8)
        ax.set_xticks(x, [j if j != ALL_JUDGES else "all judges" for j in judges], rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("drop (original − variant)")
        ax.set_title(model, fontsize=9)
    handles, names = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, names, fontsize=7, ncol=max(1, len(levels)), loc="outside upper center")
    return png_uri(fig)


def render_robustness_html(result: RobustnessResult, title: str = "scijudge robustness") -> str:
    """The page: what was measured, the plot, the table, and what was left out."""
    excluded = ", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in result.excluded.items())
    parts = [(f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
             f"<style>{CSS}</style></head><body><h1>{html.escape(title)}</h1>"),
             ("<p class='note'>drop = mean(original − variant) over pairs of the same model, judge and original "
             f"item, with a {int(result.level * 100)}% percentile bootstrap interval over original items "
             f"({result.n_boot} resamples, seed {result.seed}); p_greater / p_tie: paired shares of original "
             "rated above / equal to its variant; auc: unpaired P(original &gt; variant) + ½ P(tie). Rows with "
             f"judge <code>{ALL_JUDGES}</code> pool all judges of a model.</p>"),
             f"<p class='note'>Left out — {html.escape(excluded or 'nothing')}.</p>"]
    parts += [f"<p class='note'>Note: {html.escape(n)}</p>" for n in result.notes]
    parts.append("<h2>Mean drop per judge</h2>" + html_img(drop_plot(result.table), "mean drop per judge and level"))
    parts.append("<h2>Table</h2>" + html_table(result.table))
    parts.append("</body></html>")
    return "\n".join(parts)


def write_robustness(result: RobustnessResult, out_dir: str | Path, *,
                     inputs: Iterable[str | Path | None] = ()) -> dict[str, Path]:
    """Write robustness.csv and robustness.html into ``out_dir`` (each whole or not at all, none over one of
    ``inputs``)."""
    out = Path(out_dir)
    paths = {"csv": out / "robustness.csv", "html": out / "robustness.html"}
    inputs = list(inputs)
    for path in paths.values():
        refuse_overwrite(path, inputs)
    with atomic_output(paths["csv"], newline="") as handle:
        result.table.to_csv(handle, index=False)
    write_text(paths["html"], render_robustness_html(result))
    return paths
