"""Fault injection for the loopback server: wrap a handler so that a share of chosen requests fail.

``FlakyHandler(handler, rate=0.3, when=is_proposal)`` answers 30% of the requests that ``when`` selects with
a 500 or a 429 (Retry-After: 0) instead of calling ``handler``; the rest pass through. The failures are spread
evenly and start with the first selected request (request k fails when ``floor(rate * k + 1 - rate)`` steps
up), so even a run with two proposal calls meets one; which kind of failure comes is seeded.
"""

from __future__ import annotations

import math
import random
import threading
from collections.abc import Callable
from typing import Any

from scijudge.testing.openai_server import Fault


class FlakyHandler:
    """A loopback handler that fails a seeded share of the selected requests (counted in ``failed``)."""

    def __init__(self, handler: Callable[[dict[str, Any]], Any], *, rate: float = 0.3, seed: int = 0,
                 when: Callable[[dict[str, Any]], bool] | None = None) -> None:
        self.handler = handler
        self.rate = rate
        self.when = when or (lambda body: True)
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self.selected = 0
        self.failed = 0

    def __call__(self, body: dict[str, Any]) -> Any:
        if self.when(body):
            with self._lock:
                k = self.selected
                self.selected += 1
                fail = math.floor(self.rate * (k + 1) + 1 - self.rate) > math.floor(self.rate * k + 1 - self.rate)
                kind = self._rng.random()
                if fail:
                    self.failed += 1
            if fail:
                if kind < 0.5:
                    return Fault(429, "injected rate limit", "rate_limit_error", headers={"Retry-After": "0"})
                return Fault(500, "injected server error", "server_error")
        return self.handler(body)
