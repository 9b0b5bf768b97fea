"""export --to mlflow: the one-transaction-per-item writer against MLflow's documented path, side by side.

Both write the same judgments (ITEMS items x 2 judges x 2 models, 5 % abstentions) into fresh experiments of
ONE local SQLite tracking store (its schema migration, paid once, is timed separately), then read them back
and check the scores are identical. Prints seconds per writer and their ratio.

Run: python benchmarks/bench_mlflow_export.py [ITEMS]   (needs the interop extra)
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")


def main(items: int) -> None:
    import mlflow

    from scijudge.importers.mlflow import export_to_mlflow, read_mlflow
    from scijudge.records import JudgeResult

    results = []
    for i in range(items):
        for judge in ("qa.correctness", "qa.coherence"):
            for model in ("openai/gpt-4o-mini", "anthropic/claude"):
                n = len(results)
                abstain = n % 20 == 7
                results.append(JudgeResult(item_id=f"item-{i:04d}", judge=judge, family="likert", spec_hash="h",
                                           model=model, status="abstained" if abstain else "ok",
                                           score=None if abstain else float(n % 5 + 1), rationale=f"r{n}",
                                           reason="refused" if abstain else None))
    with tempfile.TemporaryDirectory() as folder:
        os.chdir(folder)  # MLflow puts trace artifacts under ./mlruns of the working directory
        uri = f"sqlite:///{Path(folder) / 'mlflow.db'}"
        start = time.perf_counter()
        mlflow.MlflowClient(uri).create_experiment("warm-up")  # schema migration, once per store
        migration = time.perf_counter() - start
        timings = {}
        for fast in (True, False):
            start = time.perf_counter()
            export_to_mlflow(results, uri, f"bench-{fast}", run_tag=f"bench-{fast}", fast=fast)
            timings[fast] = time.perf_counter() - start
            back = read_mlflow(uri, f"bench-{fast}")
            same = {(r.item_id, r.judge, r.model): r.score for r in back.results} == {
                (r.item_id, r.judge, r.model): r.score for r in results}
            print(f"{'fast' if fast else 'documented'} writer: {len(results)} judgments on {items} traces in "
                  f"{timings[fast]:.1f} s; read back identical: {same}")
    print(f"store migration (once): {migration:.1f} s; documented / fast = {timings[False] / timings[True]:.1f}x")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100)
