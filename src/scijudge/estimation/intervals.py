"""Conformal sets per judgment, calibrated per (judge, model) on its labelled units, with held-out coverage."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from scijudge.estimation._units import Units
from scijudge.estimation.conformal import (
    conformal_quantile,
    probability_scores,
    probability_sets,
    residual_scores,
    residual_sets,
    split_coverage,
)
from scijudge.metrics.agreement import scale_values

SET_COLUMNS = ["source", "judge", "model", "group", "item_id", "part", "score", "human", "set", "set_lo", "set_hi",
               "set_size", "nonconformity", "alpha"]
COVERAGE_COLUMNS = ["judge", "model", "nonconformity", "alpha", "n_calibration", "threshold", "coverage_holdout",
                    "coverage_se", "n_holdout", "n_splits", "mean_set_size", "n_judgments"]


def _prob_matrix(rows: pd.DataFrame, values: np.ndarray) -> np.ndarray:
    from scijudge.estimation._units import calibration_rules  # calibration's parser: one reading of stored probs

    parse = calibration_rules()._prob_row
    return np.vstack([parse(r["probs"], values, r) for _, r in rows.iterrows()]) if len(rows) else \
        np.zeros((0, values.size))


def _format_set(mask: np.ndarray, values: np.ndarray) -> str:
    return ";".join(f"{v:g}" for v in values[mask])


def conformal_units(units: Units, alpha: float = 0.1, *, n_splits: int = 50,
                    seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(sets, coverage): a set of plausible human scores for every scored judgment, and per (judge, model) the
    threshold from all labelled units plus the mean coverage on held-out labelled units over random splits.

    The rating distribution ``probs`` is used when every scored judgment of that (judge, model) stores one;
    otherwise the absolute difference to the score.
    """
    set_frames, coverage_rows = [], []
    frame = units.frame
    scored = frame[(frame["status"] == "ok") & frame["score"].notna()]
    for (judge, model), sub in scored.groupby(["judge", "model"], sort=True):
        values = scale_values(*units.scales[judge])
        labeled = sub[sub["human"].notna()]
        use_probs = bool(sub["probs"].map(lambda p: isinstance(p, dict) and len(p) > 0).all())
        human_index = np.rint((labeled["human"].to_numpy() - values[0]) / (values[1] - values[0])).astype(int)
        if use_probs:
            probs = _prob_matrix(sub, values)
            cal = probability_scores(human_index, probs[sub.index.get_indexer(labeled.index)])
        else:
            cal = residual_scores(labeled["human"].to_numpy(), labeled["score"].to_numpy())
        threshold = conformal_quantile(cal, alpha) if cal.size else math.inf
        masks = probability_sets(probs, threshold) if use_probs else residual_sets(sub["score"].to_numpy(), values,
                                                                                  threshold)
        coverage, se, n_holdout = split_coverage(cal, alpha, n_splits=n_splits, seed=seed)
        out = sub[["source", "judge", "model", "group", "item_id", "part", "score", "human"]].copy()
        out["set"] = [_format_set(m, values) for m in masks]
        out["set_lo"] = np.where(masks, values[None, :], np.inf).min(axis=1, initial=np.inf)
        out["set_hi"] = np.where(masks, values[None, :], -np.inf).max(axis=1, initial=-np.inf)
        out.loc[~masks.any(axis=1), ["set_lo", "set_hi"]] = math.nan
        out["set_size"] = masks.sum(axis=1)
        out["nonconformity"] = "probs" if use_probs else "abs-residual"
        out["alpha"] = alpha
        set_frames.append(out)
        coverage_rows.append({"judge": judge, "model": model, "nonconformity": out["nonconformity"].iloc[0],
                              "alpha": alpha, "n_calibration": int(cal.size), "threshold": threshold,
                              "coverage_holdout": coverage, "coverage_se": se, "n_holdout": n_holdout,
                              "n_splits": n_splits, "mean_set_size": float(masks.sum(axis=1).mean()),
                              "n_judgments": int(len(sub))})
    sets = pd.concat(set_frames, ignore_index=True) if set_frames else pd.DataFrame(columns=SET_COLUMNS)
    return sets[SET_COLUMNS], pd.DataFrame(coverage_rows, columns=COVERAGE_COLUMNS)


def conformal(judgments: pd.DataFrame, labels: pd.DataFrame, alpha: float = 0.1,
              **kwargs: Any) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``conformal_units`` from run-store rows and human labels (same arguments as ``estimate`` for matching)."""
    from scijudge.estimation._units import match_units

    n_splits = kwargs.pop("n_splits", 50)
    seed = kwargs.pop("seed", 0)
    return conformal_units(match_units(judgments, labels, **kwargs), alpha, n_splits=n_splits, seed=seed)
