"""The response cache is written by one thread: workers never touch diskcache, and nothing is lost or unseen."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import dspy
import pytest

from scijudge.chain import cache
from scijudge.lm import _dspy_compat


def _key(i: int) -> dict:
    return {"_fn_identifier": "test", "endpoint": "http://127.0.0.1:1/v1", "request": {"n": i}}


def _reply(i: int) -> SimpleNamespace:
    return SimpleNamespace(text=f"answer {i}", finish_reason="stop", logprobs=None)


@pytest.fixture
def disk_only_cache(tmp_path):
    """A disk cache with the memory layer off, so read-your-writes must come from the queue, not DSPy's memory."""
    dspy.configure_cache(enable_disk_cache=True, enable_memory_cache=False, disk_cache_dir=str(tmp_path / "dspy"))
    yield tmp_path / "dspy"
    cache.flush()


def test_sixty_four_threads_read_their_writes_and_only_one_thread_writes(disk_only_cache, monkeypatch):
    writers: set[str] = set()
    real_put = _dspy_compat.cache_put

    def watched_put(key, value):
        writers.add(threading.current_thread().name)
        real_put(key, value)

    monkeypatch.setattr(_dspy_compat, "cache_put", watched_put)

    def write_then_read(i: int) -> str | None:
        cache.store_response(_key(i), _reply(i))
        hit = cache.cached_response(_key(i))
        return hit.text if hit is not None else None

    with ThreadPoolExecutor(64) as pool:
        texts = list(pool.map(write_then_read, range(640)))
    assert texts == [f"answer {i}" for i in range(640)]
    assert cache.flush(timeout=30) is True
    assert cache.queued() == 0
    assert writers == {"scijudge-cache"}


def test_flushed_entries_are_on_disk_for_a_new_cache(disk_only_cache):
    for i in range(50):
        cache.store_response(_key(i), _reply(i))
    assert cache.flush(timeout=30) is True
    # a fresh DSPy cache on the same folder (as a later process would open it)
    dspy.configure_cache(enable_disk_cache=True, enable_memory_cache=False, disk_cache_dir=str(disk_only_cache))
    found = [cache.cached_response(_key(i)) for i in range(50)]
    assert [hit.text if hit else None for hit in found] == [f"answer {i}" for i in range(50)]
    assert cache.cached_response(_key(999)) is None


def test_an_unwritable_cache_loses_no_judgment_and_flush_returns(disk_only_cache, monkeypatch):
    def broken(key, value):
        raise OSError("disk full")

    monkeypatch.setattr(_dspy_compat, "cache_put", broken)
    cache.store_response(_key(1), _reply(1))
    assert cache.flush(timeout=10) is True  # the failed write leaves the queue
    assert cache.cached_response(_key(1)) is None  # and is simply a miss
