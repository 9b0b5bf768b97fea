"""`scijudge view` on a 100,000-judgment store: the first page and every page after it, against the targets of
issue 36 (first page <= 1.5 s, every later page <= 0.5 s), without loading the store into memory.

    python benchmarks/bench_view.py                 # 100,000 judgments (the issue's size)
    python benchmarks/bench_view.py --rows 20000    # a quick check
    python benchmarks/bench_view.py --reference OLD/src   # also: the first requests of OLD's viewer, side by side

With ``--reference SRC`` (the ``src`` folder of another checkout, e.g. ``git archive COMMIT src | tar -x -C OLD``)
the viewer of that code and of this one are started in turn on the same store (``--rounds`` times each, alternating)
and their first requests are printed side by side with the ratio this ÷ reference (medians over the rounds).

The store is written by the store's bulk writer (``Run.record_many`` in one transaction, as bench_store.py), with
human labels for a fifth of the items. The viewer runs as the real CLI in its own process (``scijudge view STORE
--labels L --label-out NEW --no-browser --port 0``); every page is fetched over HTTP. "first page" is the first request after the
URL line is printed (the runs page, then the first items page); each later page is timed 3 times and the slowest
is shown. Side by side in the same run: what reading the whole store costs (``Run.to_pandas()``, what a viewer
that loads the store would pay before its first page), and the viewer's peak memory against that frame's size.
"""

from __future__ import annotations

import argparse
import contextlib
import http.cookiejar
import os
import random
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

MAKE_STORE = r'''
import json, random, sys
from scijudge.run.store import Run
n, path, labels = int(sys.argv[1]), sys.argv[2], sys.argv[3]
rng = random.Random(0)
judges = ["yescieval.qa.correctness", "yescieval.qa.completeness", "yescieval.qa.coherence", "yescieval.qa.relevancy"]
models = ["m/alpha", "m/beta"]
per_item = len(judges) * len(models)
attempt = {"strategy": "json_schema", "temperature": 0.0, "outcome": "ok", "tokens_in": 900, "tokens_out": 60,
           "latency_s": 0.8}
def dumps():
    for k in range(n):
        i, rest = divmod(k, per_item)
        judge, model = judges[rest % len(judges)], models[rest // len(judges)]
        abstained = rng.random() < 0.03
        score = None if abstained else float(rng.randint(1, 5))
        yield {"item_id": f"q{i:06d}", "judge": judge, "part": "", "family": "likert", "spec_hash": "h",
               "model": model, "endpoint": "", "input_hash": "ih", "decoding": "",
               "status": "abstained" if abstained else "ok", "score": score, "verdict": None, "confidence": None,
               "probs": None if abstained else {str(s): (0.6 if s == score else 0.1) for s in range(1, 6)},
               "result": None if abstained else {"rating": score, "rationale": "The answer cites its papers. " * 4},
               "rationale": None if abstained else f"The answer supports {rng.randint(1, 9)} of its claims.",
               "reason": "refused" if abstained else None, "attempts": [attempt], "tokens_in": 900,
               "tokens_out": 60, "cost": 0.0004, "latency_s": 0.8, "created_at": f"2026-12-01T10:00:{k % 60:02d}+00:00"}
with Run(path) as run, run.transaction():
    run.record_many(dumps())
with open(labels, "w") as handle:
    for i in range(0, n // per_item, 5):
        for judge in judges:
            handle.write(json.dumps({"item_id": f"q{i:06d}", "judge": judge, "score": rng.randint(1, 5),
                                     "annotator": "a", "source": "expert"}) + "\n")
'''
READ_ALL = r'''
import resource, sys, time
t = time.perf_counter()
from scijudge.run.store import Run
with Run(sys.argv[1], create=False) as run:
    frame = run.to_pandas()
print(f"{time.perf_counter() - t:.3f} {len(frame)} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}")
'''


def fetch(opener: urllib.request.OpenerDirector, url: str | urllib.request.Request) -> tuple[float, int]:
    start = time.perf_counter()
    with opener.open(url, timeout=60) as response:
        body = response.read()
    return time.perf_counter() - start, len(body)


def peak_rss_mb(pid: int) -> float:
    text = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+)", text).group(1)) / 1024


FIRST = ("URL line printed", "first page (runs)", "first items page", "first labelling page",
         "URL line to the first labelling page")


@contextlib.contextmanager
def started_viewer(src: str | None, store: Path, labels: Path, out: Path,
                   env: dict[str, str]) -> Iterator[tuple[urllib.request.OpenerDirector, str, dict[str, float], int]]:
    """The viewer of the code in ``src`` (None: this environment's) started on ``store``, stopped on exit: an opener
    holding its cookie, its base URL, and the seconds to its URL line, to each first page (runs, items, label, in
    that order, as a user opens them) and from the URL line to the labelling page; its process id."""
    out.unlink(missing_ok=True)
    started = time.perf_counter()
    server = subprocess.Popen([sys.executable, "-m", "scijudge", "view", str(store), "--labels", str(labels),
                               "--label-out", str(out), "--no-browser", "--port", "0"], stdout=subprocess.PIPE,
                              text=True, env=env if src is None else dict(env, PYTHONPATH=src))
    try:
        line = server.stdout.readline()
        up = time.perf_counter()
        match = re.match(r"scijudge view: (http://\S+/)\?token=(\S+)", line)
        if not match:
            raise SystemExit(f"no URL line from {src or 'this code'}: {line!r}")
        base, token = match.groups()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        runs, _ = fetch(opener, f"{base}?token={token}")
        items, _ = fetch(opener, f"{base}items")
        label, _ = fetch(opener, f"{base}label")
        yield opener, base, dict(zip(FIRST, (up - started, runs, items, label, time.perf_counter() - up))), server.pid
    finally:
        server.terminate()
        server.wait(10)


