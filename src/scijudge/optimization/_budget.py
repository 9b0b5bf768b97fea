"""LM-call and cost budgets that hold under any optimizer: every call is counted BEFORE it is sent.

An optimization wraps each LM it hands out (the judge's LM and the proposal/reflection LM) with
``budgeted(lm, gate)``. The wrapper takes a slot from the gate before delegating to DSPy; when no
slot is left the call raises ``BudgetStop`` instead of going out, so a budget of N calls can never
become N+1 requests, whatever threads or retries the optimizer uses.

``BudgetStop`` derives from ``BaseException`` on purpose: optimizers, DSPy's evaluator and the
structured chain all catch ``Exception`` to keep going after a failed example, and a budget stop
must not be mistaken for one failed example (the optimizer would go on "evaluating" candidates with
every call refused). ``scijudge.optimization`` catches it at its boundary and turns it into a result
(best candidate so far) or a ``BudgetExceeded`` error.

Every call counts, whether the provider or DSPy's response cache answers it: a re-run of the same
optimization then stops at exactly the same point and is served entirely from the cache. Cost is
taken from DSPy's history entry of each call (priced models only; cache hits cost nothing).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from scijudge.lm.dspy_compat import rebind_class


class StopRun(BaseException):
    """Ends an optimization from inside the optimizer, past its ``except Exception`` handlers."""

    def __init__(self, reason: str, error: Exception | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.error = error


class BudgetStop(StopRun):
    """Raised instead of sending a call that would exceed the budget (or after the gate closed)."""


@dataclass
class Budget:
    """Shared counters of one optimization run: calls taken, cache hits, and dollars spent."""

    max_calls: int | None = None
    max_cost: float | None = None
    calls: int = 0
    cached_calls: int = 0
    cost: float = 0.0
    max_call_cost: float = 0.0
    unpriced_calls: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        from scijudge.optimization._progress import watch

        watch("budget", self)

    def snapshot(self) -> dict[str, Any]:
        """Counters as plain values (for provenance and tracking)."""
        with self._lock:
            return {"lm_calls": self.calls, "cached_calls": self.cached_calls, "cost_usd": self.cost,
                    "unpriced_calls": self.unpriced_calls}


class Gate:
    """One phase's door onto a shared Budget: a call limit of its own, and a switch to close it.

    ``reserve_calls`` keeps room for a later phase: this gate stops ``reserve_calls`` short of the call
    budget (via ``limit``) and, for cost, as soon as the spend plus ``reserve_calls`` times the dearest call
    so far would reach the cost budget.
    """

    def __init__(self, budget: Budget, name: str, limit: int | None = None, reserve_calls: int = 0) -> None:
        self.budget = budget
        self.name = name
        self.limit = limit
        self.reserve_calls = reserve_calls
        self._open = True
        self.stopped: str | None = None
        self._inflight = 0
        self._idle = threading.Condition(budget._lock)  # one lock: a call counts and goes in flight atomically

    def close(self, wait: float = 120.0) -> None:
        """Refuse every later call through this gate, then wait (up to ``wait`` s) for calls still in flight:
        a stopped optimizer's worker threads may have requests out, and the phase is over only when they are back."""
        with self._idle:
            self._open = False
            self._idle.wait_for(lambda: self._inflight == 0, timeout=wait)

    def _finished(self) -> None:
        with self._idle:
            self._inflight -= 1
            if self._inflight == 0:
                self._idle.notify_all()

    def acquire(self, n: int = 1) -> None:
        """Take ``n`` call slots or raise BudgetStop without sending anything."""
        b = self.budget
        with b._lock:
            if not self._open:
                raise BudgetStop(f"the {self.name} phase is over")
            caps = [c for c in (self.limit, b.max_calls) if c is not None]
            cap = min(caps) if caps else None
            if cap is not None and b.calls + n > cap:
                kept = f" ({self.reserve_calls} kept for the test evaluation)" if self.reserve_calls else ""
                self.stopped = (f"LM-call budget reached in the {self.name} phase: {b.calls} calls made, "
                                f"budget {b.max_calls}{kept}")
                raise BudgetStop(self.stopped)
            if b.max_cost is not None and b.cost + self.reserve_calls * b.max_call_cost >= b.max_cost:
                kept = (f" (${self.reserve_calls * b.max_call_cost:.4f} kept for the test evaluation)"
                        if self.reserve_calls else "")
                self.stopped = (f"cost budget reached in the {self.name} phase: ${b.cost:.4f} spent, "
                                f"budget ${b.max_cost:.4f}{kept}")
                raise BudgetStop(self.stopped)
            b.calls += n
            self._inflight += 1

    def record(self, entry: dict[str, Any]) -> None:
        """Account one finished call from its DSPy history entry (cache hits have empty usage)."""
        b = self.budget
        usage = entry.get("usage") or {}
        cost = entry.get("cost")
        with b._lock:
            if not usage:
                b.cached_calls += 1
            elif isinstance(cost, (int, float)) and math.isfinite(cost):
                b.cost += float(cost)
                b.max_call_cost = max(b.max_call_cost, float(cost))
            else:
                b.unpriced_calls += 1


def _generations(lm: Any, kwargs: dict[str, Any]) -> int:
    """How many requests one call sends: DSPy sends one request per requested generation."""
    for source in (kwargs, getattr(lm, "kwargs", {}) or {}):
        for key in ("n", "num_generations"):
            value = source.get(key)
            if isinstance(value, int) and value > 1:
                return value
    return 1


