"""Benchmark: the vectorised robustness table vs a straightforward pandas group-by loop, same data, one run.

Data: about N judgments (default 200,000) shaped like a released rating study: 4 models × 9 rubrics ×
items × 3 conditions (original, subtle, extreme), integer ratings 1–5.

- vectorised: ``scijudge.metrics.robustness.robustness_table`` (group-by aggregates, mid-rank AUC, one
  sparse cluster bootstrap over items for every group's drop interval);
- loop: per (model, judge, level) group and pooled per model, a pandas merge of variants with originals,
  ``sklearn.metrics.roc_auc_score`` for the AUC and a per-group numpy bootstrap of the mean drop (the same
  resample count), as one would write it by hand. The benchmark checks that both give the same drops,
  P(original > variant) and AUCs.

With ``--cli`` it also times the whole command (``scijudge robustness RUN --out DIR`` in a subprocess, reading
the run store) on a store written once through ``Run.record`` and kept in ``--store-dir``.

Usage: python benchmarks/bench_robustness.py [--n 200000] [--n-boot 1000] [--cli]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from scijudge.metrics.robustness import robustness_table

MODELS = ["model-a", "model-b", "model-c", "model-d"]
RUBRICS = ["cohesion", "conciseness", "readability", "coherence", "relevancy", "correctness", "informativeness",
           "integration", "completeness"]


def make_judgments(n: int, seed: int = 0) -> pd.DataFrame:
    """Run-store-shaped rows: originals '<q>' and imported variants with result.variant_of / result.level."""
    rng = np.random.default_rng(seed)
    n_items = max(2, n // (len(MODELS) * len(RUBRICS) * 3))
    frames = []
    for m, model in enumerate(MODELS):
        for rubric in RUBRICS:
            base = rng.integers(2, 6, size=n_items)
            for level, shift in (("", 0.0), ("subtle", 0.5 + 0.1 * m), ("extreme", 1.4)):
                score = np.clip(base - np.rint(rng.normal(shift, 0.8, size=n_items)), 1, 5)
                ids = [f"q{i}" if not level else f"q{i}::{level}" for i in range(n_items)]
                result = [None] * n_items if not level else [{"variant_of": f"q{i}", "level": level} for i in range(n_items)]
                frames.append(pd.DataFrame({"item_id": ids, "judge": f"study.{rubric}", "part": "", "family": "imported",
                                            "spec_hash": "imported", "model": model, "status": "ok", "score": score,
                                            "verdict": None, "result": result}))
    return pd.concat(frames, ignore_index=True)


def baseline(df: pd.DataFrame, n_boot: int, seed: int) -> pd.DataFrame:
    """The straightforward way: a loop over groups with pandas merges, sklearn AUC, per-group bootstrap."""
    rows = []
    df = df.assign(base=df["result"].map(lambda r: r["variant_of"] if r else None),
                   level=df["result"].map(lambda r: r["level"] if r else ""))
    df["base"] = df["base"].fillna(df["item_id"])
    originals = df[df["level"] == ""]
    variants = df[df["level"] != ""]
    pairs = variants.merge(originals[["model", "judge", "base", "score"]], on=["model", "judge", "base"],
                           suffixes=("_v", "_o"))
    rng = np.random.default_rng(seed)
    for pooled in (False, True):
        keys = ["model", "level"] if pooled else ["model", "judge", "level"]
        for key, g in pairs.groupby(keys):
            d = (g["score_o"] - g["score_v"]).to_numpy()
            x, y = g["score_o"].to_numpy(), g["score_v"].to_numpy()
            auc = roc_auc_score(np.r_[np.ones(x.size), np.zeros(y.size)], np.r_[x, y])
            boots = d[rng.integers(0, d.size, size=(n_boot, d.size))].mean(axis=1)
            lo, hi = np.percentile(boots, [2.5, 97.5])
            judge = "*" if pooled else key[1]
            rows.append({"model": key[0], "judge": judge, "level": key[-1], "n_pairs": d.size, "drop": d.mean(),
                         "drop_lo": lo, "drop_hi": hi, "p_greater": (d > 0).mean(), "p_tie": (d == 0).mean(), "auc": auc})
    return pd.DataFrame(rows)


def time_cli(df: pd.DataFrame, store_dir: Path, n_boot: int) -> float:
    from scijudge.records import JudgeResult
    from scijudge.run.store import Run

    store = store_dir / f"bench_robustness_{len(df)}.sqlite"
    if not store.exists() or len(Run(store)) != len(df):
        print(f"writing {len(df)} judgments to {store} through Run.record (once; reused later) ...", flush=True)
        with Run(store) as run:
            for row in df.to_dict("records"):
                run.record(JudgeResult(**{k: v for k, v in row.items() if k in JudgeResult.model_fields}))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    out = store_dir / "bench_robustness_out"
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "scijudge", "robustness", str(store), "--out", str(out), "--n-boot",
                    str(n_boot)], check=True, env=env, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--n-boot", type=int, default=1000)
    parser.add_argument("--cli", action="store_true", help="also time the whole command on a run store")
    parser.add_argument("--store-dir", type=Path, default=Path("/tmp"))
    args = parser.parse_args()
    df = make_judgments(args.n)
    print(f"{len(df)} judgments, {df['model'].nunique()} models × {df['judge'].nunique()} judges, n_boot={args.n_boot}")
    start = time.perf_counter()
    fast = robustness_table(df, n_boot=args.n_boot, seed=0).table
    t_fast = time.perf_counter() - start
    start = time.perf_counter()
    slow = baseline(df, args.n_boot, 0)
    t_slow = time.perf_counter() - start
    merged = fast.merge(slow, on=["model", "judge", "level"], suffixes=("", "_loop"))
    assert len(merged) == len(fast) == len(slow), (len(merged), len(fast), len(slow))
    for col in ("n_pairs", "drop", "p_greater", "p_tie", "auc"):
        np.testing.assert_allclose(merged[col].astype(float), merged[f"{col}_loop"].astype(float), rtol=1e-9, atol=1e-12)
    width = float((merged["drop_hi"] - merged["drop_lo"]).mean() / (merged["drop_hi_loop"] - merged["drop_lo_loop"]).mean())
    print(f"vectorised robustness_table: {t_fast:.2f} s   pandas loop + sklearn: {t_slow:.2f} s   "
          f"ratio {t_slow / t_fast:.1f}x   ({len(fast)} rows agree; interval width ratio {width:.2f})")
    if args.cli:
        t_cli = time_cli(df, args.store_dir, args.n_boot)
        print(f"whole command `scijudge robustness` on {len(df)} stored judgments: {t_cli:.1f} s")


if __name__ == "__main__":
    main()
