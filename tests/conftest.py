"""Shared test setup: no network, no cross-test caching, fresh DSPy settings, a loopback server factory."""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "true"
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from collections.abc import Callable, Iterator
from pathlib import Path

import dspy
import pytest

from scijudge.testing import OpenAICompatServer

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _isolated_dspy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Each test starts with no configured LM, no response cache and a chain that has learnt nothing."""
    from scijudge.chain.chain import shared_memory

    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)
    shared_memory().reset()
    with dspy.context(lm=None, adapter=None):
        yield
    shared_memory().reset()


@pytest.fixture
def loopback() -> Iterator[Callable[..., OpenAICompatServer]]:
    """Start loopback OpenAI-compatible servers: ``srv = loopback(handler, latency=0)``; stopped after the test."""
    servers: list[OpenAICompatServer] = []

    def start(handler: Callable, latency: float = 0.0) -> OpenAICompatServer:
        server = OpenAICompatServer(handler, latency=latency).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def repo() -> Path:
    return REPO
