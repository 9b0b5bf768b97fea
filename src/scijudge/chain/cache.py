"""scijudge's own entries in DSPy's response cache: validated answers only, keyed with the endpoint.

The chain calls the LM with DSPy's cache off (DSPy would store any reply, including one that does not
parse, and key it without ``api_base``), and writes here only after an answer parsed and validated. Every access
to the on-disk cache goes through one thread of the process (``_CacheThread``): 64 judging threads writing to
diskcache themselves halved throughput on its SQLite write lock.
"""

from __future__ import annotations

import atexit
import collections
import json
import os
import threading
from dataclasses import dataclass
from typing import Any

from scijudge.lm import _dspy_compat


def logprobs_as_dicts(logprobs: Any) -> list[dict[str, Any]] | None:
    if not logprobs:
        return None
    return [
        {"token": t.token, "logprob": t.logprob,
         "top_logprobs": [{"token": c.token, "logprob": c.logprob} for c in t.top]}
        for t in logprobs
    ]


_CACHE_VERSION = "scijudge.chain/1"


def cache_key(lm: Any, request: Any) -> dict[str, Any]:
    from scijudge.records import endpoint_of

    # rollout_id: optimizers resample with lm.copy(rollout_id=...); each rollout is a separate entry, as in DSPy.
    return {"_fn_identifier": _CACHE_VERSION, "endpoint": endpoint_of(lm),
            "rollout_id": (getattr(lm, "kwargs", None) or {}).get("rollout_id"),
            "request": _dspy_compat.request_as_dict(request)}


@dataclass
class _CachedResponse:
    text: str
    finish_reason: str | None
    logprobs: Any = None


class _CacheThread:
    """One thread owns every access to DSPy's response cache, so the judging threads never wait on diskcache's
    SQLite write lock (SQLite's busy handler sleeps 1, 2, 5 ... 100 ms under contention) nor open a SQLite
    connection per thread and shard.

    Writes are queued and return at once; reads are served before queued writes. An entry this process wrote is
    visible to it at once (``pending``, read-your-writes) and leaves ``pending`` once it is on disk; ``flush``
    waits until everything queued is written (the end of a run, Ctrl-C, exit). Entries still queued when the
    process is killed are lost: cache entries only, never a judgment (the run store is written elsewhere).
    """

    def __init__(self) -> None:
        self._jobs: collections.deque[tuple[str, Any, Any]] = collections.deque()
        self._pending: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._idle = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()

    def _ensure_thread(self) -> None:  # called with the lock held
        if self._pid != os.getpid():  # a forked child: the parent's thread and queue are not ours
            self._jobs.clear()
            self._pending.clear()
            self._thread, self._pid = None, os.getpid()
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._serve, daemon=True, name="scijudge-cache")
            self._thread.start()

    def get(self, ident: str, key: dict[str, Any]) -> Any:
        box: list[Any] = []
        done = threading.Event()
        with self._lock:
            entry = self._pending.get(ident)
            if entry is not None and self._pid == os.getpid():
                return entry
            self._ensure_thread()
            self._jobs.appendleft(("get", key, (box, done)))  # reads jump the queue of writes
            self._wake.notify()
        done.wait()
        return box[0] if box else None

    def put(self, ident: str, key: dict[str, Any], value: dict[str, Any]) -> None:
        with self._lock:
            self._ensure_thread()
            self._pending[ident] = value
            self._jobs.append(("put", key, (ident, value)))
            self._wake.notify()

    def _serve(self) -> None:
        while True:
            with self._lock:
                while not self._jobs:
                    self._wake.wait()
                kind, key, extra = self._jobs.popleft()
            if kind == "get":
                box, done = extra
                try:
                    box.append(_dspy_compat.cache_get(key))
                except Exception:  # an unreadable cache is a miss
                    pass
                done.set()
                continue
            ident, value = extra
            try:
                _dspy_compat.cache_put(key, value)
            except Exception:  # a cache that cannot be written is only a cache: the judgment is stored anyway
                pass
            with self._lock:
                if self._pending.get(ident) is value:
                    del self._pending[ident]
                if not self._pending:
                    self._idle.notify_all()

    def queued(self) -> int:
        """Entries queued but not yet written."""
        with self._lock:
            return len(self._pending) if self._pid == os.getpid() else 0

    def flush(self, timeout: float | None = 30.0) -> bool:
        """Wait until every queued entry is written; False when ``timeout`` passed first."""
        with self._lock:
            if self._pid != os.getpid():
                return True
            return self._idle.wait_for(lambda: not self._pending, timeout=timeout)


_CACHE = _CacheThread()
atexit.register(_CACHE.flush, 10.0)


def flush(timeout: float | None = 30.0) -> bool:
    """Write out every cache entry this process queued (end of a run, Ctrl-C, exit); False on timeout."""
    return _CACHE.flush(timeout)


def queued() -> int:
    """How many cache entries this process queued that are not yet written."""
    return _CACHE.queued()


def _ident(key: dict[str, Any]) -> str:
    return json.dumps(key, sort_keys=True, default=str, separators=(",", ":"))


def cached_response(key: dict[str, Any]) -> _CachedResponse | None:
    entry = _CACHE.get(_ident(key), key)
    if not isinstance(entry, dict) or entry.get("version") != _CACHE_VERSION:
        return None
    return _CachedResponse(entry["text"], entry.get("finish_reason"), _logprobs_from_dicts(entry.get("logprobs")))


def store_response(key: dict[str, Any], response: Any) -> None:
    """Queue a validated answer for DSPy's cache (written by the cache thread; visible to this process at once)."""
    _CACHE.put(_ident(key), key, {"version": _CACHE_VERSION, "text": response.text or "",
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
