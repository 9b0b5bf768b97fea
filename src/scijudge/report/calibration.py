"""Calibration report: a self-contained HTML page (inline CSS and PNG plots), the same numbers as JSON,
and a console summary.

The HTML needs no network to view: plots are matplotlib (Agg) PNGs embedded as base64, styles are inline.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from scijudge._files import atomic_output, refuse_overwrite, write_text
from scijudge.metrics.calibration import POOLED, CalibrationResult, frame_records
from scijudge.report.summary import (
    position_html,
    verdict_html,
    verdict_sentence,
    verdict_summary,
)
from scijudge.report.page import CSS, html_img, html_table, png_uri, pyplot
from scijudge.report.text import fmt_cell, fmt_interval, fmt_number, print_frame



_LEADER_COLS = [
    ("rank", None), ("contender", None), ("scale", None), ("n_judges", None), ("n_items", None), ("n", None),
    ("coverage", None), ("kappa_w", "κw (quadratic)"), ("kappa_linear", "κw (linear)"), ("alpha_ordinal", "α ordinal"),
    ("alpha_interval", "α interval"),
    ("ac2", "AC2"), ("spearman", "Spearman ρ"), ("kendall", "Kendall τb"), ("pearson", "Pearson r"),
    ("icc_a1", "ICC(A,1)"), ("icc_c1", "ICC(C,1)"), ("bias", "bias (judge−human)"), ("mae", "MAE"),
    ("exact", "exact"), ("within1", "±1 step"), ("top_share_judge", "top share judge"),
    ("top_share_human", "top share human"), ("sd_ratio", "SD ratio"), ("brier", "Brier"), ("ece", "ECE"),
    ("ece_mass", "ECE (equal mass)"),
]
_KEY_COLS = [("rank", None), ("contender", None), ("scale", None), ("n", None), ("coverage", None),
             ("kappa_w", "κw (quadratic)"), ("kappa_linear", "κw (linear)"), ("mae", "MAE"),
             ("bias", "bias (judge−human)"), ("spearman", "Spearman ρ")]
"""The leaderboard's first table: the statistics a reader needs, readable at 1,200 px; the rest is folded."""
_VERDICT_COLS = [
    ("rank", None), ("contender", None), ("judge", None), ("family", None), ("classes", None), ("n", None),
    ("coverage", None), ("accuracy", None), ("balanced_accuracy", "balanced acc."), ("macro_f1", "macro-F1"),
    ("kappa", "κ"), ("mcc", "MCC"), ("brier", "Brier"), ("ece", "ECE"), ("ece_mass", "ECE (equal mass)"),
]


# --- JSON ------------------------------------------------------------------------------------------------


