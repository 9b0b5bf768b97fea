"""Benchmark: vectorised item bootstrap vs a per-resample pandas loop, on the same data and resamples.

Data: N items × 5 rubrics rated by 3 simulated judges (50,000 ratings per judge at full size) against one
human label per (item, rubric). Statistics bootstrapped: quadratic-weighted kappa, mean bias, MAE and
Spearman's rho, for each judge per rubric and pooled (18 groups), resampling items (all rubrics together).

- vectorised: per-item contingency tables, one sparse matrix product per chunk of resamples
  (``scijudge.metrics.bootstrap``), then every statistic for all resamples at once (``metrics.tables``);
- loop: for each resample, select the drawn items' rows with pandas and compute each statistic with
  scikit-learn / scipy, group by group. The loop runs ``--loop-resamples`` resamples and its time is scaled
  linearly to the full count (each resample costs the same); both use the very same resamples, and the
  benchmark checks that their kappa replicates agree.

It then times the whole ``calibrate()`` (all 16 ordinal statistics, intervals, paired comparisons, Holm)
and writing the HTML/JSON report.

Usage: python benchmarks/bench_calibration.py [--quick] [--loop-resamples 40]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import sparse, stats
from sklearn.metrics import cohen_kappa_score

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from scijudge.metrics.bootstrap import bootstrap_sums, resample_counts
from scijudge.metrics.calibration import calibrate
from scijudge.metrics.tables import ordinal_stats

RUBRICS = [f"yescieval.qa.{r}" for r in ("correctness", "completeness", "coherence", "relevancy", "readability")]
JUDGES = {"judge-a": (0.2, 0.5), "judge-b": (0.6, 0.8), "judge-c": (1.0, 1.2)}  # (bias, noise sd)
VALUES = np.arange(1, 6.0)


def make_data(n_items: int, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Run-store-shaped judgments and labels: each judge = human + bias + noise, rounded into 1..5."""
    rng = np.random.default_rng(seed)
    items = np.repeat([f"q{i}" for i in range(n_items)], len(RUBRICS))
    judges = np.tile(RUBRICS, n_items)
    human = np.clip(np.rint(rng.normal(3.3, 1.0, size=items.size)), 1, 5)
    labels = pd.DataFrame({"item_id": items, "judge": judges, "score": human, "annotator": "a1"})
    frames = []
    for model, (bias, noise) in JUDGES.items():
        score = np.clip(np.rint(human + bias + rng.normal(0, noise, size=human.size)), 1, 5)
        frames.append(pd.DataFrame({"item_id": items, "judge": judges, "part": "", "family": "likert",
                                    "spec_hash": "h", "model": model, "status": "ok", "score": score,
                                    "verdict": None, "confidence": None, "probs": None}))
    return pd.concat(frames, ignore_index=True), labels


def _pairs(judgments: pd.DataFrame, labels: pd.DataFrame, n_items: int) -> pd.DataFrame:
    pairs = judgments.merge(labels[["item_id", "judge", "score"]].rename(columns={"score": "human"}),
                            on=["item_id", "judge"])
    pairs["item"] = pairs["item_id"].str.slice(1).astype(int)
    return pairs


def vectorised(pairs: pd.DataFrame, n_items: int, n_boot: int, seed: int) -> dict[tuple[str, str], dict[str, np.ndarray]]:
    """All replicates of all groups from per-item tables and one bootstrap pass."""
    k = VALUES.size
    groups = list(pairs.groupby(["model", "judge"]).indices.items())
    rows, cols = [], []
    for g, (_, idx) in enumerate(groups):
        sub = pairs.iloc[idx]
        rows.append(sub["item"].to_numpy())
        cols.append(g * k * k + ((sub["human"].to_numpy() - 1) * k + (sub["score"].to_numpy() - 1)).astype(int))
    mat = sparse.csr_matrix((np.ones(sum(map(len, rows))), (np.concatenate(rows), np.concatenate(cols))),
                            shape=(n_items, len(groups) * k * k))
    reps = bootstrap_sums(mat, n_boot, seed).reshape(n_boot, len(groups), k, k)
    out = {}
    for g, (key, _) in enumerate(groups):
        out[key] = ordinal_stats(reps[:, g], VALUES, 1.0)
    for model in JUDGES:
        members = [g for g, (key, _) in enumerate(groups) if key[0] == model]
        out[(model, "(pooled)")] = ordinal_stats(reps[:, members].sum(axis=1), VALUES, 1.0)
    return out


