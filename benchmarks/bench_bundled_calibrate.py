"""`scijudge calibrate` on the bundled examples, CPU time beside the import-only yardstick (issue 41.2).

Each command runs in its own process under /usr/bin/time -v, as a new user runs it from the repository root:

    python benchmarks/bench_bundled_calibrate.py              # 3 rounds, medians
    python benchmarks/bench_bundled_calibrate.py --rounds 1

The cases: the jury panel of datasets/jury_example (its CARD's commands: three made-up judges, then the same with
the jury of the three added) and the demo store (`scijudge demo`'s tiny model on the YESciEval example, three
rubrics), each against datasets/yescieval_example/labels.jsonl. The yardstick is one process that only imports
what calibrate needs (pandas, scipy, scikit-learn, matplotlib): the machine's speed at that minute and the floor
no calibrate can go under. Goal: <= 5 s of CPU for each bundled example.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_store import LIBRARIES, timed

REPO = Path(__file__).resolve().parents[1]
LABELS = str(REPO / "datasets/yescieval_example/labels.jsonl")


def scijudge(*args: str) -> list[str]:
    return [sys.executable, "-m", "scijudge", *args]


def prepare(work: Path, env: dict) -> dict[str, list[str]]:
    """The stores of each case (made once, outside the timing) and each case's calibrate command."""
    panel, jury, demo = work / "panel.sqlite", work / "jury.sqlite", work / "demo.sqlite"
    steps = [scijudge("import-judgments", str(REPO / "datasets/jury_example/panel.jsonl"), "--run", str(panel)),
             scijudge("jury", str(panel), "-m", "judge-a", "-m", "judge-b", "-m", "judge-c", "--name", "panel",
                      "--out", str(jury)),
             scijudge("demo", "--run", str(demo), "--workdir", str(work / "tiny"), "--no-progress")]
    for cmd in steps:
        subprocess.run(cmd, check=True, capture_output=True, env=env, cwd=work)
    base = ["calibrate", "--labels", LABELS]
    return {
        "jury panel (3 judges)": scijudge(*base, "--run", str(panel), "--out", str(work / "r_panel")),
        "jury panel + the jury": scijudge(*base, "--run", str(panel), "--run", str(jury), "--out",
                                          str(work / "r_jury")),
        "demo store (tiny model)": scijudge(*base, "--run", str(demo), "--out", str(work / "r_demo")),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "true", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "PYTHONPATH": str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    with tempfile.TemporaryDirectory() as tmp:
        cases = prepare(Path(tmp), env)
        yardstick = [sys.executable, "-c", LIBRARIES]
        cpu: dict[str, list[float]] = {name: [] for name in ["imports only", *cases]}
        for _ in range(args.rounds):  # the cases alternate with the yardstick: the same minutes for each
            for name, cmd in [("imports only", yardstick), *cases.items()]:
                cpu[name].append(timed(cmd, env)["cpu"])
        ref = statistics.median(cpu["imports only"])
        print(f"{'case':28s} {'CPU s (median)':>15s} {'runs':>22s} {'x imports':>10s}")
        for name, values in cpu.items():
            runs = ", ".join(f"{v:.2f}" for v in values)
            print(f"{name:28s} {statistics.median(values):15.2f} {runs:>22s} {statistics.median(values) / ref:10.2f}")


if __name__ == "__main__":
    main()
