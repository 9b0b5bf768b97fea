"""The report's opening: a verdict per rubric (best judge, margin, paired test after Holm) and the
pairwise position-consistency section. Kept apart from the long tables in ``report.py``."""

from __future__ import annotations

import html
import math
from typing import Any

import numpy as np
import pandas as pd

from scijudge.metrics.calibration import CalibrationResult
from scijudge.metrics.calibration import COVERAGE_FLOOR
from scijudge.report.text import fmt_number

VERDICT_COLUMNS = ("judge", "track", "metric", "best", "value_best", "runner_up", "value_runner_up", "margin", "n",
                   "p", "p_holm", "holds", "coverage_best", "not_eligible")
_TRACKS = (("per_rubric", "kappa_w", "κw"), ("verdict_per_rubric", "kappa", "κ"))


def verdict_summary(result: CalibrationResult, alpha: float = 0.05) -> pd.DataFrame:
    """Per rubric: the contender with the highest agreement among those that judged at least ``COVERAGE_FLOOR``
    of the labelled units (the others are named in ``not_eligible`` with their coverage), its margin over the
    runner-up, and whether the paired bootstrap difference (on the units both judged) stays significant after
    Holm's correction across rubrics (``holm``, checked against statsmodels, whose ``multipletests`` runs a full
    garbage collection on every call)."""
    from scijudge.metrics.bootstrap import holm

    rows: list[dict[str, Any]] = []
    for attr, metric, _ in _TRACKS:
        frame: pd.DataFrame = getattr(result, attr)
        if frame.empty or metric not in frame:
            continue
        start = len(rows)
        for judge, g in frame.groupby("judge", sort=True):
            low = g["coverage"].fillna(0.0) < COVERAGE_FLOOR if "coverage" in g else pd.Series(False, g.index)
            excluded = ", ".join(f"{c} ({v:.2f})" for c, v in zip(g.loc[low, "contender"], g.loc[low, "coverage"]))
            ranked = g[~low].sort_values(metric, ascending=False, na_position="last")
            if ranked.empty:
                rows.append({"judge": judge, "track": "scores" if attr == "per_rubric" else "verdicts",
                             "metric": metric, "best": None, "value_best": float("nan"), "runner_up": None,
                             "value_runner_up": float("nan"), "margin": float("nan"), "n": None,
                             "p": float("nan"), "p_holm": float("nan"), "holds": False,
                             "coverage_best": float("nan"), "not_eligible": excluded})
                continue
            best = ranked.iloc[0]
            row: dict[str, Any] = {"judge": judge, "track": "scores" if attr == "per_rubric" else "verdicts",
                                   "metric": metric, "best": best["contender"], "value_best": best[metric],
                                   "runner_up": None, "value_runner_up": float("nan"), "margin": float("nan"),
                                   "n": best.get("n"), "p": float("nan"), "p_holm": float("nan"), "holds": False,
                                   "coverage_best": best.get("coverage", float("nan")), "not_eligible": excluded}
            if len(ranked) > 1:
                second = ranked.iloc[1]
                row.update(runner_up=second["contender"], value_runner_up=second[metric],
                           margin=best[metric] - second[metric], p=_paired_p(result.paired, judge, metric,
                                                                              best["contender"], second["contender"]))
            rows.append(row)
        block = rows[start:]
        p = np.array([r["p"] for r in block], dtype=float)
        finite = np.isfinite(p)
        if finite.any():
            adjusted = holm(p[finite])
            for r, value in zip([r for r, f in zip(block, finite) if f], adjusted):
                r["p_holm"] = float(value)
                r["holds"] = bool(value < alpha and r["margin"] > 0)
    return pd.DataFrame(rows, columns=list(VERDICT_COLUMNS))


def _paired_p(paired: pd.DataFrame, judge: str, metric: str, a: str, b: str) -> float:
    if paired.empty:
        return float("nan")
    sel = paired[(paired["judge"] == judge) & (paired["metric"] == metric)
                 & (((paired["a"] == a) & (paired["b"] == b)) | ((paired["a"] == b) & (paired["b"] == a)))]
    return float(sel["p"].iloc[0]) if len(sel) and "p" in sel else float("nan")


def verdict_sentence(row: pd.Series | dict[str, Any]) -> str:
    """One line per rubric, e.g. 'qa.correctness: best gpt-4o (κw 0.712), 0.120 ahead of llama; holds after Holm'."""
    symbol = "κw" if row["metric"] == "kappa_w" else "κ"
    excluded = row.get("not_eligible") or ""
    tail = f"; not eligible (coverage below {COVERAGE_FLOOR:g}): {excluded}" if excluded else ""
    if row["best"] is None:
        return f"{row['judge']}: no best: every contender judged too few units{tail}"
    return _verdict_text(row, symbol) + tail


def _verdict_text(row: pd.Series | dict[str, Any], symbol: str) -> str:
    text = f"{row['judge']}: best {row['best']} ({symbol} {fmt_number(row['value_best'])})"
    if row["runner_up"] is None or (isinstance(row["runner_up"], float) and math.isnan(row["runner_up"])):
        return text + "; the only judge compared"
    if float(row["margin"]) == 0:
        return (f"{row['judge']}: tie between {row['best']} and {row['runner_up']} ({symbol} "
                f"{fmt_number(row['value_best'])} each); no significant difference")
    text += f", {fmt_number(row['margin'])} ahead of {row['runner_up']} ({symbol} {fmt_number(row['value_runner_up'])})"
    if not math.isfinite(float(row["p"])):
        return text + "; no paired test (bootstrap off or too few common units)"
    verdict = "holds" if row["holds"] else "no significant difference"
    return text + f"; paired p {fmt_number(row['p'])}, Holm {fmt_number(row['p_holm'])}: {verdict}"


def verdict_html(result: CalibrationResult) -> str:
    """The opening section of the HTML report."""
    summary = verdict_summary(result)
    if summary.empty:
        return ""
    items = "".join(f"<li>{html.escape(verdict_sentence(r))}</li>" for _, r in summary.iterrows())
    return ("<h2 id='verdict'>Verdict per rubric</h2><p class='note'>Best contender by agreement with the human consensus, its "
            "margin over the runner-up, and the paired bootstrap test of that difference after Holm's correction "
            f"across rubrics (α = 0.05).</p><ul>{items}</ul>")


def position_html(result: CalibrationResult, table: Any) -> str:
    """The pairwise position-consistency section (nothing when no pairwise judge ran in both orders)."""
    position = getattr(result, "position", None)
    if position is None or position.empty:
        return ""
    return ("<h2>Pairwise position consistency</h2><p class='note'>flip_rate: share of items whose preference "
            "changes with the order shown; first_slot_share: share of decisive judgments preferring the answer "
            "shown first (0.5 is unbiased; p: binomial test); agreement_resolved: agreement with the human verdict "
            "after combining both orders (a disagreement counts as a tie).</p>" + table(position))


__all__ = ["position_html", "verdict_html", "verdict_sentence", "verdict_summary"]
