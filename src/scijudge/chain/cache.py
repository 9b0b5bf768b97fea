"""scijudge's own entries in DSPy's response cache: validated answers only, keyed with the endpoint.

The chain calls the LM with DSPy's cache off (DSPy would store any reply, including one that does not
parse, and key it without ``api_base``), and writes here only after an answer parsed and validated. Judging
threads' writes to the on-disk cache go through one thread of the process (``_CacheThread``): 64 judging threads
writing to diskcache themselves halved throughput on its SQLite write lock. An event loop reads and writes the
cache itself (its writes once per turn of the loop, in one transaction), never waiting for or competing with
another thread. A key is hashed once per request (``benchmarks/bench_cli.py`` measures the cost).
"""

from __future__ import annotations

import atexit
import collections
import hashlib
import json
import os
import threading
from dataclasses import dataclass
from typing import Any, NamedTuple

from scijudge.lm import dspy_compat

try:
    import orjson
except ImportError:  # pragma: no cover - orjson comes with DSPy
    orjson = None  # type: ignore[assignment]


def logprobs_as_dicts(logprobs: Any) -> list[dict[str, Any]] | None:
    if not logprobs:
        return None
    return [
        {"token": t.token, "logprob": t.logprob,
         "top_logprobs": [{"token": c.token, "logprob": c.logprob} for c in t.top]}
        for t in logprobs
    ]


_CACHE_VERSION = "scijudge.chain/1"


class CacheKey(NamedTuple):
    """A response-cache key: the plain data DSPy's cache is keyed by and its digest, hashed once per request as
    DSPy's ``Cache.cache_key`` hashes it (so entries written by earlier releases through ``dspy.cache.put`` are
    found)."""

    data: dict[str, Any]
    digest: str


def cache_key(lm: Any, request: Any) -> CacheKey:
    from scijudge.records import endpoint_of

    # rollout_id: optimizers resample with lm.copy(rollout_id=...); each rollout is a separate entry, as in DSPy.
    return _as_key({"_fn_identifier": _CACHE_VERSION, "endpoint": endpoint_of(lm),
                    "rollout_id": (getattr(lm, "kwargs", None) or {}).get("rollout_id"),
                    "request": dspy_compat.request_as_dict(request)})


def _as_key(key: CacheKey | dict[str, Any]) -> CacheKey:
    if isinstance(key, CacheKey):
        return key
    try:  # DSPy's Cache.cache_key for plain JSON data (its value transform leaves such data as it is)
        encoded = orjson.dumps(key, option=orjson.OPT_SORT_KEYS)
    except (AttributeError, TypeError):  # no orjson, or a value it does not take
        encoded = json.dumps(key, sort_keys=True, default=str, separators=(",", ":")).encode()
    return CacheKey(key, hashlib.sha256(encoded).hexdigest())


@dataclass
class _CachedResponse:
    text: str
    finish_reason: str | None
    logprobs: Any = None


def _read(key: CacheKey, *, disk: bool = True) -> Any:
    """An entry of DSPy's response cache: its memory layer, then (``disk``) its disk layer; an unreadable entry is
    a miss. DSPy's own cache class is read directly under the key's digest, any other through its ``get``."""
    layers = dspy_compat.cache_layers()
    if layers is None:
        return dspy_cache().get(key.data) if disk else None
    memory, on_disk, lock = layers
    try:
        if memory is not None:
            with lock:
                hit = memory.get(key.digest)
            if hit is not None or not disk or on_disk is None:
                return hit
        if not disk or on_disk is None:
            return None
        hit = on_disk.get(key.digest)
    except Exception:  # an unreadable entry (or cache) is a miss
        return None
    if hit is not None and memory is not None:
        with lock:
            memory[key.digest] = hit
    return hit


