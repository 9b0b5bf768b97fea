"""Run-store I/O at scale: `import-judgments` and `export` vs pandas + one sqlite3 executemany, and
`calibrate` from a run store.

Every step runs in its own process under /usr/bin/time -v (wall, CPU, peak resident memory), on the same rows:

    python benchmarks/bench_store.py                      # 200,000 judgments, JSONL and CSV
    python benchmarks/bench_store.py --rows 20000         # a quick check on a loaded machine
    python benchmarks/bench_store.py --calibrate          # also: calibrate 50,000 ratings x 3 judges x 1,000 resamples
    python benchmarks/bench_store.py --formats --calibrate  # calibrate only

Goals (issue 24): import and export each <= 2x the reference's time and <= 1.5x its peak memory; calibrate from a
store <= 10 s CPU and <= 500 MB. Export has two references: pandas exporting the table the reference import wrote
(the file's 6 columns) and pandas exporting the scijudge store itself (its 25 columns: the same bytes to write).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REF_IMPORT = r'''
import sqlite3, sys, pandas as pd
src, db = sys.argv[1], sys.argv[2]
if src.endswith(".csv"):
    frame = pd.read_csv(src, dtype=str, keep_default_na=False)
else:
    frame = pd.read_json(src, lines=True, dtype=False)
con = sqlite3.connect(db)
con.execute("PRAGMA journal_mode=WAL")
cols = list(frame.columns)
con.execute(f"CREATE TABLE judgments ({', '.join(c + ' TEXT' for c in cols)})")
with con:
    con.executemany(f"INSERT INTO judgments VALUES ({', '.join('?' * len(cols))})",
                    frame.itertuples(index=False, name=None))
print(con.execute("SELECT COUNT(*) FROM judgments").fetchone()[0])
'''
REF_EXPORT = r'''
import sqlite3, sys, pandas as pd
db, out = sys.argv[1], sys.argv[2]
frame = pd.read_sql("SELECT * FROM judgments", sqlite3.connect(db))
if out.endswith(".csv"):
    frame.to_csv(out, index=False)
else:
    frame.to_json(out, orient="records", lines=True, force_ascii=False)
print(len(frame))
'''
LIBRARIES = "import pandas, scipy.stats, scipy.sparse, sklearn.metrics, matplotlib; matplotlib.use('Agg'); import matplotlib.pyplot"
MAKE_CALIBRATION_STORE = r'''
import random, sys
from scijudge.run.store import Run
from scijudge.records import Attempt
n, path, labels = int(sys.argv[1]), sys.argv[2], sys.argv[3]
rng = random.Random(0)
judges = ["yescieval.qa.correctness", "yescieval.qa.completeness", "yescieval.qa.coherence"]
truth = [rng.randint(1, 5) for _ in range(n)]
attempt = Attempt(strategy="json_schema", temperature=0.0, outcome="ok", tokens_in=900, tokens_out=60,
                  latency_s=0.8).model_dump(mode="json")
def dumps():
    for j in judges:
        for i in range(n):
            score = min(5, max(1, truth[i] + rng.choice((-1, 0, 0, 1))))
            yield {"item_id": f"q{i}", "judge": j, "part": "", "family": "likert", "spec_hash": "h", "model": "m",
                   "endpoint": "", "input_hash": "ih", "decoding": "", "status": "ok", "score": float(score),
                   "verdict": None, "confidence": None, "probs": {str(k): 0.2 for k in range(1, 6)},
                   "result": {"rating": score, "rationale": "The answer cites the papers it relies on. " * 4},
                   "rationale": "The answer cites the papers it relies on.", "reason": None,
                   "attempts": [attempt], "tokens_in": 900, "tokens_out": 60, "cost": None, "latency_s": 0.8,
                   "created_at": "2026-12-01T10:00:00+00:00"}
with Run(path) as run, run.transaction():
    run.record_many(dumps())
with open(labels, "w") as handle:
    for j in judges:
        for i in range(n):
            handle.write('{"item_id": "q%d", "judge": "%s", "score": %d, "annotator": "a"}\n' % (i, j, truth[i]))
'''


def make_rows(n: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    judges = ["yescieval.qa.correctness", "yescieval.qa.completeness", "yescieval.qa.coherence"]
    return [{"item_id": f"q{i // 3}", "judge": judges[i % 3], "model": "gpt-x", "score": rng.randint(1, 5),
             "rationale": f"The answer supports {rng.randint(1, 9)} of its claims with the cited papers; "
                          "some statements are vague.", "confidence": round(rng.random(), 3)}
            for i in range(n)]


def timed(cmd: list[str], env: dict) -> dict:
    """Wall, CPU (user + system) and peak RSS of one command run in its own process."""
    proc = subprocess.run(["/usr/bin/time", "-v", *cmd], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"{cmd} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    err = proc.stderr

    def grab(label: str) -> str:
        found = re.search(re.escape(label) + r":\s*(.+)", err)
        assert found, err[-2000:]
        return found.group(1).strip()

    parts = [float(p) for p in grab("Elapsed (wall clock) time (h:mm:ss or m:ss)").split(":")]
    wall = sum(p * 60 ** k for k, p in enumerate(reversed(parts)))
    cpu = float(grab("User time (seconds)")) + float(grab("System time (seconds)"))
    return {"wall": wall, "cpu": cpu, "rss_mb": int(grab("Maximum resident set size (kbytes)")) / 1024}


def show(name: str, m: dict, ref: dict | None = None) -> None:
    tail = ""
    if ref is not None:
        tail = f"   {m['wall'] / ref['wall']:.2f}x time, {m['cpu'] / ref['cpu']:.2f}x cpu, {m['rss_mb'] / ref['rss_mb']:.2f}x memory"
    print(f"{name:44s} {m['wall']:7.2f} {m['cpu']:7.2f} {m['rss_mb']:7.0f}{tail}", flush=True)


def median_of(runs: list[dict]) -> dict:
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--formats", nargs="*", default=["jsonl", "csv"])
    parser.add_argument("--rounds", type=int, default=3, help="arms alternate; medians are shown")
    parser.add_argument("--calibrate", action="store_true", help="also time calibrate from a store")
    parser.add_argument("--ratings", type=int, default=50_000, help="items per judge for --calibrate")
    parser.add_argument("--n-boot", type=int, default=1000)
    parser.add_argument("--keep", help="work in this folder (kept)")
    args = parser.parse_args()
    tmp = Path(args.keep or tempfile.mkdtemp(prefix="bench_store_"))
    tmp.mkdir(parents=True, exist_ok=True)
    # Byte code cached (in a folder of its own) for every arm, as an installed package has it: without it each
    # run of scijudge would compile its own modules again while pandas reads its cached ones.
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="true", PYTHONPYCACHEPREFIX=str(tmp / "pycache"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    py = sys.executable
    subprocess.run([py, "-m", "scijudge", "--help"], env=env, capture_output=True, check=True)
    print(f"{args.rows} judgments; each step in its own process; median of {args.rounds} rounds (arms alternate); "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'step':44s} {'wall s':>7} {'cpu s':>7} {'peak MB':>7}   ratio to the reference")
    rows = make_rows(args.rows)
    for fmt in args.formats:
        src = tmp / f"judgments.{fmt}"
        if fmt == "jsonl":
            src.write_text("".join(json.dumps(r) + "\n" for r in rows))
        else:
            with src.open("w", newline="") as handle:
                writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
                writer.writeheader()
                writer.writerows(rows)
        ref_db, store = tmp / f"ref-{fmt}.sqlite", tmp / f"store-{fmt}.sqlite"
        timing: dict[str, list[dict]] = {k: [] for k in ("ref_i", "got_i", "ref_e", "ref_same", "got_e")}
        for _ in range(args.rounds):
            for old in tmp.glob(f"*-{fmt}.sqlite*"):
                old.unlink()
            timing["ref_i"].append(timed([py, "-c", REF_IMPORT, str(src), str(ref_db)], env))
            timing["got_i"].append(timed([py, "-m", "scijudge", "import-judgments", str(src), "--run", str(store)],
                                         env))
            timing["ref_e"].append(timed([py, "-c", REF_EXPORT, str(ref_db), str(tmp / f"ref-out.{fmt}")], env))
            timing["ref_same"].append(timed([py, "-c", REF_EXPORT, str(store), str(tmp / f"ref-same.{fmt}")], env))
            timing["got_e"].append(timed([py, "-m", "scijudge", "export", str(store), "--format", fmt, "--out",
                                          str(tmp / f"out.{fmt}")], env))
        m = {k: median_of(v) for k, v in timing.items()}
        show(f"reference import ({fmt})", m["ref_i"])
        show(f"scijudge import-judgments ({fmt})", m["got_i"], m["ref_i"])
        show(f"reference export, its own table ({fmt})", m["ref_e"])
        show(f"reference export, the same store ({fmt})", m["ref_same"])
        show(f"scijudge export ({fmt}) vs its own table", m["got_e"], m["ref_e"])
        show(f"scijudge export ({fmt}) vs the same store", m["got_e"], m["ref_same"])
        sizes = {name: (tmp / name).stat().st_size / 1e6 for name in (f"ref-out.{fmt}", f"ref-same.{fmt}", f"out.{fmt}")}
        print(f"  bytes written (MB): reference own table {sizes[f'ref-out.{fmt}']:.1f}, reference same store "
              f"{sizes[f'ref-same.{fmt}']:.1f}, scijudge {sizes[f'out.{fmt}']:.1f}")
    if args.calibrate:
        store, labels = tmp / "calibrate.sqlite", tmp / "labels.jsonl"
        for old in tmp.glob("calibrate.sqlite*"):
            old.unlink()
        subprocess.run([py, "-c", MAKE_CALIBRATION_STORE, str(args.ratings), str(store), str(labels)], check=True,
                       env=env)
        runs, floor = [], []
        for _ in range(args.rounds):  # beside each run, the machine's speed: importing what calibrate must import
            floor.append(timed([py, "-c", LIBRARIES], env))
            runs.append(timed([py, "-m", "scijudge", "calibrate", "-l", str(labels), "-r", str(store), "--out",
                               str(tmp / "report"), "--n-boot", str(args.n_boot)], env))
        m, f = median_of(runs), median_of(floor)
        show("import of pandas, scipy, sklearn, matplotlib", f)
        show(f"calibrate {args.ratings} x 3 x {args.n_boot}", m)
        print(f"goal: <= 10 s CPU ({m['cpu']:.1f}; the imports alone {f['cpu']:.1f}), <= 500 MB ({m['rss_mb']:.0f})")


if __name__ == "__main__":
    main()