def report_dict(result: CalibrationResult, robustness: pd.DataFrame | None = None) -> dict[str, Any]:
    """Everything in the report as a JSON-ready dict (NaN written as null)."""
    out = result.to_dict()
    out["generated_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    out["robustness"] = frame_records(robustness) if robustness is not None else []
    out["verdicts"] = frame_records(verdict_summary(result))
    return out


def write_json(result: CalibrationResult, path: str | Path, robustness: pd.DataFrame | None = None) -> Path:
    """Write ``report_dict`` as indented JSON."""
    path = Path(path)
    write_text(path, json.dumps(report_dict(result, robustness), indent=2, ensure_ascii=False, allow_nan=False))
    return path


# --- plots -----------------------------------------------------------------------------------------------


def forest_plot(result: CalibrationResult, stat: str = "kappa_w") -> str | None:
    """Forest plot of a statistic with its interval, per rubric and pooled, one colour per contender."""
    rows = pd.concat([result.per_rubric, result.leaderboard], ignore_index=True) if not result.per_rubric.empty else result.per_rubric
    if rows.empty or stat not in rows:
        return None
    rows = rows[np.isfinite(rows[stat].astype(float))]
    if rows.empty:
        return None
    plt = pyplot()
    judges = sorted(rows["judge"].unique(), key=lambda j: (j == POOLED, j))
    contenders = sorted(rows["contender"].unique())
    colours = plt.get_cmap("tab10")
    fig, ax = plt.subplots(figsize=(8, 0.32 * len(judges) * len(contenders) + 1.2), layout="constrained")
    y: float = 0.0
    ticks: list[float] = []
    labels: list[str] = []
    first: dict[tuple[Any, Any], dict[str, Any]] = {}  # (judge, contender) -> its first row, as the boolean selection per pair gave it
    for key, r in zip(zip(rows["judge"], rows["contender"]), rows.to_dict("records")):
        first.setdefault(key, r)
    # one artist per contender and mark (not two per row): drawing 80 separate lines was most of the plot's time
    bars: dict[int, list[tuple[float, float, float]]] = {}
    marks: dict[tuple[int, str], list[tuple[float, float]]] = {}
    for judge in judges:
        for ci, contender in enumerate(contenders):
            r = first.get((judge, contender))
            if r is None:
                continue
            lo, hi = r.get(f"{stat}_lo", np.nan), r.get(f"{stat}_hi", np.nan)
            if np.isfinite(lo) and np.isfinite(hi) and hi - lo > 1e-9 * max(1.0, abs(float(r[stat]))):
                bars.setdefault(ci, []).append((y, lo, hi))  # no bar for a degenerate interval
            marks.setdefault((ci, "D" if judge == POOLED else "o"), []).append((float(r[stat]), y))
            ticks.append(y)
            labels.append(f"{judge} — {contender}")
            y -= 1
        y -= 0.5
    for ci, segments in bars.items():
        ys, los, his = zip(*segments)
        _inside_the_axes([ax.hlines(ys, los, his, colors=[colours(ci % 10)], lw=2, capstyle="projecting")])
    for (ci, marker), points in sorted(marks.items(), key=lambda kv: (kv[0][0], kv[0][1] == "D")):
        xs, ys = zip(*points)
        ax.plot(xs, ys, marker, color=colours(ci % 10), linestyle="none", label=contenders[ci])
    _inside_the_axes(ax.lines)
    ax.set_yticks(ticks, labels, fontsize=8)
    ax.axvline(0, color="#999", lw=0.8)
    left, right = ax.get_xlim()
    if right - left < 0.05:  # every value (nearly) equal: a readable axis, not a 1e-15 one
        middle = float(rows[stat].astype(float).mean())
        ax.set_xlim(min(middle - 0.1, -0.05), max(middle + 0.1, 0.05))
    ax.set_xlabel(f"{stat} with {int(result.level * 100)}% bootstrap interval")
    handles, names = ax.get_legend_handles_labels()
    unique = dict(zip(names, handles))
    fig.legend(unique.values(), unique.keys(), fontsize=8, loc="outside upper center", ncol=min(len(unique), 4))
    return png_uri(fig)  # the legend above the axes, never over a point


PANELS_PER_ROW = 3
"""Small multiples per row: three 3.6-inch panels at 110 dpi are 1,190 px, shown unscaled on a 1,400 px screen."""


def _panel_grid(plt: Any, n: int, size: float = 3.6) -> tuple[Any, list[Any]]:
    """A constrained figure of ``n`` square panels, ``PANELS_PER_ROW`` to a row (the unused ones hidden)."""
    cols = min(n, PANELS_PER_ROW)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(size * cols, size * rows + 0.3), squeeze=False,
                             layout="constrained")
    flat = list(axes.flat)
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def _inside_the_axes(artists: Iterable[Any]) -> None:
    """Leave artists drawn inside an axes' box (data marks, cell labels, an inner legend) out of the constrained
    layout: they never reach past the box, so the layout is the same, without measuring each of them twice."""
    for artist in artists:
        artist.set_in_layout(False)