def _write(entries: list[tuple[CacheKey, Any]]) -> None:
    """Store entries in both layers of DSPy's response cache, where ``_read`` finds them (the cache thread only):
    the disk layer in one transaction, a commit per batch rather than per entry (SQLite writes every commit's
    pages to its log: 0.1-0.2 ms of CPU per entry, twice that beside a reader, measured in ``bench_cli.py``)."""
    layers = dspy_compat.cache_layers()
    if layers is None:
        for key, value in entries:
            dspy_cache().put(key.data, value)
        return
    memory, on_disk, lock = layers
    if memory is not None:
        with lock:
            for key, value in entries:
                memory[key.digest] = value
    if on_disk is None:
        return
    if len(entries) < getattr(on_disk, "_count", 1):  # a FanoutCache's transaction spans all its shards (16
        for key, value in entries:                    # BEGINs and COMMITs): a few entries cost less one by one
            try:
                on_disk.set(key.digest, value)
            except Exception:
                pass
        return
    try:
        with on_disk.transact(retry=True):
            for key, value in entries:
                on_disk.set(key.digest, value)
    except Exception:  # the batch was rolled back: each entry on its own, so that one bad entry costs only itself
        for key, value in entries:
            try:
                on_disk.set(key.digest, value)
            except Exception:
                pass


def _running_loop() -> Any:
    """The event loop running on this thread, or None (asyncio's own check, without raising)."""
    import asyncio

    return asyncio._get_running_loop()


def dspy_cache() -> Any:
    import dspy

    return dspy.cache


GATHER_S = 0.2
"""How long the cache thread lets writes gather after the first of a batch (each batch is one transaction)."""
MAX_BATCH = 512


class _CacheThread:
    """One thread writes every entry of DSPy's response cache, so the judging threads never wait on diskcache's
    SQLite write lock (SQLite's busy handler sleeps 1, 2, 5 ... 100 ms under contention) nor open a SQLite
    connection per thread and shard; judging threads' reads of the disk layer go through it too. An event loop
    reads the disk layer itself (``cached_response(..., here=True)``: a read is about 10 us of SQLite, while
    waiting for this thread to be scheduled stalls every task of the loop, for milliseconds on a busy machine).

    Writes are queued and return at once; they gather for ``GATHER_S`` and are written in one transaction; reads
    are served first. An entry this process wrote is visible to it at once (``pending``, read-your-writes) and
    leaves ``pending`` once it is on disk; ``flush`` waits until everything queued is written (the end of a run,
    Ctrl-C, exit). Entries still queued when the process is killed are lost: cache entries only, never a judgment
    (the run store is written elsewhere).
    """

    def __init__(self) -> None:
        self._reads: collections.deque[tuple[CacheKey, list[Any], threading.Event]] = collections.deque()
        self._writes: list[tuple[CacheKey, dict[str, Any]]] = []
        self._here: list[tuple[CacheKey, dict[str, Any]]] = []  # queued on an event loop, written by it
        self._here_loop: Any = None  # the loop that will write them at the end of its turn
        self._pending: dict[str, dict[str, Any]] = {}
        self._flushing = 0
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._idle = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()

    def _ensure_thread(self) -> None:  # called with the lock held
        if self._pid != os.getpid():  # a forked child: the parent's thread and queue are not ours
            self._reads.clear()
            self._writes.clear()
            self._here.clear()
            self._here_loop = None
            self._pending.clear()
            self._thread, self._pid, self._flushing = None, os.getpid(), 0
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._serve, daemon=True, name="scijudge-cache")
            self._thread.start()

    def get(self, key: CacheKey, *, here: bool = False) -> Any:
        with self._lock:
            entry = self._pending.get(key.digest)
            if entry is not None and self._pid == os.getpid():
                return entry
        if here:
            return _read(key)
        hit = _read(key, disk=False)  # the memory layer: a dict look-up, on the caller's thread
        if hit is not None:
            return hit
        box: list[Any] = []
        done = threading.Event()
        with self._lock:
            self._ensure_thread()
            self._reads.append((key, box, done))
            self._wake.notify()
        done.wait()
        return box[0] if box else None

    def put(self, key: CacheKey, value: dict[str, Any]) -> None:
        loop = _running_loop()
        with self._lock:
            if loop is None or self._pid != os.getpid():
                self._ensure_thread()
            self._pending[key.digest] = value
            if loop is not None:
                # On an event loop: written by the loop itself at the end of this turn, with the others of the turn
                # in one transaction. A second thread writing beside the loop would fight it for the GIL: each of
                # the loop's socket calls gives the GIL away and waits for it back (measured: the judging phase
                # 1.4x as long with the writes on the cache thread, for 6% more CPU).
                self._here.append((key, value))
                if self._here_loop is not loop:
                    self._here_loop = loop
                    loop.call_soon(self._write_here, loop)
                return
            self._writes.append((key, value))
            if len(self._writes) == 1:  # the first of a batch; the rest gather without waking the thread
                self._wake.notify()

    def _write_here(self, loop: Any) -> None:
        """Write what the loop's tasks queued this turn (on the loop's thread)."""
        with self._lock:
            writes, self._here = self._here, []
            if self._here_loop is loop:
                self._here_loop = None
        if writes:
            self._written(writes)

    def _written(self, writes: list[tuple[CacheKey, dict[str, Any]]]) -> None:
        try:
            _write(writes)
        except Exception:  # a cache that cannot be written is only a cache: the judgment is stored anyway
            pass
        with self._lock:
            for key, value in writes:
                if self._pending.get(key.digest) is value:
                    del self._pending[key.digest]
            if not self._pending:
                self._idle.notify_all()

    def _next(self) -> tuple[list[Any], list[tuple[CacheKey, dict[str, Any]]]]:
        """Wait for work; return the queued reads and (once gathered, or at once for a flush) a batch of writes."""
        with self._lock:
            while not self._reads and not self._writes:
                self._wake.wait()
            if not self._reads and not self._flushing and len(self._writes) < MAX_BATCH:
                self._wake.wait(GATHER_S)  # woken early by a read, a flush or a full batch
            reads, self._reads = list(self._reads), collections.deque()
            writes, self._writes = self._writes[:MAX_BATCH], self._writes[MAX_BATCH:]
            return reads, writes

    def _serve(self) -> None:
        while True:
            reads, writes = self._next()
            for key, box, done in reads:
                box.append(_read(key))
                done.set()
            if writes:
                self._written(writes)

    def queued(self) -> int:
        """Entries queued but not yet written."""
        with self._lock:
            return len(self._pending) if self._pid == os.getpid() else 0

    def flush(self, timeout: float | None = 30.0) -> bool:
        """Wait until every queued entry is written; False when ``timeout`` passed first."""
        with self._lock:
            if self._pid != os.getpid():
                return True
            if self._here:  # queued on a loop that has not written them (it ended first): the thread writes them
                self._ensure_thread()
                self._writes.extend(self._here)
                self._here, self._here_loop = [], None
            self._flushing += 1
            self._wake.notify()
            try:
                return self._idle.wait_for(lambda: not self._pending, timeout=timeout)
            finally:
                self._flushing -= 1


