"""`scijudge judge` itself, the CLI default path, against a slow loopback model: cache on vs ``--no-cache`` vs ideal.

Each round runs the real command line in a fresh process (``python -m scijudge judge ITEMS -j
yescieval.qa.correctness -m openai/judge --api-base URL --concurrency 64 --no-progress``), once with the response
cache on (the default; DSPy's memory + disk cache in a new folder per round, so every judgment is a miss and then
a write, as on a new run) and once with ``--no-cache``, the order alternating round by round; fresh items each
time. The loopback OpenAI-compatible server runs in its own process with a fixed latency. The rate is the
command's own judged / seconds from its summary table (the judging phase: from the first request to the last
answer stored and the response cache written; start-up, loading, planning and opening the response cache, which
the command does while it loads, are printed apart as the command's whole wall time). Prints every round, the
load average, the medians, the two ratios: cache on / ``--no-cache`` (goal >= 0.9) and cache on / ideal (ideal =
concurrency / latency; goal >= 0.5), and the whole commands' time ratio per round. The summary table gives the
seconds to a tenth: use 2,000 judgments for ratios closer than 5%.

    python benchmarks/bench_cli.py                         # 3 rounds x 1,000 judgments, concurrency 64, 100 ms
    python benchmarks/bench_cli.py --rounds 5 --judgments 640
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "true")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _loopback import ServerProcess, item_dicts, run_loop_args

MODES = ("cache on", "no-cache")


def write_items(path: Path, tag: str, n: int) -> None:
    """``n`` distinct items (distinct prompts: no cache entry answers them) as canonical JSONL."""
    with path.open("w", encoding="utf-8") as fh:
        for data in item_dicts(tag, n):
            fh.write(json.dumps(data) + "\n")


def run_cli(mode: str, url: str, folder: Path, tag: str, n: int, concurrency: int) -> tuple[float, float, int]:
    """One ``scijudge judge`` process: (judging-phase seconds, whole wall seconds, judgments judged ok)."""
    items = folder / f"{tag}.jsonl"
    write_items(items, tag, n)
    env = dict(os.environ, DSPY_CACHEDIR=str(folder / f"dspy-{tag}"), COLUMNS="200")
    argv = [sys.executable, "-m", "scijudge", "judge", str(items), "-j", "yescieval.qa.correctness",
            "-m", "openai/judge", "--api-base", url, "--concurrency", str(concurrency), "--no-progress",
            "--run", str(folder / f"{tag}.sqlite")] + (["--no-cache"] if mode == "no-cache" else [])
    wall0 = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    wall = time.perf_counter() - wall0
    if done.returncode != 0:
        raise SystemExit(f"scijudge judge exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    seconds = float(re.search(r"seconds\s*│\s*([\d.]+)", done.stdout).group(1))  # type: ignore[union-attr]
    ok = int(re.search(r"│\s*ok\s*│\s*(\d+)", done.stdout).group(1))  # type: ignore[union-attr]
    return seconds, wall, ok


def main() -> None:
    parser = run_loop_args(__doc__)
    args = parser.parse_args()
    ideal = args.concurrency / args.latency
    rates: dict[str, list[float]] = {mode: [] for mode in MODES}
    walls: dict[str, list[float]] = {mode: [] for mode in MODES}
    print(f"scijudge judge, {args.judgments} judgments per run, --concurrency {args.concurrency}, latency "
          f"{args.latency * 1000:.0f} ms, ideal {ideal:.0f}/s; {os.cpu_count()} CPUs; load average at start "
          f"{os.getloadavg()[0]:.2f}")
    print(f"{'round':>5} {'mode':>9} {'j/s':>8} {'to ideal':>8} {'judging s':>9} {'command s':>9} {'load':>5}")
    with ServerProcess(args.latency) as server, tempfile.TemporaryDirectory(prefix="scijudge-bench-cli-") as tmp:
        run_cli("no-cache", server.url, Path(tmp), "warm", 64, args.concurrency)  # page in the modules once
        for round_ in range(args.rounds):
            for mode in MODES if round_ % 2 == 0 else MODES[::-1]:
                tag = f"r{round_}-{mode.replace(' ', '')}"
                seconds, wall, ok = run_cli(mode, server.url, Path(tmp), tag, args.judgments, args.concurrency)
                assert ok == args.judgments, (mode, ok)
                rate = ok / seconds
                rates[mode].append(rate)
                walls[mode].append(wall)
                print(f"{round_ + 1:>5} {mode:>9} {rate:>8.1f} {rate / ideal:>8.2f} {seconds:>9.2f} {wall:>9.2f} "
                      f"{os.getloadavg()[0]:>5.2f}", flush=True)
    on, off = statistics.median(rates["cache on"]), statistics.median(rates["no-cache"])
    pairs = [a / b for a, b in zip(rates["cache on"], rates["no-cache"], strict=True)]
    print(f"median: cache on {on:.1f}/s, --no-cache {off:.1f}/s; load average at end {os.getloadavg()[0]:.2f}")
    print(f"ratio cache on / --no-cache = {statistics.median(pairs):.2f} (per round "
          + ", ".join(f"{p:.2f}" for p in pairs) + "; goal >= 0.90)")
    print(f"ratio cache on / ideal = {on / ideal:.2f} (per round "
          + ", ".join(f"{r / ideal:.2f}" for r in rates["cache on"]) + "; goal >= 0.50); "
          f"--no-cache / ideal = {off / ideal:.2f}")
    print("whole command (start-up, loading, opening the cache, judging), --no-cache time / cache-on time = "
          + ", ".join(f"{b / a:.2f}" for a, b in zip(walls["cache on"], walls["no-cache"], strict=True)))


if __name__ == "__main__":
    main()