def confusion_plot(result: CalibrationResult) -> str | None:
    """Heatmaps of the pooled human × judge confusion matrix of each contender (ordinal tracks)."""
    conf = result.confusion[(result.confusion["judge"] == POOLED) & ~result.confusion["track"].str.startswith("verdict")]
    keys = sorted(set(zip(conf["contender"], conf["track"])))
    if not keys:
        return None
    plt = pyplot()
    fig, axes = _panel_grid(plt, len(keys))
    for ax, (contender, track) in zip(axes, keys):
        m = result.confusion_matrix(contender, POOLED, track)
        ax.imshow(m.to_numpy(), cmap="Blues")
        top = max(float(m.to_numpy().max()), 1.0)
        ax.set_xticks(range(m.shape[1]), [f"{v:g}" for v in m.columns], fontsize=7)
        ax.set_yticks(range(m.shape[0]), [f"{v:g}" for v in m.index], fontsize=7)
        counts = m.to_numpy()
        for i in range(m.shape[0]):
            for j in range(m.shape[1]):
                ax.text(j, i, int(counts[i, j]), ha="center", va="center", fontsize=6,
                        color="white" if counts[i, j] > top / 2 else "black")
        _inside_the_axes(ax.texts)
        ax.set_xlabel("judge")
        ax.set_ylabel("human")
        ax.set_title(f"{contender}\n{track}", fontsize=8)
    return png_uri(fig)


def reliability_plot(result: CalibrationResult) -> str | None:
    """Reliability diagrams (equal-width bins) of the pooled rows: accuracy against confidence."""
    rel = result.reliability[(result.reliability["judge"] == POOLED) & (result.reliability["strategy"] == "uniform")]
    if rel.empty:
        return None
    plt = pyplot()
    keys = sorted(set(zip(rel["contender"], rel["track"])))
    fig, axes = _panel_grid(plt, len(keys))
    for ax, (contender, track) in zip(axes, keys):
        sel = rel[(rel["contender"] == contender) & (rel["track"] == track)]
        ax.plot([0, 1], [0, 1], ls="--", color="#999", lw=1)
        ax.bar(sel["lower"], sel["accuracy"], width=sel["upper"] - sel["lower"], align="edge", alpha=0.5,
               edgecolor="k", label="observed accuracy")
        ax.plot(sel["confidence"], sel["accuracy"], "o-", ms=3, label="bin mean")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_xlabel(f"confidence ({sel['source'].iloc[0]})")
        ax.set_ylabel("accuracy")
        ax.set_title(f"{contender}\n{track}", fontsize=8)
    handles, names = axes[0].get_legend_handles_labels()
    fig.legend(handles, names, fontsize=7, loc="outside upper center", ncol=len(names))  # off the bars and points
    return png_uri(fig)


def robustness_plot(robustness: pd.DataFrame) -> str | None:
    """Grouped bars per model: the mean drop (original − variant) per judge and level, with its interval."""
    if robustness is None or robustness.empty:
        return None
    plt = pyplot()
    shown = robustness[robustness["judge"] != "*"]
    models = sorted(shown["model"].unique())
    if not models:
        return None
    levels = sorted(shown["level"].unique())
    fig, axes = plt.subplots(len(models), 1, figsize=(9, 3.2 * len(models) + 0.6), squeeze=False,
                             layout="constrained")
    for ax, model in zip(axes[:, 0], models):
        sel = shown[shown["model"] == model]
        judges = sorted(sel["judge"].unique())
        x = np.arange(len(judges))
        width = 0.8 / max(len(levels), 1)
        for i, level in enumerate(levels):
            rows = sel[sel["level"] == level].set_index("judge").reindex(judges)
            drop = rows["drop"].astype(float).to_numpy()
            err = np.vstack([drop - rows["drop_lo"].astype(float), rows["drop_hi"].astype(float) - drop])
            ax.bar(x + (i - (len(levels) - 1) / 2) * width, drop, width, label=level,
                   yerr=np.where(np.isfinite(err), err, 0.0), capsize=2)  # NaN: no bar
        ax.axhline(0.0, color="#888", linewidth=0.8)
        ax.set_xticks(x, [j.split(".")[-1] for j in judges], rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("mean drop (original − variant)")
        ax.set_title(model, fontsize=9)
    handles, names = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, names, fontsize=7, ncol=max(len(levels), 1), loc="outside upper center")
    return png_uri(fig)


