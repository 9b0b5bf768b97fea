"""A recorded-like rating study from the bundled examples, for coverage measurements of estimators and designs.

``datasets/jury_example/panel.jsonl`` (three judges' scores of 12 items x 9 rubrics, MIT, synthetic: see its card)
matched to ``datasets/yescieval_example/labels.jsonl`` (two annotators per unit): 108 units with the mean human
rating and each judge's score (abstentions left out). A study of ``size`` units is drawn from those units with
replacement (the empirical joint distribution of human and judge scores kept whole), so label sets of n = 50
are a small share of it, as in a real study; the estimand is the study's mean human rating.
"""

from __future__ import annotations

import json

import numpy as np

from scijudge._resources import bundled_path

JUDGES = ("judge-a", "judge-b", "judge-c")


def recorded_units() -> tuple[np.ndarray, np.ndarray]:
    """(mean human rating per unit, judge scores per unit x judge with NaN for an abstention)."""
    human: dict[tuple[str, str], list[float]] = {}
    for line in bundled_path("datasets/yescieval_example/labels.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row.get("score") is not None:
            human.setdefault((row["item_id"], row["judge"]), []).append(float(row["score"]))
    scores: dict[tuple[str, str], dict[str, float]] = {}
    for line in bundled_path("datasets/jury_example/panel.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row.get("score") is not None:
            scores.setdefault((row["item_id"], row["judge"]), {})[row["model"]] = float(row["score"])
    units = sorted(set(human) & set(scores))
    y = np.array([np.mean(human[u]) for u in units])
    f = np.array([[scores[u].get(j, np.nan) for j in JUDGES] for u in units])
    return y, f


def study(size: int = 1000, seed: int = 0, judge: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(human, this judge's score, the three judges' scores) for ``size`` units drawn from the recorded ones
    that this judge scored."""
    y, f = recorded_units()
    scored = np.isfinite(f[:, judge])
    y, f = y[scored], f[scored]
    pick = np.random.default_rng(seed).integers(0, y.size, size)
    return y[pick], f[pick, judge], f[pick]
