"""Fixtures shared by the run-layer tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from scijudge.testing.batch_server import BatchServer


@pytest.fixture
def batch_server() -> Iterator[Callable[..., BatchServer]]:
    """Start loopback batch servers: ``srv = batch_server(handler, **faults)``; stopped after the test."""
    servers: list[BatchServer] = []

    def start(handler: Callable, **options) -> BatchServer:
        server = BatchServer(handler, **options).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()