def first_requests(src: str, store: Path, labels: Path, out: Path, env: dict[str, str]) -> dict[str, float]:
    """The first requests of the viewer of the code in ``src`` (``started_viewer``)."""
    with started_viewer(src, store, labels, out, env) as (_opener, _base, first, _pid):
        return first


def side_by_side(reference: str, rounds: int, store: Path, labels: Path, tmp: Path, env: dict[str, str]) -> None:
    """The first requests of the reference code's viewer and of this one, alternating, medians and their ratio."""
    import statistics

    this = str(Path(__file__).resolve().parents[1] / "src")
    found: dict[str, list[dict[str, float]]] = {"reference": [], "this": []}
    for _round in range(rounds):
        for name, src in (("reference", reference), ("this", this)):
            found[name].append(first_requests(src, store, labels, tmp / "side_labels.jsonl", env))
    print(f"\nfirst requests, side by side ({rounds} rounds each, alternating; medians): reference {reference}")
    print(f"{'':40s} {'reference':>10s} {'this':>10s} {'this/ref':>9s}")
    for key in FIRST:
        old = statistics.median(r[key] for r in found["reference"])
        new = statistics.median(r[key] for r in found["this"])
        print(f"{key:40s} {old:10.3f} {new:10.3f} {new / old:9.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--keep", help="work in this folder (kept)")
    parser.add_argument("--reference", help="the src folder of other code: its viewer's first requests beside these")
    parser.add_argument("--rounds", type=int, default=3, help="with --reference: starts of each viewer")
    args = parser.parse_args()
    tmp = Path(args.keep or tempfile.mkdtemp(prefix="bench_view_"))
    tmp.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="true", PYTHONPYCACHEPREFIX=str(tmp / "pycache"))
    store, labels = tmp / "big.sqlite", tmp / "labels.jsonl"
    if not store.exists():
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", MAKE_STORE, str(args.rows), str(store), str(labels)], env=env, check=True)
        print(f"store: {args.rows:,} judgments written in {time.perf_counter() - started:.1f} s "
              f"({store.stat().st_size / 2**20:.0f} MiB)")
    with open("/proc/loadavg") as handle:
        print(f"load average: {handle.read().split()[0]} (figures on a shared machine are noisy)")
    read_all = subprocess.run([sys.executable, "-c", READ_ALL, str(store)], env=env, capture_output=True, text=True,
                              check=True).stdout.split()
    load_s, load_rss = float(read_all[0]), float(read_all[2])

    with started_viewer(None, store, labels, tmp / "new_labels.jsonl", env) as (opener, base, first, pid):
        up_s, first_runs, first_items, first_label = (first[k] for k in FIRST[:4])
        pages = {
            "items page 2": "items?page=2",
            "items page 3": "items?page=3",
            "items page 1,000 (deep offset)": "items?page=1000",
            "last items page": f"items?page={-(-args.rows // 50)}",
            "sorted by score, descending": "items?sort=score&desc=1",
            "sorted by score, page 500": "items?sort=score&desc=1&page=500",
            "filter judge + model + status + score range": "items?judge=yescieval.qa.coherence&model=m/beta&status=ok"
                                                           "&min=2&max=4",
            "text search in rationales": "items?q=supports+7+of",
            "sorted by |judge - human|": "items?sort=disagreement&desc=1",
            "sorted by spread between models": "items?sort=spread&desc=1",
            "one item": "item?id=q000123",
            "labelling page (the queue's next unit)": "label",
            "runs page again": "",
        }
        rng = random.Random(1)
        order = list(pages.items())
        timings: dict[str, float] = {}
        for _round in range(3):
            rng.shuffle(order)
            for name, path in order:
                spent, _size = fetch(opener, base + path)
                timings[name] = max(timings.get(name, 0.0), spent)
        post = urllib.request.Request(base + "label", method="POST", headers={"Content-Type": "application/json"},
                                      data=b'{"item_id": "q000001", "judge": "yescieval.qa.coherence", "score": 3}')
        timings["a label written (POST /label)"], _ = fetch(opener, post)
        pages["a label written (POST /label)"] = ""
        rss = peak_rss_mb(pid)
    print(f"\n{'':46s} {'seconds':>8s} {'target':>7s}")
    print(f"{'server up (URL line printed; scales resolved)':46s} {up_s:8.3f} {'':>7s}")
    print(f"{'first page (runs), first request':46s} {first_runs:8.3f} {1.5:7.1f}  {'ok' if first_runs <= 1.5 else 'OVER'}")
    print(f"{'first items page, first request':46s} {first_items:8.3f} {1.5:7.1f}  {'ok' if first_items <= 1.5 else 'OVER'}")
    print(f"{'first labelling page, first request':46s} {first_label:8.3f} {1.5:7.1f}  "
          f"{'ok' if first_label <= 1.5 else 'OVER'}")
    for name, _ in pages.items():
        spent = timings[name]
        print(f"{name:46s} {spent:8.3f} {0.5:7.1f}  {'ok' if spent <= 0.5 else 'OVER'}")
    slowest = max(timings.values())
    print(f"\nslowest later page: {slowest:.3f} s = {slowest / 0.5:.2f}x the 0.5 s target")
    print(f"reading the whole store (Run.to_pandas, what a viewer loading the store pays first): {load_s:.2f} s, "
          f"peak {load_rss:.0f} MiB; the viewer's first items page took {first_items / load_s:.2f}x that time")
    print(f"viewer peak memory after every page: {rss:.0f} MiB = {rss / load_rss:.2f}x the loading process's peak")
    if args.reference:
        side_by_side(args.reference, args.rounds, store, labels, tmp, env)


if __name__ == "__main__":
    main()
