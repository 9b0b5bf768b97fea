"""The one structured-output fallback chain every judge call goes through.

Strategies are tried in order (strict ``json_schema``, then ``json_object``), each at escalating
temperatures. A provider that refuses a format (on evidence, see ``_chain_faults``) skips straight to the
next strategy and the refusal is remembered per model and endpoint; ``json_schema`` answered with 404 or
a persistent 5xx also falls back to ``json_object``. An answer that does not parse or validate escalates
the temperature; a truncated answer (``finish_reason=length``) gets one retry with more tokens. Rate
limits pause every request to the same model and endpoint for the server's Retry-After (capped); server
errors and timeouts are retried with backoff. A request the provider refuses for this item alone
(content filter, context length) abstains that judgment with the provider's reason. Run-level faults
(unreachable endpoint, auth, model not found) raise ``EndpointError``; a judgment that got no answer at
all raises ``TransportFailure``: neither is ever a stored abstention. Only answers that parsed and
validated are cached, under a key that includes the endpoint.

It is a DSPy Adapter, so the same chain runs for direct calls, batches and inside optimizers: DSPy
modules call ``adapter(lm, lm_kwargs, signature, demos, inputs)`` and get parsed outputs back.
"""
from __future__ import annotations

import contextvars
import random
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

from scijudge.chain import faults
from scijudge.chain.cache import logprobs_as_dicts
from scijudge.chain.cache import cache_key as _cache_key
from scijudge.chain.cache import store_response as _store_response
from scijudge.chain.steps import (  # noqa: F401 - _call_with_deadline and RequestDeadline stay importable here
    Call,
    Lookup,
    RequestDeadline,
    Sleep,
    Steps,
    _call_with_deadline,
    _deadline,
    adrive,
    drive,
    has_async_engine,
)
from scijudge.errors import EndpointError, TransportFailure
from scijudge.lm import dspy_compat
from scijudge.records import Attempt, reply_text
from scijudge.chain.replies import non_json_reply
from scijudge.chain.fencing import fence_inputs, with_notice
from scijudge.spec.signatures import OUTPUT_FIELD
from scijudge.chain.schema import (  # noqa: F401 - public names of the chain, kept importable from here
    InvalidAnswer,
    _drop_empty_optional,
    _input_fields,
    _Invalid,
    _json_object,
    _output_type,
    _parse,
    _without,
    parse_answer,
    response_format_for,
    strict_schema,
)

JSONAdapter: Any = dspy_compat.json_adapter()

Strategy = Literal["json_schema", "json_object"]


