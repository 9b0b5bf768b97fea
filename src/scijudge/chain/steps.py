"""The chain's requests and waits as steps, and the two drivers that run them.

The chain's logic (``StructuredChain._run_steps``) is a generator that yields a ``Call`` (send this request),
a ``Lookup`` (read the response cache) or a ``Sleep`` (a backoff, a rate-limit pause) and gets the response,
or the LM's error, back. ``drive`` runs the steps blocking, in the caller's thread (the thread and process
executors, optimizers); ``adrive`` awaits them on an event loop through DSPy's async LM call (the asyncio
executor). One copy of every fallback, retry and fault rule; two ways to wait.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

from scijudge.chain.cache import cached_response


@dataclass(frozen=True)
class Call:
    """A step of the chain: send ``request`` to ``lm`` (bounded as a whole by ``deadline`` seconds); the
    driver sends back the response or throws the LM's error in."""

    lm: Any
    request: Any
    deadline: float | None


@dataclass(frozen=True)
class Lookup:
    """A step of the chain: the validated answer in the response cache under ``key``, or None. Blocking drivers
    read through the cache thread; an event loop reads on the loop (no wait for another thread)."""

    key: Any


@dataclass(frozen=True)
class Sleep:
    """A step of the chain: wait ``seconds`` (a backoff, a rate-limit pause)."""

    seconds: float


Steps = Generator[Any, Any, Any]
"""The chain's logic as a generator of ``Call``/``Sleep`` steps, returning its value: written once, driven
blocking (``drive``) or on an event loop (``adrive``)."""


def drive(steps: Steps) -> Any:
    """Run the chain's steps in this thread: each ``Call`` through ``_call_with_deadline``, each ``Sleep`` a
    ``time.sleep``."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = steps.throw(error) if error is not None else steps.send(value)
        except StopIteration as done:
            return done.value
        value, error = None, None
        try:
            if isinstance(step, Call):
                value = _call_with_deadline(step.lm, step.request, step.deadline)
            elif isinstance(step, Lookup):
                value = cached_response(step.key)
            else:
                time.sleep(step.seconds)
        except Exception as exc:
            error = exc


async def adrive(steps: Steps) -> Any:
    """Run the chain's steps on the running event loop: each ``Call`` through DSPy's async LM call, each
    ``Sleep`` an ``asyncio.sleep``. Cancelling the awaiting task closes the steps (nothing more is sent)."""
    import asyncio

    value: Any = None
    error: BaseException | None = None
    try:
        while True:
            try:
                step = steps.throw(error) if error is not None else steps.send(value)
            except StopIteration as done:
                return done.value
            value, error = None, None
            try:
                if isinstance(step, Call):
                    value = await _acall_with_deadline(step.lm, step.request, step.deadline)
                elif isinstance(step, Lookup):
                    value = cached_response(step.key, here=True)
                else:
                    await asyncio.sleep(step.seconds)
            except Exception as exc:
                error = exc
    finally:
        steps.close()


def has_async_engine(lm: Any) -> bool:
    """Whether ``lm.acall`` awaits a real async client (DSPy's native or litellm engines, or a custom engine
    with an ``async_engine``); other LMs are called in a worker thread."""
    spec = getattr(lm, "_engine_spec", None)
    if isinstance(spec, str):
        return True
    return getattr(lm, "_async_engine_spec", None) is not None


async def _acall_with_deadline(lm: Any, request: Any, deadline: float | None) -> Any:
    """``_call_with_deadline`` awaited: ``lm.acall`` (``dspy_compat.acall_request``: the same call without DSPy's
    worker-thread hops) under ``asyncio.timeout`` (connect to last byte), or, for an LM with no async client,
    the blocking call in a worker thread."""
    import asyncio

    if not has_async_engine(lm):
        ctx = contextvars.copy_context()
        return await asyncio.to_thread(ctx.run, _call_with_deadline, lm, request, deadline)
    from scijudge.lm.dspy_compat import acall_request

    if deadline is None or not getattr(lm, "_scijudge_warm_async", False):
        response = await acall_request(lm, request)
        try:
            lm._scijudge_warm_async = True
        except AttributeError:
            pass
        return response
    try:
        async with asyncio.timeout(deadline):
            return await acall_request(lm, request)
    except TimeoutError:
        from scijudge.lm.dspy_compat import lm_errors

        raise lm_errors().LMTimeoutError(f"no complete answer within the {deadline:g} s deadline (timed out)") \
            from None


def _deadline(lm: Any) -> float | None:
    timeout = getattr(lm, "kwargs", {}).get("timeout")
    return float(timeout) if isinstance(timeout, (int, float)) and timeout > 0 else None


class RequestDeadline(Exception):
    """The whole request took longer than the LM's timeout."""

    status = None


def _call_with_deadline(lm: Any, request: Any, deadline: float | None) -> Any:
    """``lm(request)`` with scijudge's cache handling, bounded as a whole (connect to last byte) by ``deadline``.

    DSPy's engines apply the timeout per phase (a server that trickles bytes never times out), so the
    call runs in a daemon thread that is abandoned when the deadline passes. An LM's first call runs without
    it (DSPy may import and set up its client then, which can take seconds); DSPy's per-phase timeout still
    bounds that call.
    """
    if deadline is None or not getattr(lm, "_scijudge_warm", False):
        response = lm(request, cache=False)
        try:
            lm._scijudge_warm = True
        except AttributeError:
            pass
        return response
    box: dict[str, Any] = {}
    done = threading.Event()
    ctx = contextvars.copy_context()

    def call() -> None:
        try:
            box["response"] = ctx.run(lm, request, cache=False)
        except BaseException as exc:
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=call, daemon=True, name="scijudge-request").start()
    if not done.wait(deadline):
        from scijudge.lm.dspy_compat import lm_errors

        raise lm_errors().LMTimeoutError(f"no complete answer within the {deadline:g} s deadline (timed out)")
    if "error" in box:
        raise box["error"]
    return box["response"]