_CACHE = _CacheThread()
atexit.register(_CACHE.flush, 10.0)


def flush(timeout: float | None = 30.0) -> bool:
    """Write out every cache entry this process queued (end of a run, Ctrl-C, exit); False on timeout."""
    return _CACHE.flush(timeout)


def queued() -> int:
    """How many cache entries this process queued that are not yet written."""
    return _CACHE.queued()


def cached_response(key: CacheKey | dict[str, Any], *, here: bool = False) -> _CachedResponse | None:
    """The validated answer cached under ``key``, or None. ``here``: read the disk layer on this thread (an event
    loop's), not through the cache thread."""
    entry = _CACHE.get(_as_key(key), here=here)
    if not isinstance(entry, dict) or entry.get("version") != _CACHE_VERSION:
        return None
    return _CachedResponse(entry["text"], entry.get("finish_reason"), _logprobs_from_dicts(entry.get("logprobs")))


def store_response(key: CacheKey | dict[str, Any], response: Any) -> None:
    """Queue a validated answer for DSPy's cache (written by the cache thread; visible to this process at once).
    Nothing is queued while DSPy's cache has both layers off: a queued entry would otherwise be served by ``get``."""
    layers = dspy_compat.cache_layers()
    if layers is not None and layers[0] is None and layers[1] is None:
        return
    _CACHE.put(_as_key(key), {"version": _CACHE_VERSION, "text": response.text or "",
                              "finish_reason": response.finish_reason,
                              "logprobs": logprobs_as_dicts(response.logprobs)})


@dataclass
class _Token:
    token: str
    logprob: float
    top: list[Any]


def _logprobs_from_dicts(data: Any) -> list[_Token] | None:
    if not data:
        return None
    return [_Token(t["token"], t["logprob"], [_Token(c["token"], c["logprob"], []) for c in t["top_logprobs"]])
            for t in data]
