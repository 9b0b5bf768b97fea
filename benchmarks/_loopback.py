"""Run the loopback OpenAI-compatible server in its own process, so its CPU is not charged to the judge."""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import time
from collections.abc import Callable


def _rating_handler(body: dict) -> str:
    return json.dumps({"judgment": {"rationale": "adequate support for most claims", "rating": 4}})


def _serve(latency: float, port_queue: mp.Queue[int], handler: Callable[[dict], str] | None) -> None:
    from scijudge.testing import OpenAICompatServer

    server = OpenAICompatServer(handler or _rating_handler, latency=latency).start()
    port_queue.put(server.port)
    while True:
        time.sleep(3600)


class ServerProcess:
    """A loopback server in a child process; use as a context manager, read ``url``.

    ``handler`` must be a module-level function (it is pickled by reference into the child process).
    """

    def __init__(self, latency: float, handler: Callable[[dict], str] | None = None) -> None:
        self.latency = latency
        self.handler = handler
        self.url = ""
        self._proc: mp.Process | None = None

    def __enter__(self) -> ServerProcess:
        ctx = mp.get_context("spawn")
        queue: mp.Queue[int] = ctx.Queue()
        self._proc = ctx.Process(target=_serve, args=(self.latency, queue, self.handler), daemon=True)
        self._proc.start()
        self.url = f"http://127.0.0.1:{queue.get(timeout=60)}/v1"
        return self

    def __exit__(self, *exc: object) -> None:
        if self._proc is not None:
            self._proc.terminate()
            self._proc.join(10)


PAPERS = [{"title": "Capacity fade in layered oxides", "abstract": "Cycling at high voltage cracks particles."}]


def item_dicts(tag: str, n: int) -> list[dict]:
    """``n`` distinct items as canonical JSON objects (distinct prompts, so a response cache never answers them)."""
    return [{"id": f"{tag}-{i}", "question": "What limits battery life?", "papers": PAPERS,
             "answer": f"Answer {i} ({tag}): particle cracking at high voltage [1]."} for i in range(n)]


def make_items(tag: str, n: int) -> list:
    """``item_dicts`` as ``Item`` objects."""
    from scijudge import Item

    return [Item(**data) for data in item_dicts(tag, n)]


def run_loop_args(description: str | None) -> argparse.ArgumentParser:
    """The arguments every loopback run-loop benchmark takes: judgments per round, concurrency, latency, rounds."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--judgments", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--rounds", type=int, default=3)
    return parser


def fresh_dspy_cache() -> str:
    """Point DSPy's on-disk response cache at a new temporary folder (before dspy is imported, so that worker
    processes inherit it); returns the folder. The CLI default path is this cache: memory + disk."""
    import atexit
    import os
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix="scijudge-bench-dspy-")
    os.environ["DSPY_CACHEDIR"] = folder
    atexit.register(shutil.rmtree, folder, True)  # removed when the benchmark exits
    return folder