# --- HTML ------------------------------------------------------------------------------------------------


def _fmt(value: Any) -> str:
    """Three decimals, never '-0.000' (see ``report_text.fmt_number``)."""
    return fmt_number(value)


def _with_ci(frame: pd.DataFrame, columns: list[tuple[str, str | None]]) -> pd.DataFrame:
    """Display frame: chosen columns, numbers to 3 decimals (counts as integers), '[lo, hi]' after statistics
    that have one."""
    if not frame.columns.is_unique:  # a repeated name reads as several values: the row-by-row way
        return _with_ci_by_rows(frame, columns)
    position = {name: i for i, name in enumerate(frame.columns)}
    rows = frame.values  # what ``iterrows`` makes each row of (one array of the frame's common type): the same values
    out = {}
    for col, title in columns:
        if col not in frame:
            continue
        j, lo, hi = position[col], position.get(f"{col}_lo"), position.get(f"{col}_hi")
        values = []
        for row in rows:
            text = fmt_cell(row[j], col)
            interval = fmt_interval(None if lo is None else row[lo], None if hi is None else row[hi])
            values.append(f"{text} {interval}" if interval else text)
        out[title or col] = values
    return pd.DataFrame(out)


def _with_ci_by_rows(frame: pd.DataFrame, columns: list[tuple[str, str | None]]) -> pd.DataFrame:
    out = {}
    for col, title in columns:
        if col not in frame:
            continue
        values = []
        for _, row in frame.iterrows():
            text = fmt_cell(row[col], col)
            interval = fmt_interval(row.get(f"{col}_lo"), row.get(f"{col}_hi"))
            values.append(f"{text} {interval}" if interval else text)
        out[title or col] = values
    return pd.DataFrame(out)


def _key_table(frame: pd.DataFrame, columns: list[tuple[str, str | None]], table_id: str) -> str:
    """A short table whose intervals sit under their values: fits 1,200 px without scrolling."""
    head = "".join(f"<th>{html.escape(title or col)}</th>" for col, title in columns if col in frame)
    body = []
    for _, row in frame.iterrows():
        cells = []
        for col, _ in columns:
            if col not in frame:
                continue
            interval = fmt_interval(row.get(f"{col}_lo"), row.get(f"{col}_hi"))
            extra = f"<span class='ci'>{html.escape(interval)}</span>" if interval else ""
            cells.append(f"<td>{html.escape(fmt_cell(row[col], col))}{extra}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (f"<table class='key' id='{table_id}'><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody>"
            "</table>")


