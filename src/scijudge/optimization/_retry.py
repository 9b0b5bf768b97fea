"""Retries for the optimizers' own LM calls, and the preflight call that checks a model before optimizing.

The judge's calls already go through the structured chain, which retries transient failures itself. The
optimizers' proposal and reflection calls (MIPROv2's instruction proposer, COPRO's breadth rewrites, SIMBA's
rules, GEPA's reflections) go straight to DSPy: with DSPy's transport retries off (each try must pass the
budget gate) one 500 or 429 would end the whole optimization. ``call_with_retries`` gives those calls the
chain's failure classes: 429 waits for Retry-After (capped), 5xx, timeouts and transport errors back off
exponentially, auth/billing/unknown-model errors end the run at once (``FatalModelError``). Every try is a
call through the budget gate, so retries count against the budget.

The chain's classification is imported from ``scijudge.chain.faults`` (one place decides what is transient).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from scijudge.errors import FatalModelError

T = TypeVar("T")

RETRYABLE = frozenset({"rate_limited", "timeout", "server_error", "transport_error"})


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry a transient failure of a proposal/reflection call."""

    max_retries: int = 4
    backoff_base: float = 1.0
    backoff_max: float = 30.0
    retry_after_cap: float = 60.0

    def delay(self, exc: Exception, retry: int) -> float:
        """Seconds before try ``retry + 2``: the server's Retry-After (capped), else jittered exponential backoff."""
        hint = getattr(exc, "retry_after", None)
        if isinstance(hint, (int, float)) and hint >= 0:
            return min(float(hint), self.retry_after_cap)
        ceiling = min(self.backoff_max, self.backoff_base * (2 ** retry))
        return random.uniform(ceiling / 2, ceiling)


def classify(exc: Exception) -> str | None:
    """The chain's outcome for an LM error (``rate_limited``, ``server_error``, ...); None means fatal."""
    from scijudge.chain.faults import classify as classify_fault

    fault, outcome = classify_fault(exc)
    return None if fault in ("run", "not_found") else outcome


def short_error(exc: Exception) -> str:
    """One line of an exception's text (the chain's shortening)."""
    from scijudge.chain.faults import short

    return short(exc)


def in_judge_call() -> bool:
    """True inside a judge's structured chain, which retries on its own (no second layer of retries)."""
    from scijudge.chain.chain import current_record

    return current_record() is not None


def _decide(exc: Exception, retry: int, policy: RetryPolicy, model: str) -> float:
    """Seconds to wait before the next try, or raise: fatal errors as FatalModelError, the last failure as is."""
    outcome = classify(exc)
    if outcome is None:
        raise FatalModelError(f"{model}: {short_error(exc)}") from exc
    if outcome not in RETRYABLE or retry >= policy.max_retries:
        raise exc
    return policy.delay(exc, retry)


def call_with_retries(send: Callable[[], T], policy: RetryPolicy, *, model: str = "model") -> T:
    """``send()`` with the policy's retries on transient LM errors (each try is a separate ``send``)."""
    retry = 0
    while True:
        try:
            return send()
        except Exception as exc:
            wait = _decide(exc, retry, policy, model)
        time.sleep(wait)
        retry += 1


async def acall_with_retries(send: Callable[[], Awaitable[T]], policy: RetryPolicy, *, model: str = "model") -> T:
    """Async twin of ``call_with_retries``."""
    retry = 0
    while True:
        try:
            return await send()
        except Exception as exc:
            wait = _decide(exc, retry, policy, model)
        await asyncio.sleep(wait)
        retry += 1


def preflight(lm: Any, *, timeout: float = 20.0, policy: RetryPolicy | None = None,
              wrap: Callable[[Any], Any] | None = None) -> None:
    """One tiny uncached request that proves endpoint, key and model work; a one-line FatalModelError if not.

    Connection failures fail at once (no retries: an endpoint that refuses connections will not come up
    while we wait); 429/5xx get ``policy``'s retries (default: 2 quick ones), so a busy provider is not
    mistaken for a broken one.
    """
    from dspy import lm15

    policy = policy or RetryPolicy(max_retries=2, backoff_base=0.5, backoff_max=2.0, retry_after_cap=5.0)
    probe = lm.copy(cache=False)
    if wrap is not None:  # e.g. through the run's budget gate, so the probe counts like any call
        probe = wrap(probe)
    if hasattr(probe, "num_retries"):
        probe.num_retries = 0
    if isinstance(getattr(probe, "kwargs", None), dict) and "timeout" in probe.kwargs:
        probe.kwargs["timeout"] = min(float(probe.kwargs["timeout"] or timeout), timeout)
    model = getattr(lm, "model", "model")
    where = (getattr(lm, "kwargs", {}) or {}).get("api_base")
    request = lm15.Request(model=model, messages=(lm15.Message.user("Reply with the single word OK."),),
                           config=lm15.Config(max_tokens=16))

    def send() -> Any:
        try:
            return probe(request)
        except Exception as exc:
            if classify(exc) == "transport_error":
                raise FatalModelError(f"{model}: {short_error(exc)}") from exc
            raise

    try:
        call_with_retries(send, policy, model=model)
    except FatalModelError as exc:
        raise FatalModelError(f"preflight failed, nothing was optimized: {exc}"
                              + (f" (api_base {where})" if where else "")) from None
    except Exception as exc:
        raise FatalModelError(f"preflight failed, nothing was optimized: {model}: {short_error(exc)}"
                              + (f" (api_base {where})" if where else "")) from None
