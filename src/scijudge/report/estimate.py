"""The estimates section of a report: PPI++ vs human-only vs judge-only with intervals, per group, as HTML."""

from __future__ import annotations

import html
from pathlib import Path

import numpy as np
import pandas as pd

from scijudge._files import write_text

_METHOD_STYLE = {"ppi": ("PPI++", "#1f77b4", "o"), "ppi-cal": ("PPI++ calibrated", "#9467bd", "D"),
                 "human-only": ("human only", "#2ca02c", "s"), "judge-only": ("judge only", "#d62728", "^")}
MAX_PLOTTED_ROWS = 40


def design_warnings(table: pd.DataFrame) -> list[str]:
    """The label-selection warnings of an estimate table with picks (its ``design_notes``): what ``estimate``
    prints and the viewer's calibration page shows, in the same words."""
    notes = table.attrs.get("design_notes") or {}
    found = []
    if notes.get("labels_outside_design"):
        found.append(f"{notes['labels_outside_design']} items the design did not pick have labels; those labels were "
                     "left out (they would break its weights)")
    if notes.get("picked_unlabelled"):
        found.append(f"{notes['picked_unlabelled']} picked items have no label: the estimate assumes they are missing "
                     "at random")
    return found


def estimate_plot(table: pd.DataFrame) -> str | None:
    """One line per (judge, model, group): the three estimates with their intervals (a base64 PNG)."""
    from scijudge.report.page import png_uri, pyplot

    shown = table.dropna(subset=["estimate"])
    keys = list(dict.fromkeys(zip(shown["judge"], shown["model"], shown["group"])))[:MAX_PLOTTED_ROWS]
    if not keys:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 0.45 * len(keys) + 1.2))
    for offset, (method, (name, colour, marker)) in enumerate(_METHOD_STYLE.items()):
        rows = shown[shown["method"] == method].set_index(["judge", "model", "group"])
        ys, xs, los, his = [], [], [], []
        for y, key in enumerate(keys):
            if key in rows.index:
                row = rows.loc[key]
                ys.append(y + (offset - 1.5) * 0.18)
                xs.append(row["estimate"])
                los.append(row["estimate"] - row["lo"])
                his.append(row["hi"] - row["estimate"])
        ax.errorbar(xs, ys, xerr=[los, his], fmt=marker, color=colour, label=name, capsize=2)
    ax.set_yticks(np.arange(len(keys)), [f"{g} · {m} · {j.split('.')[-1]}" for j, m, g in keys], fontsize=8)
    ax.invert_yaxis()
    level = int(round((1 - float(shown["alpha"].iloc[0])) * 100))
    ax.set_xlabel(f"mean human score (difference rows: A − B), {level}% interval")
    ax.legend(fontsize=8, loc="best")
    return png_uri(fig)


def estimate_section_html(table: pd.DataFrame, coverage: pd.DataFrame | None = None,
                          needed: pd.DataFrame | None = None, provenance: str | None = None) -> str:
    """HTML for the estimates: a plot, the table, conformal coverage and labels needed when given; ``provenance``
    (what the labels are, and a warning when a model made some) as a line under the heading."""
    from scijudge.report.page import html_img, html_table

    parts = ["<h2>Estimates of the mean human score</h2>",
             *([f"<p class='note'><b>{html.escape(provenance)}</b></p>"] if provenance else []),
             "<p class='note'>PPI++ (<code>ppi</code>) corrects the judge's scores on all scored items with the "
             "human labels on a random subset; <code>ppi-cal</code> does the same after a cross-fitted monotone "
             "(isotonic) calibration of the judge's score, so a shifted or bunched scale still helps; a "
             "<code>ppi-cal</code> row whose model reads <code>a + b + c</code> (its design says so) calibrates several models' scores "
             "at once (least squares), and is recommended when it is narrower than every single-model estimate; "
             "<code>recommended</code> marks the narrowest of these and human-only, compared once at alpha = 0.1 so "
             "every alpha reports the same method (a tie goes to the simpler method; a zero-width interval is never "
             "recommended); ppi and human-only intervals are Student's t on n - 1 df; <code>note</code> flags intervals on "
             "few units, of zero width, of identical inputs or clipped to the scale; human-only uses the labels alone, judge-only "
             "the judge alone (biased when the judge is). Abstentions (<code>n_abstained</code>) and labelled items without a judgment "
             "(<code>n_label_only</code>) are counted, never imputed.</p>",
             html_img(estimate_plot(table), "estimates with intervals")]
    cols = ["judge", "model", "group", "method", "estimate", "lo", "hi", "n_labeled", "n_unlabeled", "n_abstained",
            "n_label_only", "lam", "paired", "design", "recommended", "note"]
    parts.append(html_table(table[[c for c in cols if c in table]]))
    if coverage is not None and not coverage.empty:
        parts.append("<h3>Conformal sets of human scores</h3><p class='note'>Split-conformal on the labelled items; "
                     "coverage measured on held-out labelled items over random splits.</p>")
        parts.append(html_table(coverage))
    if needed is not None and not needed.empty:
        parts.append("<h3>Labels needed for the target interval width</h3>")
        parts.append(html_table(needed))
    return "\n".join(parts)


def write_estimate_html(table: pd.DataFrame, path: str | Path, coverage: pd.DataFrame | None = None,
                        needed: pd.DataFrame | None = None, title: str = "scijudge estimates",
                        provenance: str | None = None) -> Path:
    """A self-contained page with the estimates section (inline CSS and PNG)."""
    from scijudge.report.page import CSS

    path = Path(path)
    page = (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{CSS}</style></head><body><h1>{html.escape(title)}</h1>"
            + estimate_section_html(table, coverage, needed, provenance) + "</body></html>")
    write_text(path, page)  # whole or not at all
    return path