def render_html(result: CalibrationResult, robustness: pd.DataFrame | None = None,
                title: str = "scijudge calibration report", estimates: pd.DataFrame | None = None) -> str:
    """The whole report as one HTML string with inline CSS and base64 PNG plots."""
    parts = [(f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
              f"<style>{CSS}</style></head><body><h1>{html.escape(title)}</h1>")]
    parts.append(f"<p class='note'>Intervals: {int(result.level * 100)}% percentile bootstrap over items "
                 f"({result.n_boot} resamples, seed {result.seed}); all ratings of an item are resampled together. "
                 "Abstentions lower coverage and are never imputed. Scales: "
                 + ", ".join(f"<code>{html.escape(j)}</code> {s[0]:g}–{s[1]:g} step {s[2]:g}" for j, s in result.scales.items())
                 + ". Rounding, the one rule: a score or human median between steps is put on the step grid by "
                 "rounding half-to-even counted in steps from the scale's low end (on 1–5 step 1, 2.5 and 3.5 both "
                 "become 3), for κ, α, AC2, exact agreement and confusion matrices, and for the human consensus of a "
                 "discrete scale; on a continuous scale MAE, bias and correlations use the raw values.</p>")
    provenance = getattr(result, "provenance", None) or {}
    if provenance.get("labels"):
        warning = f" Warning: {provenance['warning']}" if provenance.get("warning") else ""
        parts.append(f"<p class='note'><b>{html.escape(str(provenance['labels']) + warning)}</b></p>")
    parts.append(verdict_html(result))
    jury_table = getattr(result, "jury_vs_best_member", None)
    if jury_table is not None and not jury_table.empty:
        parts.append("<h2>Juries against each member</h2><p class='note'>Per item, the member's absolute error minus "
                     "the jury's (&gt; 0: the jury is closer to the human consensus), paired t over the items both "
                     "judged, Holm across the jury's members (<code>jury_vs_best_member</code>).</p>"
                     + html_table(jury_table))
    for note in result.notes:
        parts.append(f"<p class='note'>Note: {html.escape(note)}</p>")
    if not result.leaderboard.empty:
        parts.append("<h2>Leaderboard (scores, pooled over rubrics)</h2>")
        parts.append("<p class='note'>Ranked by quadratic-weighted κ within each scale; equal κ share a rank "
                     f"(a tie). {int(result.level * 100)}% intervals under each value.</p>")
        parts.append(_key_table(result.leaderboard, _KEY_COLS, "leaderboard-key"))
        parts.append("<details><summary>All statistics</summary>" + html_table(_with_ci(result.leaderboard, _LEADER_COLS))
                     + "</details>")
        parts.append("<h2>Weighted κ per rubric</h2>" + html_img(forest_plot(result), "forest plot of weighted kappa"))
        parts.append("<h2>Per rubric</h2>")
        cols = [("contender", None), ("judge", None)] + [c for c in _LEADER_COLS if c[0] not in ("rank", "contender", "n_judges")]
        cols += [("bias_p", "bias p (t-test)"), ("bias_p_holm", "bias p (Holm)"), ("notes", None)]
        parts.append("<details><summary>Every statistic per rubric</summary>"
                     + html_table(_with_ci(result.per_rubric, cols)) + "</details>")
        parts.append("<h2>Confusion matrices (pooled)</h2>" + html_img(confusion_plot(result), "confusion matrices"))
        parts.append(_confusion_tables(result))
    if not result.verdict_leaderboard.empty:
        parts.append("<h2>Verdicts (pooled per judge family)</h2>")
        parts.append(html_table(_with_ci(result.verdict_leaderboard, _VERDICT_COLS)))
        parts.append("<h2>Verdicts per rubric</h2>")
        parts.append(html_table(_with_ci(result.verdict_per_rubric, [c for c in _VERDICT_COLS if c[0] != "rank"] + [("notes", None)])))
    reliability = reliability_plot(result)
    rel_summary = pd.concat([result.per_rubric, result.verdict_per_rubric], ignore_index=True)
    sel = (rel_summary[rel_summary["calibration_source"].notna()] if "calibration_source" in rel_summary
           else rel_summary.iloc[0:0])
    if reliability is not None or not sel.empty:  # no empty section when no judgment carried a confidence
        parts.append("<h2>Reliability diagrams</h2>" + html_img(reliability, "reliability diagrams"))
        if not sel.empty:
            parts.append(html_table(sel[[c for c in ("contender", "judge", "calibration_source", "n_calibration", "brier",
                                                 "ece", "ece_mass") if c in sel]]))
    from scijudge.report.selective import selective_section_html  # issue 37

    parts.append(selective_section_html(getattr(result, "selective", None), html_table, png_uri, pyplot()))
    parts.append("<h2>Human ceiling (agreement among annotators)</h2>")
    if result.human_ceiling.empty:
        parts.append("<p class='note'>Fewer than two annotators per unit: no ceiling.</p>")
    else:
        parts.append(html_table(_with_ci(result.human_ceiling, [("judge", None), ("track", None), ("n_units", None),
                                                            ("n_annotators", None), ("alpha_ordinal", "α ordinal"),
                                                            ("alpha_interval", "α interval"), ("alpha_nominal", "α nominal"),
                                                            ("ac2", "AC2/AC1"), ("pairwise_kappa", "mean pairwise κ"),
                                                            ("pairwise_exact", "mean pairwise exact")])))
    parts.append(position_html(result, html_table))
    if not result.paired.empty:
        parts.append(_paired_section(result))
    if robustness is not None and not robustness.empty:
        parts.append("<h2>Robustness</h2><p class='note'>The table of <code>scijudge robustness</code> (one "
                     "implementation): each variant paired with its original by contender, judge, part and item; "
                     "drop = original − variant (negative for an injection that inflates the score), with a "
                     "cluster bootstrap interval over original items; p_greater / p_tie the paired shares, auc the "
                     "unpaired P(original &gt; variant) + ½ P(tie); judge <code>*</code> pools a model's judges. "
                     "(Before this version calibrate's section used a second implementation with a per-judge "
                     "bootstrap, no part matching and only <code>scijudge perturb</code> ids.)</p>"
                     + html_img(robustness_plot(robustness), "robustness bars"))
        parts.append(html_table(_with_ci(robustness, [(c, None) for c in (
            "model", "judge", "level", "n_pairs", "mean_original", "mean_variant", "drop", "p_greater", "p_tie",
            "auc", "n_unchanged", "n_abstained", "n_unpaired")])))
    if estimates is not None and not estimates.empty:  # from scijudge.estimation.estimate
        from scijudge.report.estimate import estimate_section_html

        parts.append(estimate_section_html(estimates))
    parts.append("</body></html>")
    return "\n".join(parts)