class _BudgetedMixin:
    """Counts calls through a Gate before DSPy sends them; shared, never duplicated, by deep copies."""

    _sj_gate: Gate

    def _sj_prepare(self, prompt: Any, kwargs: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """Honour an optimizer's resampling copy (``lm.copy(rollout_id=..., temperature=...)``) on explicit
        requests too: the structured chain builds its own requests, which would otherwise ignore both."""
        own = getattr(self, "kwargs", {}) or {}
        if "rollout_id" not in own:
            return prompt, kwargs
        from dspy import lm15

        if isinstance(prompt, lm15.Request):
            kwargs = {**kwargs}
            kwargs.setdefault("rollout_id", own["rollout_id"])
            wanted = own.get("temperature")
            current = prompt.config.temperature
            if isinstance(wanted, (int, float)) and (current is None or wanted > current):
                prompt = replace(prompt, config=replace(prompt.config, temperature=float(wanted)))
        return prompt, kwargs

    def _sj_send(self, prompt: Any, messages: Any, kwargs: dict[str, Any]) -> Any:
        self._sj_gate.acquire(_generations(self, kwargs))
        try:
            return super().__call__(prompt, messages=messages, **kwargs)  # type: ignore[misc]
        finally:
            self._sj_gate._finished()

    async def _sj_asend(self, prompt: Any, messages: Any, kwargs: dict[str, Any]) -> Any:
        self._sj_gate.acquire(_generations(self, kwargs))
        try:
            return await super().acall(prompt, messages=messages, **kwargs)  # type: ignore[misc]
        finally:
            self._sj_gate._finished()

    def _sj_policy(self) -> Any:
        """The retry policy for this call: none inside a judge call (the chain retries), else the LM's."""
        from scijudge.optimization._retry import in_judge_call

        policy = getattr(self, "_sj_retry", None)
        return None if policy is None or in_judge_call() else policy

    def __call__(self, prompt: Any = None, *, messages: Any = None, **kwargs: Any) -> Any:
        from scijudge.optimization._retry import FatalModelError, call_with_retries

        prompt, kwargs = self._sj_prepare(prompt, kwargs)
        policy = self._sj_policy()
        if policy is None:
            return self._sj_send(prompt, messages, kwargs)
        try:
            return call_with_retries(lambda: self._sj_send(prompt, messages, kwargs), policy,
                                     model=getattr(self, "model", "model"))
        except FatalModelError as exc:  # past the optimizers' `except Exception`: the run cannot go on
            raise StopRun(str(exc), exc) from None

    async def acall(self, prompt: Any = None, *, messages: Any = None, **kwargs: Any) -> Any:
        from scijudge.optimization._retry import FatalModelError, acall_with_retries

        prompt, kwargs = self._sj_prepare(prompt, kwargs)
        policy = self._sj_policy()
        if policy is None:
            return await self._sj_asend(prompt, messages, kwargs)
        try:
            return await acall_with_retries(lambda: self._sj_asend(prompt, messages, kwargs), policy,
                                            model=getattr(self, "model", "model"))
        except FatalModelError as exc:
            raise StopRun(str(exc), exc) from None

    def scijudge_cache_hit(self) -> None:
        """A call the structured chain answered from its own cache: counted like a DSPy cache hit."""
        self._sj_gate.acquire(1)
        try:
            self._sj_gate.record({"usage": {}})
        finally:
            self._sj_gate._finished()

    @contextmanager
    def scijudge_local_calls(self, n: int) -> Iterator[None]:
        """Requests a local engine answers without DSPy's LM call (decision mode's level probabilities): counted
        through the gate like any call, and as unpriced once answered."""
        self._sj_gate.acquire(n)
        try:
            yield
            for _ in range(n):
                self._sj_gate.record({"usage": {"local_requests": 1}})
        finally:
            self._sj_gate._finished()

    def update_history(self, entry: dict[str, Any]) -> None:
        self._sj_gate.record(entry)
        super().update_history(entry)  # type: ignore[misc]

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        # Programs are deep-copied for every candidate; the LM (and its budget) must stay one object.
        return self


_CLASSES: dict[type, type] = {}
_CLASSES_LOCK = threading.Lock()


def _budgeted_class(cls: type) -> type:
    cls = getattr(cls, "_sj_base_class", cls)  # re-wrapping swaps the gate, never stacks two counters
    with _CLASSES_LOCK:
        if cls not in _CLASSES:
            _CLASSES[cls] = type(f"Budgeted{cls.__name__}", (_BudgetedMixin, cls),
                                 {"__module__": __name__, "_sj_base_class": cls})
        return _CLASSES[cls]


def budgeted(lm: Any, gate: Gate, retry: Any = None) -> Any:
    """A copy of a DSPy LM whose every call goes through ``gate`` (DSPy retries off: each try is a call).

    ``retry`` (a ``RetryPolicy``) retries transient failures of calls made outside judge calls (the
    optimizers' proposals); each try takes its own slot from the gate.
    """
    import dspy

    if not isinstance(lm, dspy.BaseLM):
        raise TypeError(f"expected a dspy LM, got {type(lm).__name__}")
    wrapped = lm.copy()
    if getattr(wrapped, "num_retries", 0):
        wrapped.num_retries = 0  # a DSPy-level retry would send a request the gate never saw
    rebind_class(wrapped, _budgeted_class(type(lm)))
    wrapped._sj_gate = gate
    wrapped._sj_retry = retry
    return wrapped