class Abstained(Exception):
    """Every strategy failed: the judgment is an abstention with this reason."""

    def __init__(self, reason: str, attempts: list[Attempt] | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.attempts = attempts or []


@dataclass
class CallRecord:
    """What one judge call collected from the chain: attempts and the winning response's logprobs."""

    attempts: list[Attempt] = field(default_factory=list)
    logprobs: list[dict[str, Any]] | None = None
    text: str | None = None


_CURRENT: contextvars.ContextVar[CallRecord | None] = contextvars.ContextVar("scijudge_call", default=None)
STOP: contextvars.ContextVar[Any] = contextvars.ContextVar("scijudge_stop", default=None)
"""An event (``is_set()``) the runner sets when the run stops: no request is sent after it, retries included."""


def _stopped() -> bool:
    event = STOP.get()
    return event is not None and event.is_set()


def current_record() -> CallRecord | None:
    """The record of the judge call running in this context, if any."""
    return _CURRENT.get()


@contextmanager
def recording(*, join: bool = False) -> Iterator[CallRecord]:
    """Collect the attempts of one judge call. With ``join``, a call made inside another judge call (a step of
    a checklist judgment, the predictor inside ``judge_item``) adds its attempts to that call's record."""
    outer = _CURRENT.get()
    if join and outer is not None:
        yield outer
        return
    record = CallRecord()
    token = _CURRENT.set(record)
    try:
        yield record
    finally:
        _CURRENT.reset(token)


@contextmanager
def stopping_on(event: Any) -> Iterator[None]:
    """Within this block the chain sends nothing once ``event.is_set()`` (retries included): how a run's stop
    request and its fault gate reach requests already inside the chain."""
    token = STOP.set(event)
    try:
        yield
    finally:
        STOP.reset(token)


class ChainMemory:
    """What providers taught the chain, per model and endpoint: refused formats, formats that worked, and
    rate-limit pauses. Shared by every chain of a process by default (a refusal is true whatever the prompt
    layout or run); ``reset()`` forgets it all (tests)."""

    def __init__(self) -> None:
        self.rejected: dict[str, set[str]] = {}
        self.working: dict[str, set[str]] = {}
        self.paused_until: dict[str, float] = {}
        self.lock = threading.Lock()

    def reset(self) -> None:
        with self.lock:
            self.rejected.clear()
            self.working.clear()
            self.paused_until.clear()


_SHARED_MEMORY = ChainMemory()


def shared_memory() -> ChainMemory:
    """The process's chain memory (what every chain learns from providers unless given its own)."""
    return _SHARED_MEMORY


@dataclass(frozen=True)
class ChainConfig:
    """Knobs of the chain; defaults follow DESIGN.md."""

    strategies: tuple[Strategy, ...] = ("json_schema", "json_object")
    temperatures: tuple[float, ...] = (0.0, 0.3, 0.5)
    max_tokens: int = 1024
    length_retry_factor: float = 2.0
    transport_retries: int = 4
    timeout_retries: int = 1
    backoff_base: float = 0.5
    backoff_max: float = 30.0
    retry_after_cap: float = 120.0
    logprobs: int | None = None


def _model_key(lm: Any) -> str:
    base = getattr(lm, "kwargs", {}).get("api_base") or ""
    return f"{getattr(lm, 'model', type(lm).__name__)}@{base}"


class _NextStrategy(Exception):
    """This strategy cannot work for this call (format refused, 404 or persistent 5xx): try the next one."""

    def __init__(self, problem: str, *, remember: bool) -> None:
        super().__init__(problem)
        self.remember = remember


class StructuredChain(JSONAdapter):  # DSPy's adapter class, looked up at run time (Any to the checker)
    """A DSPy adapter that runs the fallback chain around every LM call (see module docstring)."""

    def __init__(self, config: ChainConfig | None = None, *, memory: ChainMemory | None = None) -> None:
        super().__init__(use_native_function_calling=False)
        self.config = config or ChainConfig()
        self.memory = memory or shared_memory()
        self._configs: dict[tuple[Any, ...], Any] = {}

    def with_config(self, **changes: Any) -> StructuredChain:
        """A chain of the same kind and memory with some settings changed (this one is left as it is)."""
        from dataclasses import replace

        return type(self)(replace(self.config, **changes), memory=self.memory)

    def format(self, signature: Any, demos: list[dict[str, Any]], inputs: dict[str, Any]) -> list[dict[str, Any]]:
        """DSPy's JSON prompt, with every input value fenced (issue 11: no value can open or close a section)."""
        names = {name for name, _ in _input_fields(signature)}
        demos = [fence_inputs(demo, names) for demo in demos]
        messages: list[dict[str, Any]] = super().format(signature, demos, fence_inputs(inputs, names))
        return messages

    def share_memory(self, other: StructuredChain) -> None:
        """Share what another chain learnt (refused formats, working formats, rate-limit pauses)."""
        self.memory = other.memory

    def format_system_message(self, signature: Any) -> str:
        """The system message depends only on the signature: cache it (schema rendering is slow)."""
        return _system_message(self, signature)

    def format_user_message_content(self, signature: Any, inputs: dict[str, Any], prefix: str = "",
                                    suffix: str = "", main_request: bool = False) -> str:
        """DSPy's user message, with plain-text values written as they are: DSPy builds a pydantic TypeAdapter per
        value to get the same text back (about 0.2 ms of CPU per input per judgment, measured with
        ``benchmarks/bench_async.py --profile``); any other value goes through DSPy's formatting."""
        format_field_value = dspy_compat.format_field_value
        messages = [prefix]
        for name, info in _input_fields(signature):
            if name in inputs:
                value = inputs[name]
                text = value if isinstance(value, str) else format_field_value(field_info=info, value=value)
                messages.append(f"[[ ## {name} ## ]]\n{text}")
        if main_request:
            requirements = self.user_message_output_requirements(signature)
            if requirements is not None:
                messages.append(requirements)
        messages.append(suffix)
        return "\n\n".join(messages).strip()

    def format_field_with_value(self, fields_with_values: dict[Any, Any], role: str = "user") -> str:
        """Plain-text inputs are written as they are (DSPy builds a pydantic TypeAdapter per field to get the
        same text); anything else goes through DSPy's formatting."""
        if role == "user" and all(isinstance(value, str) for value in fields_with_values.values()):
            return "\n\n".join(f"[[ ## {field.name} ## ]]\n{value}" for field, value in fields_with_values.items()).strip()
        return str(super().format_field_with_value(fields_with_values, role))

    # --- what the provider refused or accepted, remembered per model and endpoint -------------
    def rejected_formats(self, lm: Any) -> set[str]:
        """Formats this model's provider refused earlier in this process."""
        with self.memory.lock:
            return set(self.memory.rejected.get(_model_key(lm), set()))

    def strategies_for(self, lm: Any) -> list[Strategy]:
        """The strategies a judgment with ``lm`` goes through, in order (formats its provider refused left out)."""
        rejected = self.rejected_formats(lm)
        return [s for s in self.config.strategies if s not in rejected]

    def remember_rejected(self, lm: Any, strategy: str) -> None:
        """Note that ``lm``'s provider refuses ``strategy`` (e.g. learnt from a batch's error lines)."""
        self._remember(self.memory.rejected, lm, strategy)

    def _remember(self, table: dict[str, set[str]], lm: Any, strategy: str) -> None:
        with self.memory.lock:
            table.setdefault(_model_key(lm), set()).add(strategy)

    def _works(self, lm: Any, strategy: str) -> bool:
        with self.memory.lock:
            return strategy in self.memory.working.get(_model_key(lm), set())

    # --- DSPy adapter entry points ------------------------------------------------------------
    def messages(self, signature: Any, demos: list[Any], inputs: dict[str, Any]) -> list[dict[str, Any]]:
        """The chat messages every request of the chain carries for these inputs (what ``scijudge view`` shows as
        the prompt sent)."""
        signature, inputs = _drop_empty_optional(signature, inputs)
        messages: list[dict[str, Any]] = self.format(signature, demos, inputs)
        return messages

    def __call__(self, lm: Any, lm_kwargs: dict[str, Any], signature: Any, demos: list[dict[str, Any]],
                 inputs: dict[str, Any]) -> list[dict[str, Any]]:
        signature, inputs = _drop_empty_optional(signature, inputs)
        messages = self.format(signature, demos, inputs)
        record = current_record() or CallRecord()
        value = self._run(lm, lm_kwargs, signature, messages, record)
        return [{OUTPUT_FIELD: value}]

    async def acall(self, lm: Any, lm_kwargs: dict[str, Any], signature: Any, demos: list[dict[str, Any]],
                    inputs: dict[str, Any]) -> list[dict[str, Any]]:
        """The same chain awaited: each request through DSPy's async LM call (``lm.acall``), each backoff and
        rate-limit pause an ``asyncio.sleep``, so thousands of judgments wait on one event loop."""
        signature, inputs = _drop_empty_optional(signature, inputs)
        messages = self.format(signature, demos, inputs)
        record = current_record() or CallRecord()
        value = await adrive(self._run_steps(lm, lm_kwargs, signature, messages, record))
        return [{OUTPUT_FIELD: value}]

    # --- the chain ----------------------------------------------------------------------------
    def _run(self, lm: Any, lm_kwargs: dict[str, Any], signature: Any, messages: list[dict[str, Any]],
             record: CallRecord) -> Any:
        return drive(self._run_steps(lm, lm_kwargs, signature, messages, record))

    def _run_steps(self, lm: Any, lm_kwargs: dict[str, Any], signature: Any, messages: list[dict[str, Any]],
                   record: CallRecord) -> Steps:
        """The whole chain for one judgment as steps (``Call``/``Sleep``): the one copy of its logic, driven
        by ``drive`` (blocking) or ``adrive`` (asyncio)."""
        from dspy import lm15

        output_type = _output_type(signature)
        system, chat = to_lm15(messages)
        base_tokens = int(lm_kwargs.get("max_tokens") or getattr(lm, "kwargs", {}).get("max_tokens")
                          or self.config.max_tokens)
        use_cache = bool(getattr(lm, "cache", False))
        last_problem = "no strategy was tried"
        strategies = self.strategies_for(lm)
        for position, strategy in enumerate(strategies):
            last_strategy = position == len(strategies) - 1
            try:
                for temperature in self.config.temperatures:
                    max_tokens = base_tokens
                    for length_try in range(2):
                        config = self._lm15_config(strategy, output_type, temperature, max_tokens)
                        request = lm15.Request(model=lm.model, messages=chat, system=system, config=config)
                        key = _cache_key(lm, request) if use_cache else None
                        response = (yield Lookup(key)) if key is not None else None
                        if response is not None:
                            notify = getattr(lm, "scijudge_cache_hit", None)
                            if callable(notify):  # e.g. an optimization budget counts cache hits as calls
                                notify()
                            record.attempts.append(Attempt(strategy=strategy, temperature=temperature,
                                                           max_tokens=max_tokens, outcome="ok", cached=True,
                                                           reply=reply_text(response.text)))
                        else:
                            response = yield from self._send_steps(lm, request, strategy, temperature,
                                                                   max_tokens, record, last_strategy)
                        attempt = record.attempts[-1]
                        text = response.text or ""
                        if response.finish_reason == "length" and length_try == 0:
                            attempt.outcome, attempt.error = "truncated", "finish_reason=length"
                            last_problem = "the answer was cut off at max_tokens"
                            max_tokens = int(max_tokens * self.config.length_retry_factor)
                            continue
                        try:
                            value, recovered = _parse(text, output_type)
                        except _Invalid as exc:
                            attempt.outcome, attempt.error = exc.outcome, str(exc)[:500]
                            last_problem = f"{exc.outcome}: {str(exc)[:300]}"
                            if response.finish_reason == "length":
                                attempt.outcome = "truncated"
                            break
                        attempt.outcome = "recovered_wrapper" if recovered else "ok"
                        self._remember(self.memory.working, lm, strategy)
                        record.text = text
                        record.logprobs = logprobs_as_dicts(response.logprobs)
                        if key is not None and not attempt.cached:
                            _store_response(key, response)  # only answers that parsed and validated
                        return value
            except _NextStrategy as exc:
                last_problem = str(exc)
                if exc.remember:
                    self._remember(self.memory.rejected, lm, strategy)
        raise Abstained(f"all strategies failed; last problem: {last_problem}", record.attempts)

    def _lm15_config(self, strategy: str, output_type: Any, temperature: float, max_tokens: int) -> Any:
        """The lm15 Config of one attempt, built once per chain and setting (it is frozen, and building one
        re-validates the whole response schema): every request with the same settings shares it."""
        key = (strategy, output_type, temperature, max_tokens)
        config = self._configs.get(key)
        if config is None:
            from dspy import lm15

            if len(self._configs) > 256:
                self._configs.clear()
            config = self._configs[key] = lm15.Config(
                temperature=temperature, max_tokens=max_tokens, response_format=response_format_for(strategy, output_type),
                logprobs=self.config.logprobs)
        return config

    # --- the same request and parsing for callers that send requests themselves (provider batch APIs) ---
    def chat_body(self, model: str, signature: Any, demos: list[dict[str, Any]], inputs: dict[str, Any], *,
                  strategy: Strategy, temperature: float, max_tokens: int | None = None) -> dict[str, Any]:
        """The OpenAI chat-completions body this chain sends for ``strategy`` at ``temperature`` (one batch line)."""
        request = self.lm15_request(model, signature, demos, inputs, strategy=strategy, temperature=temperature,
                                    max_tokens=max_tokens)
        messages = ([{"role": "system", "content": request.system}] if request.system else []) + [
            {"role": m.role, "content": "".join(getattr(p, "text", "") or "" for p in m.parts)}
            for m in request.messages]
        fmt = dict(request.config.response_format)
        if fmt["type"] == "json_schema":
            fmt = {"type": "json_schema", "json_schema": {k: v for k, v in fmt.items() if k != "type"}}
        body: dict[str, Any] = {"model": model, "messages": messages, "temperature": temperature,
                                "max_completion_tokens": request.config.max_tokens, "response_format": fmt}
        if self.config.logprobs is not None:
            body["logprobs"] = True
            if self.config.logprobs > 0:
                body["top_logprobs"] = self.config.logprobs
        return body

    def lm15_request(self, model: str, signature: Any, demos: list[dict[str, Any]], inputs: dict[str, Any], *,
                     strategy: Strategy, temperature: float, max_tokens: int | None = None) -> Any:
        """The lm15 Request this chain sends for ``strategy`` at ``temperature`` (a batch entry for lm15 providers)."""
        from dspy import lm15

        signature, inputs = _drop_empty_optional(signature, inputs)
        system, chat = to_lm15(self.format(signature, demos, inputs))
        fmt = response_format_for(strategy, signature.output_fields[OUTPUT_FIELD].annotation)
        config = lm15.Config(temperature=temperature, max_tokens=max_tokens or self.config.max_tokens,
                             response_format=fmt, logprobs=self.config.logprobs)
        return lm15.Request(model=model, messages=chat, system=system, config=config)

    def send_free_text(self, lm: Any, messages: list[dict[str, str]], *, label: str, record: CallRecord,
                       temperature: float = 0.0, max_tokens: int | None = None) -> Any | None:
        """Send chat ``messages`` with no response format, through the chain's transport (retries, pauses,
        fault classes, attempts recorded under ``label``). The response, or None when the provider refused
        the request as a format, so that the caller falls back to the structured chain."""
        from dspy import lm15

        budget = int(max_tokens or getattr(lm, "kwargs", {}).get("max_tokens") or self.config.max_tokens)
        system, chat = to_lm15(messages)
        config = lm15.Config(temperature=temperature, max_tokens=budget)
        request = lm15.Request(model=lm.model, messages=chat, system=system, config=config)
        try:
            return self._send(lm, request, label, temperature, budget, record, last_strategy=False)
        except _NextStrategy:
            return None

    def _send(self, lm: Any, request: Any, strategy: str, temperature: float, max_tokens: int,
              record: CallRecord, last_strategy: bool) -> Any:
        """Send one request with transport retries, or raise what the failure means (see ``_chain_faults``)."""
        return drive(self._send_steps(lm, request, strategy, temperature, max_tokens, record, last_strategy))

    def _send_steps(self, lm: Any, request: Any, strategy: str, temperature: float, max_tokens: int,
                    record: CallRecord, last_strategy: bool) -> Steps:
        retries = {"transport": self.config.transport_retries, "rate_limited": self.config.transport_retries,
                   "timeout": self.config.timeout_retries}
        tries: dict[str, int] = {}
        while True:
            yield from self._pause_steps(lm)
            if _stopped():
                raise TransportFailure("the run was stopped before this request was sent")
            started = time.perf_counter()
            try:
                response = yield Call(lm, request, _deadline(lm))
            except Exception as exc:
                fault, outcome = faults.classify(exc)
                record.attempts.append(Attempt(
                    strategy=strategy, temperature=temperature, max_tokens=max_tokens, outcome=outcome,
                    error_class=type(exc).__name__, error=faults.short(exc), status=getattr(exc, "status", None),
                    latency_s=time.perf_counter() - started))
                yield from self._handle_steps(lm, exc, fault, outcome, strategy, last_strategy, request, record,
                                              retries, tries)
                continue
            usage = response.usage
            record.attempts.append(Attempt(
                strategy=strategy, temperature=temperature, max_tokens=max_tokens, outcome="ok",
                tokens_in=usage.input_tokens, tokens_out=usage.output_tokens, cost=_cost(lm, response),
                latency_s=time.perf_counter() - started, reply=reply_text(response.text),
            ))  # the reply kept as it came: a later parse failure leaves it on the attempt
            return response

    def _handle_steps(self, lm: Any, exc: Exception, fault: str, outcome: str, strategy: str, last_strategy: bool,
                      request: Any, record: CallRecord, retries: dict[str, int], tries: dict[str, int]) -> Steps:
        """Return to retry the request; otherwise raise what the failure means for the judgment or the run."""
        where = f"{lm.model} at {faults.describe_endpoint(lm)}"
        if fault == "run":
            if faults.is_connect_failure(exc):
                raise EndpointError(f"cannot reach {where}: {faults.short(exc)}") from exc
            stop = EndpointError(f"{where}: {faults.run_reason(exc)}")
            stop.resume_helps = not faults.missing_key(exc)  # the same command fails again until the key is set
            raise stop from exc
        if fault == "not_found":
            if strategy == "json_schema" and not last_strategy:
                raise _NextStrategy(f"json_schema answered {getattr(exc, 'status', 404)}: {faults.short(exc)}",
                                    remember=True) from exc
            raise EndpointError(f"{where}: model or route not found ({faults.short(exc)}); check --model "
                                "and --api-base") from exc
        if fault == "context":
            raise Abstained(f"context_overflow: {faults.short(exc)}", record.attempts) from exc
        if fault == "format":
            raise _NextStrategy(f"the provider rejected response_format={strategy}", remember=True) from exc
        if fault == "item":
            if outcome == "request_rejected" and not self._works(lm, strategy) and not last_strategy \
                    and (yield from self._probe_steps(lm, request, strategy, record)):
                record.attempts[-2].outcome = "format_rejected"
                raise _NextStrategy(f"the provider rejected response_format={strategy} (a probe without the "
                                    "item's text was refused too)", remember=True) from exc
            raise Abstained(f"the provider refused this request: {faults.short(exc)}", record.attempts) from exc
        used = tries[fault] = tries.get(fault, 0) + 1
        if fault == "rate_limited":
            hint = faults.retry_after(exc)
            cap = self.config.retry_after_cap
            if hint is not None and hint > cap:
                raise EndpointError(f"{where} is rate limiting: it asks to wait {hint:g} s (Retry-After), more "
                                    f"than the {cap:g} s cap; re-run later to resume") from exc
            if used <= retries[fault]:
                self._pause(lm, hint if hint is not None else self._backoff(used - 1))
                return
        elif used <= retries[fault]:
            yield Sleep(self._backoff(used - 1))
            return
        page = non_json_reply(exc)
        if page is not None:  # retried like any transport error; still a page after that: the wrong endpoint
            raise EndpointError(f"{where} answers with an {page} after {used} tries: check --api-base "
                                f"({faults.short(exc)})") from exc
        if strategy == "json_schema" and not last_strategy and outcome == "server_error":
            raise _NextStrategy(f"json_schema: {outcome} after {used} tries: {faults.short(exc)}",
                                remember=False) from exc
        raise TransportFailure(f"{outcome} after {used} tries: {faults.short(exc)}") from exc

    def _probe_steps(self, lm: Any, request: Any, strategy: str, record: CallRecord) -> Steps:
        """Send the same format with a neutral prompt: True when the provider refuses that as well."""
        from dataclasses import replace

        from dspy import lm15

        probe = replace(request, messages=(lm15.Message.user("Reply with a JSON object."),), system=None)
        started = time.perf_counter()
        try:
            response = yield Call(lm, probe, _deadline(lm))
        except Exception as exc:
            fault, outcome = faults.classify(exc)
            record.attempts.append(Attempt(strategy=f"{strategy} probe", temperature=request.config.temperature,
                                           outcome=outcome, error=faults.short(exc), error_class=type(exc).__name__,
                                           status=getattr(exc, "status", None),
                                           latency_s=time.perf_counter() - started))
            return fault in ("item", "format")
        usage = response.usage
        record.attempts.append(Attempt(strategy=f"{strategy} probe", temperature=request.config.temperature,
                                       outcome="ok", tokens_in=usage.input_tokens, tokens_out=usage.output_tokens,
                                       cost=_cost(lm, response), latency_s=time.perf_counter() - started,
                                       reply=reply_text(response.text)))
        self._remember(self.memory.working, lm, strategy)
        return False

    # --- rate limits pause every request to the same model and endpoint ------------------------
    def _pause(self, lm: Any, seconds: float) -> None:
        until = time.monotonic() + min(max(seconds, 0.0), self.config.retry_after_cap)
        with self.memory.lock:
            key = _model_key(lm)
            self.memory.paused_until[key] = max(self.memory.paused_until.get(key, 0.0), until)

    def _pause_steps(self, lm: Any) -> Steps:
        with self.memory.lock:
            until = self.memory.paused_until.get(_model_key(lm), 0.0)
        while (remaining := until - time.monotonic()) > 0 and not _stopped():
            yield Sleep(min(remaining, 0.1))

    def _backoff(self, retry: int) -> float:
        ceiling = min(self.config.backoff_max, self.config.backoff_base * (2 ** retry))
        return random.uniform(ceiling / 2, ceiling)  # "equal jitter": never zero, never above the cap


@lru_cache(maxsize=512)
def _system_message(adapter: StructuredChain, signature: Any) -> str:
    # Every judge's instructions end by saying that the inputs are material to judge, never instructions.
    return str(JSONAdapter.format_system_message(adapter, signature.with_instructions(with_notice(signature.instructions))))


def to_lm15(messages: list[dict[str, Any]]) -> tuple[str | None, tuple[Any, ...]]:
    from dspy import lm15

    system_parts = [m["content"] for m in messages if m["role"] == "system"]
    chat = []
    for m in messages:
        if m["role"] == "user":
            chat.append(lm15.Message.user(m["content"]))
        elif m["role"] == "assistant":
            chat.append(lm15.Message.assistant(m["content"]))
    return ("\n\n".join(system_parts) or None), tuple(chat)


def _cost(lm: Any, response: Any) -> float | None:
    """Estimated USD cost from DSPy's price table (None when the model is not priced or usage is unknown)."""
    rates = _rates(lm.model, response)
    usage = response.usage
    if rates is None or usage.input_tokens is None or usage.output_tokens is None:
        return None
    return float(usage.input_tokens * rates[0] + usage.output_tokens * rates[1])


_RATES: dict[str, tuple[float, float] | None] = {}


def _rates(model: str, response: Any) -> tuple[float, float] | None:
    """Per-token input/output prices for a model, looked up once (flat rates; tiered pricing is ignored)."""
    if model in _RATES:
        return _RATES[model]
    from dataclasses import replace

    from dspy import lm15

    provider = model.split("/", 1)[0] if "/" in model else None
    found: list[float] = []
    for usage in (lm15.Usage(input_tokens=1_000_000, output_tokens=0), lm15.Usage(input_tokens=0, output_tokens=1_000_000)):
        try:
            cost, _ = dspy_compat.estimate_cost(replace(response, usage=usage), provider, model.split("/", 1)[-1])
        except Exception:
            cost = None
        if cost is None:
            _RATES[model] = None
            return None
        found.append(cost / 1_000_000)
    _RATES[model] = (found[0], found[1])
    return _RATES[model]


