"""A small world for the viewer's tests: a run store, its items file, human labels and a picks file, with XSS
payloads in an answer and a rationale. Every expected value of the tests is computed from ``World.judgments``
(the dicts written), never by the viewer."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scijudge.run.store import Run

J1, J2 = "yescieval.qa.correctness", "yescieval.qa.completeness"
MODELS = ("m/alpha", "m/beta")
XSS_ANSWER = '<img src=x onerror="document.title=\'pwned-answer\'"> the answer'
XSS_RATIONALE = "<script>document.title='pwned-rationale'</script><b onmouseover=alert(1)>bold</b>"
XSS_REPLY = "Here you go: <svg onload=\"document.title='pwned-reply'\"></svg> {not json"
GOOD_REPLY = '```json\n{"judgment": {"rationale": "fine", "rating": 4}}\n```'
REPLIED = ("i002", J1, "m/alpha")
"""The judgment whose attempts carry the model's replies: one that did not parse (with markup in it), then one that did."""


@dataclass
class World:
    store: Path
    items: Path
    labels: Path
    picks: Path
    judgments: list[dict[str, Any]]
    truth: dict[str, float]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _attempts() -> list[dict[str, Any]]:
    return [{"strategy": "json_schema", "temperature": 0.0, "outcome": "parse_error", "error": "not JSON",
             "latency_s": 0.1, "reply": XSS_REPLY},
            {"strategy": "json_schema", "temperature": 0.3, "outcome": "ok", "latency_s": 0.1, "reply": GOOD_REPLY}]


def make_world(folder: Path, n: int = 24) -> World:
    folder.mkdir(parents=True, exist_ok=True)
    judgments: list[dict[str, Any]] = []
    truth = {f"i{i:03d}": float(1 + (i * 7) % 5) for i in range(n)}
    for i in range(n):
        item = f"i{i:03d}"
        for judge in (J1, J2):
            for m, model in enumerate(MODELS):
                abstained = (i + m) % 11 == 5
                score = None if abstained else float(min(5, max(1, truth[item] + ((i + m) % 3) - 1)))
                judgments.append({
                    "item_id": item, "judge": judge, "part": "", "family": "likert", "spec_hash": "h", "model": model,
                    "endpoint": "", "input_hash": "ih", "decoding": "", "status": "abstained" if abstained else "ok",
                    "score": score, "verdict": None, "confidence": None,
                    "probs": None if abstained else {str(k): (0.6 if k == score else 0.1) for k in range(1, 6)},
                    "result": None, "rationale": XSS_RATIONALE if i == 3 else (None if abstained else f"reason {i} {m}"),
                    "reason": "the provider refused the prompt" if abstained else None,
                    "attempts": _attempts() if (item, judge, model) == REPLIED else [],
                    "tokens_in": 100 + i, "tokens_out": 10, "cost": 0.001, "latency_s": 0.1,
                    "created_at": f"2026-12-01T10:{i:02d}:0{m}+00:00"})
    store = folder / "run.sqlite"
    with Run(store) as run:
        run.record_many(judgments)
        run.set_meta(items=str(folder / "items.jsonl"))
    items = folder / "items.jsonl"
    items.write_text("".join(json.dumps({"id": f"i{i:03d}", "question": f"question {i}?",
                                         "answer": XSS_ANSWER if i == 1 else f"answer {i}"}) + "\n"
                             for i in range(n)))
    labels = folder / "labels.jsonl"
    labels.write_text("".join(json.dumps({"item_id": f"i{i:03d}", "judge": J1, "score": truth[f"i{i:03d}"],
                                          "annotator": "given", "source": "expert"}) + "\n" for i in range(0, n, 4)))
    picks = folder / "picks.csv"
    rows = ["item_id,pi,picked"] + [f"i{i:03d},{0.2 + 0.03 * (i % 7):.2f},{'true' if i % 3 == 0 else 'false'}"
                                    for i in range(n)]
    picks.write_text("\n".join(rows) + "\n")
    return World(store, items, labels, picks, judgments, truth)


@contextmanager
def running_viewer(args: list[str], src: Path) -> Iterator[dict[str, Any]]:
    """``scijudge view ARGS --no-browser --port 0`` in a subprocess (the real CLI, ``src`` first on the path): its
    base URL, token and process, stopped on exit."""
    import os
    import re
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=str(src) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    process = subprocess.Popen([sys.executable, "-m", "scijudge", "view", *args, "--no-browser", "--port", "0"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        first = process.stdout.readline() if process.stdout else ""
        match = re.fullmatch(r"scijudge view: (http://127\.0\.0\.1:(\d+)/)\?token=([\w-]+)\n", first)
        assert match, (first, process.stderr.read() if process.poll() is not None and process.stderr else "")
        yield {"base": match.group(1), "token": match.group(3), "process": process}
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