def _paired_section(result: CalibrationResult) -> str:
    parts = ["<h2>Paired comparisons</h2>"]
    parts.append("<p class='note'>A − B on the units both contenders rated; p from the paired bootstrap; Holm "
                 "correction across rubrics for each pair and metric (pooled rows are not corrected).</p>")
    parts.append(html_table(_with_ci(result.paired, [("a", None), ("b", None), ("judge", None), ("metric", None), ("n", None),
                                                 ("value_a", None), ("value_b", None), ("diff", None), ("p", None),
                                                 ("p_holm", None), ("better", None)])))
    return "\n".join(parts)


def _confusion_tables(result: CalibrationResult) -> str:
    out = []
    conf = result.confusion[(result.confusion["judge"] != POOLED)]
    for (contender, judge, _track), rows in conf.groupby(["contender", "judge", "track"], sort=True):
        m = rows.pivot(index="human", columns="judge_value", values="count")  # = result.confusion_matrix(...)
        m.index = [f"human {v:g}" if isinstance(v, float) else f"human {v}" for v in m.index]
        m.columns = [f"{v:g}" if isinstance(v, float) else str(v) for v in m.columns]
        out.append(f"<details><summary>{html.escape(contender)} — {html.escape(judge)}</summary>"
                   + m.to_html(escape=True, border=0) + "</details>")
    return "".join(out)


def write_html(result: CalibrationResult, path: str | Path, robustness: pd.DataFrame | None = None,
               title: str = "scijudge calibration report") -> Path:
    """Write ``render_html`` to a file."""
    path = Path(path)
    write_text(path, render_html(result, robustness, title))
    return path