def loop(pairs: pd.DataFrame, n_items: int, n_boot: int, seed: int, limit: int) -> dict[tuple[str, str], list[float]]:
    """The same resamples, one at a time: pandas row selection + scikit-learn/scipy per group."""
    by_item = pairs.set_index("item").sort_index()
    kappas: dict[tuple[str, str], list[float]] = {}
    done = 0
    for counts in resample_counts(n_items, n_boot, seed):
        for c in counts:
            if done >= limit:
                return kappas
            drawn = np.repeat(np.arange(n_items), c)
            sample = by_item.loc[drawn]
            for model, per_model in sample.groupby("model"):
                parts = [("(pooled)", per_model)] + list(per_model.groupby("judge"))
                for judge, g in parts:
                    h, j = g["human"].to_numpy(), g["score"].to_numpy()
                    kappas.setdefault((model, judge), []).append(
                        cohen_kappa_score(h, j, labels=VALUES, weights="quadratic"))
                    _ = (j - h).mean(), np.abs(j - h).mean(), stats.spearmanr(j, h).statistic
            done += 1
    return kappas


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2,000 items and 200 resamples instead of 10,000 and 1,000")
    parser.add_argument("--loop-resamples", type=int, default=None, help="resamples the pandas loop actually runs")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    n_items, n_boot = (2_000, 200) if args.quick else (10_000, 1_000)
    limit = args.loop_resamples or (20 if args.quick else 40)

    judgments, labels = make_data(n_items, args.seed)
    pairs = _pairs(judgments, labels, n_items)
    print(f"data: {n_items:,} items x {len(RUBRICS)} rubrics = {n_items * len(RUBRICS):,} ratings per judge, "
          f"{len(JUDGES)} judges; {n_boot:,} bootstrap resamples of items")

    t0 = time.perf_counter()
    vec = vectorised(pairs, n_items, n_boot, args.seed)
    t_vec = time.perf_counter() - t0

    t0 = time.perf_counter()
    looped = loop(pairs, n_items, n_boot, args.seed, limit)
    t_loop_measured = time.perf_counter() - t0
    t_loop = t_loop_measured / limit * n_boot

    worst = max(float(np.max(np.abs(np.array(v) - vec[key]["kappa_w"][: len(v)]))) for key, v in looped.items())
    assert worst < 1e-9, f"vectorised and loop replicates differ by {worst}"

    print(f"vectorised bootstrap (16 statistics, 18 groups): {t_vec:8.2f} s for {n_boot:,} resamples")
    print(f"pandas loop (4 statistics, 18 groups):            {t_loop:8.2f} s for {n_boot:,} resamples "
          f"(measured {t_loop_measured:.2f} s for {limit} resamples, scaled linearly)")
    print(f"ratio loop / vectorised: {t_loop / t_vec:,.0f}x   (kappa replicates agree to {worst:.1e})")

    t0 = time.perf_counter()
    result = calibrate(judgments, labels, n_boot=n_boot, seed=args.seed)
    t_cal = time.perf_counter() - t0
    from scijudge.report.calibration import write_report

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        write_report(result, tmp)
    t_rep = time.perf_counter() - t0
    print(f"full calibrate() incl. paired comparisons: {t_cal:.2f} s; HTML+JSON report: {t_rep:.2f} s")
    best = result.leaderboard.iloc[0]
    print(f"leaderboard #1: {best['contender']} (kappa_w {best['kappa_w']:.3f} "
          f"[{best['kappa_w_lo']:.3f}, {best['kappa_w_hi']:.3f}])")


if __name__ == "__main__":
    main()
