"""Ray on this machine with 1 vs. 2 actors on the tiny local model (CPU): judgments/s and their ratio.

Each actor loads its own engine. One Ray session serves both settings; the time of each includes starting
its actors and loading the model in each (``judge_items_ray`` starts fresh actors per call), so with few
items the ratio understates the steady-state gain.

    python benchmarks/bench_ray.py                 # 24 judgments per setting
    python benchmarks/bench_ray.py --items 48
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "true")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=24)
    parser.add_argument("--max-tokens", type=int, default=64)
    args = parser.parse_args()

    import ray

    from scijudge import Item, Run
    from scijudge.run.ray import judge_items_ray
    from scijudge.lm.tiny import build_tiny_model
    from scijudge.run.threads import JudgeRecipe
    from scijudge.spec.judge_spec import get_spec

    papers = [{"title": "Capacity fade in layered oxides", "abstract": "Cycling at high voltage cracks particles."}]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        paths = build_tiny_model(Path(tmp) / "tiny")
        recipes = [JudgeRecipe(get_spec("yescieval.qa.correctness"), f"hf:{paths['adapter']}",
                               {"max_tokens": args.max_tokens})]
        env = {k: os.environ[k] for k in ("PYTHONPATH", "LITELLM_LOCAL_MODEL_COST_MAP", "HF_HUB_OFFLINE",
                                          "TRANSFORMERS_OFFLINE") if k in os.environ}
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": env})
        try:
            for workers in (1, 2):
                items = [Item(id=f"w{workers}-{i}", question="What limits battery life?", papers=papers,
                              answer=f"Answer {i}: particle cracking at high voltage [1].") for i in range(args.items)]
                stamps: list[float] = []
                with Run(Path(tmp) / f"w{workers}.sqlite") as run:
                    wall0 = time.perf_counter()
                    summary = judge_items_ray(items, recipes, run=run, workers=workers, concurrency=4, chunk_items=2,
                                              on_result=lambda result, s, stamps=stamps: stamps.append(time.perf_counter()))
                    # Steady state: after the first chunk came back (every actor has started and loaded by then
                    # or soon after), judgments per second until the last one.
                    first = sum(1 for t in stamps if t - stamps[0] < 0.05)  # the results of the first chunk
                    steady = (len(stamps) - first) / (stamps[-1] - stamps[0]) if stamps[-1] > stamps[0] else 0.0
                    rows.append((workers, summary.judged, time.perf_counter() - wall0, steady))
        finally:
            ray.shutdown()
    print(f"{'workers':>7} {'judged':>6} {'wall s (with start-up)':>22} {'judgments/s':>11} {'steady j/s':>10}")
    for workers, judged, wall, steady in rows:
        print(f"{workers:>7} {judged:>6} {wall:>22.2f} {judged / wall:>11.2f} {steady:>10.2f}")
    print(f"ratio 2 workers / 1 worker, judgments/s with start-up: {(rows[1][1] / rows[1][2]) / (rows[0][1] / rows[0][2]):.2f}; "
          f"steady state: {rows[1][3] / rows[0][3]:.2f}")


if __name__ == "__main__":
    main()