def write_report(result: CalibrationResult, out_dir: str | Path, robustness: pd.DataFrame | None = None, *,
                 inputs: Iterable[str | Path | None] = ()) -> dict[str, Path]:
    """Write report.html, report.json and one CSV per table into ``out_dir`` (each whole or not at all; none over
    one of ``inputs``, checked before the first is written); returns their paths."""
    out = Path(out_dir)
    frames = {name: frame for name, frame in dict(result.frames(), robustness=robustness).items()
              if frame is not None and not frame.empty}
    inputs = list(inputs)
    for name in ("report.html", "report.json", *(f"{name}.csv" for name in frames)):
        refuse_overwrite(out / name, inputs)
    paths = {"html": write_html(result, out / "report.html", robustness),
             "json": write_json(result, out / "report.json", robustness)}
    for name, frame in frames.items():
        paths[name] = out / f"{name}.csv"
        with atomic_output(paths[name], newline="") as handle:
            frame.to_csv(handle, index=False)
    return paths


# --- console -----------------------------------------------------------------------------------------------


def _ci(row: pd.Series, col: str) -> str:
    interval = fmt_interval(row.get(f"{col}_lo"), row.get(f"{col}_hi"), 2)
    return f"{_fmt(row.get(col))} {interval}" if interval else _fmt(row.get(col))


def print_summary(result: CalibrationResult, robustness: pd.DataFrame | None = None, console: Any = None,
                  *, piped: bool | None = None) -> None:
    """Verdict per rubric first, then the leaderboards, paired differences, position consistency and robustness.

    On a terminal the tables are rich tables with rounded numbers; piped to a file or program they are
    printed as CSV with full values, so nothing is cut.
    """
    from scijudge.report.console import plain_console

    console = console or plain_console()
    piped = not console.is_terminal if piped is None else piped

    def show(frame: pd.DataFrame, title: str, columns: list[str]) -> None:
        if frame is not None and not frame.empty:
            print_frame(frame[[c for c in columns if c in frame]], title, console, piped=piped)

    def say(text: str) -> None:
        console.print(f"# {text}" if piped else text, markup=False, highlight=False, soft_wrap=True)

    for _, row in verdict_summary(result).iterrows():
        say(verdict_sentence(row))
    show(getattr(result, "jury_vs_best_member", None), "Juries against each member (member MAE - jury MAE, Holm)",
         ["jury", "member", "best_member", "n_items", "mae_member", "mae_jury", "diff", "diff_lo", "diff_hi", "p",
          "p_holm", "warning"])
    show(result.leaderboard, "Calibration leaderboard (scores, pooled over rubrics)",
         ["rank", "contender", "scale", "n", "coverage", "kappa_w", "kappa_w_lo", "kappa_w_hi", "kappa_linear", "bias", "bias_lo",
          "bias_hi", "mae", "spearman", "top_share_judge", "top_share_human"])
    show(result.verdict_leaderboard, "Verdicts (pooled per family)",
         ["rank", "contender", "family", "n", "coverage", "accuracy", "kappa", "kappa_lo", "kappa_hi", "macro_f1", "mcc"])
    if not result.human_ceiling.empty:
        show(result.human_ceiling, "Human ceiling", ["judge", "track", "n_units", "alpha_ordinal", "alpha_nominal",
                                                     "pairwise_kappa"])
    if not result.paired.empty:
        sig = result.paired[result.paired["p_holm"] < 0.05]
        say(f"Paired comparisons: {len(sig)} of {len(result.paired)} differences significant after Holm (p < 0.05).")
        show(sig[sig["judge"] == POOLED], "Significant pooled differences (A − B)",
             ["a", "b", "track", "metric", "diff", "diff_lo", "diff_hi", "p", "better"])
    show(getattr(result, "position", None), "Pairwise position consistency",
         ["contender", "judge", "n_both_orders", "flip_rate", "first_slot_share", "first_slot_p",
          "agreement_resolved"])
    if robustness is not None and not robustness.empty:
        show(robustness, "Robustness (drop = original − variant, cluster bootstrap over items)",
             ["model", "judge", "level", "n_pairs", "mean_original", "mean_variant", "drop", "drop_lo", "drop_hi",
              "p_greater", "auc"])
    from scijudge.report.selective import selective_lines  # issue 37

    for line in selective_lines(getattr(result, "selective", None)):
        say(line)
    for note in result.notes:
        say(f"note: {note}")
