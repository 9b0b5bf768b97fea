"""The selective-judging section of the calibration report: agreement against coverage by confidence, per judge
with rating probabilities, with the threshold fixed-sequence testing guarantees marked (issue 37)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd


def selective_plot(curves: pd.DataFrame, png: Callable[[Any], str], plt: Any) -> str | None:
    """One panel per judge: a line per contender, the guaranteed point marked with a star, the target dashed."""
    if curves is None or curves.empty:
        return None
    judges = sorted(curves["judge"].unique())[:12]
    cols = min(4, len(judges))
    rows = -(-len(judges) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 3.4 * rows), squeeze=False, layout="constrained")
    for ax in axes.flat[len(judges):]:
        ax.set_visible(False)
    for ax, judge in zip(axes.flat, judges):
        sel = curves[curves["judge"] == judge]
        for contender, g in sel.groupby("contender", sort=True):
            line = ax.plot(g["coverage"], g["agreement"], "-", lw=1.2, label=str(contender))[0]
            mark = g[g["guaranteed"]]
            if len(mark):
                ax.plot(mark["coverage"], mark["agreement"], "*", ms=10, color=line.get_color())
        ax.axhline(float(sel["target"].iloc[0]), ls="--", color="#999", lw=1)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1.02)
        ax.set_xlabel("coverage (most confident first)")
        ax.set_ylabel("agreement with humans")
        ax.set_title(judge, fontsize=8)
    axes[0][0].legend(fontsize=7, loc="lower left")
    return png(fig)


def selective_section_html(curves: pd.DataFrame, table: Callable[[pd.DataFrame], str], png: Callable[[Any], str],
                           plt: Any) -> str:
    """The HTML section ('' when no contender has rating probabilities)."""
    from scijudge.metrics.selective.curve import guaranteed_points

    if curves is None or curves.empty:
        return ""
    points = guaranteed_points(curves)
    first = points.iloc[0]
    src = selective_plot(curves, png, plt)
    img = f'<img src="{src}" alt="selective curves">' if src else ""
    return ("<h2>Selective judging (agreement against coverage)</h2>"
            f"<p class='note'>Judgments ordered from the most confident (the probability the judge put on the level "
            f"it gave). ★ marks the threshold fixed-sequence testing guarantees: with probability ≥ "
            f"{1 - float(first['risk']):.2g}, {_agreement_words(first)} ≥ {float(first['target']):.2g} on the judgments "
            "it keeps (exact binomial tests; <code>calibrate --selective-target/--selective-risk/"
            "--selective-tolerance</code> set them, <code>scijudge cascade</code> chooses a cascade). Figures on fewer "
            f"than 30 labelled items are wide.</p>{img}"
            + table(points))


def selective_lines(curves: pd.DataFrame) -> list[str]:
    """Terminal lines: per contender and judge with a guaranteed threshold, its coverage and agreement; one line
    counting the others."""
    from scijudge.metrics.selective.curve import guaranteed_points

    if curves is None or curves.empty:
        return []
    points = guaranteed_points(curves)
    out = []
    for row in points[points["threshold"].notna()].to_dict("records"):
        out.append(f"selective: {row['contender']} on {row['judge']}: confidence >= {row['threshold']:.3g} keeps "
                   f"{row['coverage']:.1%} of {row['n_labelled']} labelled at {_agreement_words(row)} {row['agreement']:.3f} "
                   f"(guaranteed >= {row['target']:g} at risk {row['risk']:g}; {row['agreement_all']:.3f} on all)")
    none = points[points["threshold"].isna()]
    if len(none):
        first = none.iloc[0]
        out.append(f"selective: no confidence threshold guarantees {_agreement_words(first)} {first['target']:g} at risk "
                   f"{first['risk']:g} for {len(none)} of {len(points)} (contender, judge) pairs with rating "
                   "probabilities (the report's selective curves show them; `scijudge cascade` sets other targets)")
    return out


def _agreement_words(row: Any) -> str:
    """'exact agreement', or 'agreement within T' for a curve drawn at tolerance T."""
    tolerance = float(row["tolerance"]) if "tolerance" in row and row["tolerance"] == row["tolerance"] else 0.0
    return "exact agreement" if tolerance == 0 else f"agreement within {tolerance:g}"
