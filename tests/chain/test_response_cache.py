"""The response cache is written by one thread: workers never touch diskcache, and nothing is lost or unseen."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import dspy
import pytest

from scijudge.chain import cache


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
    real_write = cache._write

    def watched_write(entries):
        writers.add(threading.current_thread().name)
        real_write(entries)

    monkeypatch.setattr(cache, "_write", watched_write)

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
    def broken(entries):
        raise OSError("disk full")

    monkeypatch.setattr(cache, "_write", broken)
    cache.store_response(_key(1), _reply(1))
    assert cache.flush(timeout=10) is True  # the failed write leaves the queue
    assert cache.cached_response(_key(1)) is None  # and is simply a miss


def test_a_key_is_hashed_as_dspy_hashes_it_so_earlier_entries_are_found(tmp_path):
    """Entries written through ``dspy.cache.put`` (earlier releases) are found under the digest computed once."""
    from dspy import lm15

    from scijudge import make_lm

    dspy.configure_cache(enable_disk_cache=True, enable_memory_cache=False, disk_cache_dir=str(tmp_path / "dspy"))
    lm = make_lm("openai/judge", api_base="http://127.0.0.1:1/v1")
    request = lm15.Request(model="judge", messages=(lm15.Message.user("Rate this: 4 < 5 – ü"),), system="Be brief.",
                           config=lm15.Config(temperature=0.0, max_tokens=64, response_format={"type": "json_object"}))
    key = cache.cache_key(lm, request)
    assert key.digest == dspy.cache.cache_key(key.data)
    dspy.cache.put(key.data, {"version": cache._CACHE_VERSION, "text": "{}", "finish_reason": "stop", "logprobs": None})
    for here in (False, True):
        hit = cache.cached_response(key, here=here)
        assert hit is not None and hit.text == "{}"
    cache.flush()


def test_an_event_loop_reads_the_disk_itself_and_threads_through_the_cache_thread(disk_only_cache, monkeypatch):
    readers: list[str] = []
    real_read = cache._read

    def watched_read(key, *, disk=True):
        if disk:
            readers.append(threading.current_thread().name)
        return real_read(key, disk=disk)

    monkeypatch.setattr(cache, "_read", watched_read)
    assert cache.cached_response(_key(7), here=True) is None
    assert cache.cached_response(_key(8)) is None
    assert readers == [threading.current_thread().name, "scijudge-cache"]


def test_a_cache_of_another_class_is_used_through_its_get_and_put(monkeypatch):
    class Plain:
        def __init__(self):
            self.data = {}

        def get(self, key):
            return self.data.get(repr(key))

        def put(self, key, value):
            self.data[repr(key)] = value

    plain = Plain()
    monkeypatch.setattr(dspy, "cache", plain)
    cache.store_response(_key(3), _reply(3))
    assert cache.flush(timeout=10) is True
    assert [v["text"] for v in plain.data.values()] == ["answer 3"]
    assert cache.cached_response(_key(3), here=True).text == "answer 3"
    assert cache.cached_response(_key(4)) is None


def test_with_dspy_caching_off_nothing_is_queued_or_served():
    """A validated answer is not served from the write queue when DSPy's cache has both layers off (the tests'
    default): before, the queue answered a repeated request, which then reached no model and no engine."""
    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)
    key = {"model": "m", "messages": [{"role": "user", "content": "off"}], "temperature": 0.0}
    cache.store_response(key, SimpleNamespace(text="{}", finish_reason="stop", logprobs=None))
    assert cache.cached_response(key) is None
    assert cache.queued() == 0


def test_an_event_loop_writes_its_entries_itself_once_per_turn(disk_only_cache, monkeypatch):
    import asyncio

    batches: list[tuple[str, int]] = []
    real_write = cache._write

    def watched_write(entries):
        batches.append((threading.current_thread().name, len(entries)))
        real_write(entries)

    monkeypatch.setattr(cache, "_write", watched_write)

    async def run() -> list:
        async def one(i: int) -> str | None:
            await asyncio.sleep(0)
            cache.store_response(_key(i), _reply(i))
            hit = cache.cached_response(_key(i), here=True)  # read-your-writes before the turn ends
            return hit.text if hit is not None else None

        texts = await asyncio.gather(*(one(i) for i in range(40)))
        await asyncio.sleep(0)  # the turn after: the loop wrote what its tasks queued
        assert cache.queued() == 0
        cache.store_response(_key(99), _reply(99))  # the loop ends before its next turn: flush writes it
        return texts

    assert asyncio.run(run()) == [f"answer {i}" for i in range(40)]
    assert batches[0] == (threading.current_thread().name, 40)
    assert cache.flush(timeout=30) is True and cache.queued() == 0
    dspy.configure_cache(enable_disk_cache=True, enable_memory_cache=False, disk_cache_dir=str(disk_only_cache))
    assert [cache.cached_response(_key(i)).text for i in (0, 39, 99)] == ["answer 0", "answer 39", "answer 99"]
