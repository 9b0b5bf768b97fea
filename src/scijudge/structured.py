"""The one structured-output fallback chain every judge call goes through.

Strategies are tried in order (strict ``json_schema``, then ``json_object``), each at escalating
temperatures. A provider that rejects a format skips straight to the next strategy and the
rejection is remembered per model for the rest of the process; an answer that does not parse or
validate escalates the temperature; a truncated answer (``finish_reason=length``) gets one retry with
more tokens; rate limits, server errors and timeouts are retried with exponential backoff and jitter,
honouring Retry-After. Every attempt is recorded. When nothing works the call raises ``Abstained``
with its reason: the judge records an abstention, never a score of 0.

It is a DSPy Adapter, so the same chain runs for direct calls, batches and inside optimizers: DSPy
modules call ``adapter(lm, lm_kwargs, signature, demos, inputs)`` and get parsed outputs back.
"""

from __future__ import annotations

import contextvars
import json
import random
import re
import threading
import time
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

import pydantic
from dspy.adapters.json_adapter import JSONAdapter
from dspy.utils import exceptions as dspy_errors

from scijudge._replies import non_json_reply
from scijudge.errors import ModelError
from scijudge.fencing import fence_inputs, with_notice
from scijudge.redaction import redact
from scijudge.signatures import OUTPUT_FIELD

Strategy = Literal["json_schema", "json_object"]
Outcome = Literal[
    "ok", "recovered_wrapper", "format_rejected", "parse_error", "validation_error", "truncated",
    "rate_limited", "server_error", "timeout", "transport_error", "context_overflow", "provider_error",
]


class Attempt(pydantic.BaseModel):
    """One request sent (or answered from cache) inside the chain, with what came of it."""

    strategy: str
    temperature: float
    max_tokens: int | None = None
    outcome: Outcome
    error_class: str | None = None
    error: str | None = None
    status: int | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost: float | None = None
    latency_s: float = 0.0


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


def current_record() -> CallRecord | None:
    """The record of the judge call running in this context, if any."""
    return _CURRENT.get()


def start_record() -> tuple[CallRecord, contextvars.Token]:
    """Begin collecting attempts for one judge call (reset the token when done)."""
    record = CallRecord()
    return record, _CURRENT.set(record)


@dataclass(frozen=True)
class ChainConfig:
    """Knobs of the chain; defaults follow DESIGN.md."""

    strategies: tuple[Strategy, ...] = ("json_schema", "json_object")
    temperatures: tuple[float, ...] = (0.0, 0.3, 0.5)
    max_tokens: int = 1024
    length_retry_factor: float = 2.0
    transport_retries: int = 4
    backoff_base: float = 0.5
    backoff_max: float = 30.0
    logprobs: int | None = None


class _Invalid(Exception):
    def __init__(self, outcome: Outcome, message: str) -> None:
        super().__init__(message)
        self.outcome = outcome


_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.IGNORECASE)


def _json_object(text: str) -> dict[str, Any]:
    """The first JSON object in the text (code fences and chatter around it tolerated); never evaluated."""
    stripped = _FENCE.sub("", text.strip())
    try:
        value = json.loads(stripped)
    except json.JSONDecodeError:
        value = None
        decoder = json.JSONDecoder()
        for start in (m.start() for m in re.finditer(r"\{", stripped)):
            try:
                value, _ = decoder.raw_decode(stripped, start)
                break
            except json.JSONDecodeError:
                continue
    if not isinstance(value, dict):
        raise _Invalid("parse_error", "the answer is not a JSON object")
    return value


@lru_cache(maxsize=256)
def _strict_schema_json(output_type: type[pydantic.BaseModel]) -> str:
    return json.dumps(_build_strict_schema(output_type))


def strict_schema(output_type: type[pydantic.BaseModel]) -> dict[str, Any]:
    """A JSON schema for ``{"judgment": <output>}`` in the strict form OpenAI-style providers accept (cached)."""
    return json.loads(_strict_schema_json(output_type))


def _build_strict_schema(output_type: type[pydantic.BaseModel]) -> dict[str, Any]:
    schema = output_type.model_json_schema()
    defs = schema.pop("$defs", {})
    defs[output_type.__name__] = schema
    root: dict[str, Any] = {
        "type": "object",
        "properties": {OUTPUT_FIELD: {"$ref": f"#/$defs/{output_type.__name__}"}},
        "required": [OUTPUT_FIELD],
        "additionalProperties": False,
        "$defs": defs,
    }

    def enforce(part: Any) -> None:
        if isinstance(part, dict):
            if "$ref" in part:  # strict providers reject keywords beside a $ref
                for key in [k for k in part if k != "$ref"]:
                    del part[key]
            if part.get("type") == "object" and "properties" in part:
                part["required"] = list(part["properties"])
                part["additionalProperties"] = False
            part.pop("default", None)
            part.pop("title", None)
            for value in part.values():
                enforce(value)
        elif isinstance(part, list):
            for value in part:
                enforce(value)

    enforce(root)
    return root


def _classify(exc: Exception) -> Outcome | None:
    """Map a DSPy LM error to a chain outcome; None means fatal (auth, billing, configuration)."""
    if isinstance(exc, dspy_errors.ContextWindowExceededError):
        return "context_overflow"
    if isinstance(exc, dspy_errors.LMRateLimitError):
        return "rate_limited"
    if isinstance(exc, dspy_errors.LMTimeoutError):
        return "timeout"
    if isinstance(exc, dspy_errors.LMServerError):
        return "server_error"
    if isinstance(exc, dspy_errors.LMTransportError):
        # The native engine reports a read timeout as a transport error; keep the distinction.
        return "timeout" if "timed out" in str(exc).lower() else "transport_error"
    if isinstance(exc, dspy_errors.LMInvalidRequestError):
        status = getattr(exc, "status", None)
        if status in (400, 422) or status is None:
            return "format_rejected"
        return "provider_error"
    if isinstance(exc, (dspy_errors.LMAuthError, dspy_errors.LMBillingError, dspy_errors.LMConfigurationError,
                        dspy_errors.LMUnsupportedModelError)):
        return None
    if isinstance(exc, dspy_errors.LMProviderError) and non_json_reply(exc):
        return "transport_error"  # an HTML page behind HTTP 200: a proxy, not the API (issue 11)
    if isinstance(exc, dspy_errors.LMProviderError):
        status = getattr(exc, "status", None) or 0
        return "server_error" if status >= 500 or status == 0 else "provider_error"
    return None


def _model_key(lm: Any) -> str:
    base = getattr(lm, "kwargs", {}).get("api_base") or ""
    return f"{getattr(lm, 'model', type(lm).__name__)}@{base}"


class StructuredChain(JSONAdapter):
    """A DSPy adapter that runs the fallback chain around every LM call (see module docstring)."""

    def __init__(self, config: ChainConfig | None = None) -> None:
        super().__init__(use_native_function_calling=False)
        self.config = config or ChainConfig()
        self._rejected: dict[str, set[str]] = {}
        self._lock = threading.Lock()

    def format(self, signature: Any, demos: list[dict[str, Any]], inputs: dict[str, Any]) -> list[dict[str, Any]]:
        """DSPy's JSON prompt, with every input value fenced (issue 11: no value can open or close a section)."""
        names = set(signature.input_fields)
        demos = [fence_inputs(demo, names) for demo in demos]
        return super().format(signature, demos, fence_inputs(inputs, names))

    def format_system_message(self, signature: Any) -> str:
        """The system message depends only on the signature: cache it (schema rendering is slow)."""
        return _system_message(self, signature)

    def format_field_with_value(self, fields_with_values: dict[Any, Any], role: str = "user") -> str:
        """Plain-text inputs are written as they are (DSPy builds a pydantic TypeAdapter per field to get the
        same text); anything else goes through DSPy's formatting."""
        if role == "user" and all(isinstance(value, str) for value in fields_with_values.values()):
            return "\n\n".join(f"[[ ## {field.name} ## ]]\n{value}" for field, value in fields_with_values.items()).strip()
        return super().format_field_with_value(fields_with_values, role)

    # --- what the provider refused, remembered per model -------------------------------------
    def rejected_formats(self, lm: Any) -> set[str]:
        """Formats this model's provider refused earlier in this process."""
        with self._lock:
            return set(self._rejected.get(_model_key(lm), set()))

    def _remember_rejection(self, lm: Any, strategy: str) -> None:
        with self._lock:
            self._rejected.setdefault(_model_key(lm), set()).add(strategy)

    # --- DSPy adapter entry points ------------------------------------------------------------
    def __call__(self, lm: Any, lm_kwargs: dict[str, Any], signature: Any, demos: list[dict[str, Any]],
                 inputs: dict[str, Any]) -> list[dict[str, Any]]:
        signature, inputs = _drop_empty_optional(signature, inputs)
        messages = self.format(signature, demos, inputs)
        record = current_record() or CallRecord()
        value = self._run(lm, lm_kwargs, signature, messages, record)
        return [{OUTPUT_FIELD: value}]

    async def acall(self, lm: Any, lm_kwargs: dict[str, Any], signature: Any, demos: list[dict[str, Any]],
                    inputs: dict[str, Any]) -> list[dict[str, Any]]:
        import asyncio

        ctx = contextvars.copy_context()
        return await asyncio.to_thread(ctx.run, self.__call__, lm, lm_kwargs, signature, demos, inputs)

    # --- the chain ----------------------------------------------------------------------------
    def _run(self, lm: Any, lm_kwargs: dict[str, Any], signature: Any, messages: list[dict[str, Any]],
             record: CallRecord) -> Any:
        from dspy import lm15

        output_type = signature.output_fields[OUTPUT_FIELD].annotation
        system, chat = _to_lm15(messages)
        base_tokens = int(lm_kwargs.get("max_tokens") or getattr(lm, "kwargs", {}).get("max_tokens")
                          or self.config.max_tokens)
        last_problem = "no strategy was tried"
        for strategy in self.config.strategies:
            if strategy in self.rejected_formats(lm):
                continue
            response_format = response_format_for(strategy, output_type)
            rejected = False
            for temperature in self.config.temperatures:
                max_tokens = base_tokens
                for length_try in range(2):
                    config = lm15.Config(temperature=temperature, max_tokens=max_tokens,
                                         response_format=response_format, logprobs=self.config.logprobs)
                    request = lm15.Request(model=lm.model, messages=chat, system=system, config=config)
                    response = self._send(lm, request, strategy, temperature, max_tokens, record)
                    if response is None:  # the provider refused this format
                        self._remember_rejection(lm, strategy)
                        last_problem = f"the provider rejected response_format={strategy}"
                        rejected = True
                        break
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
                    record.text = text
                    record.logprobs = _logprobs_as_dicts(response.logprobs)
                    return value
                if rejected:
                    break
        raise Abstained(f"all strategies failed; last problem: {last_problem}", record.attempts)

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
        system, chat = _to_lm15(self.format(signature, demos, inputs))
        fmt = response_format_for(strategy, signature.output_fields[OUTPUT_FIELD].annotation)
        config = lm15.Config(temperature=temperature, max_tokens=max_tokens or self.config.max_tokens,
                             response_format=fmt, logprobs=self.config.logprobs)
        return lm15.Request(model=model, messages=chat, system=system, config=config)

    def _send(self, lm: Any, request: Any, strategy: str, temperature: float, max_tokens: int,
              record: CallRecord) -> Any:
        """Send one request with transport retries; None when the provider refuses the format."""
        for retry in range(self.config.transport_retries + 1):
            started = time.perf_counter()
            try:
                response = lm(request)
            except Exception as exc:  # noqa: BLE001 - classified below, re-raised when unknown
                outcome = _classify(exc)
                attempt = Attempt(strategy=strategy, temperature=temperature, max_tokens=max_tokens,
                                  outcome=outcome or "provider_error", error_class=type(exc).__name__,
                                  error=_short(exc), status=getattr(exc, "status", None),
                                  latency_s=time.perf_counter() - started)
                record.attempts.append(attempt)
                if outcome is None:
                    raise ModelError(f"{lm.model}: {_short(exc)}") from exc
                if outcome == "format_rejected":
                    return None
                if outcome in ("context_overflow", "provider_error"):
                    raise Abstained(f"{outcome}: {_short(exc)}", record.attempts) from exc
                if retry == self.config.transport_retries:
                    raise Abstained(f"{outcome} after {retry + 1} tries: {_short(exc)}", record.attempts) from exc
                time.sleep(self._delay(exc, retry))
                continue
            usage = response.usage
            record.attempts.append(Attempt(
                strategy=strategy, temperature=temperature, max_tokens=max_tokens, outcome="ok",
                tokens_in=usage.input_tokens, tokens_out=usage.output_tokens, cost=_cost(lm, response),
                latency_s=time.perf_counter() - started,
            ))
            return response
        raise AssertionError("unreachable")

    def _delay(self, exc: Exception, retry: int) -> float:
        hint = getattr(exc, "retry_after", None)
        if isinstance(hint, (int, float)) and hint >= 0:
            return min(float(hint), self.config.backoff_max)
        ceiling = min(self.config.backoff_max, self.config.backoff_base * (2 ** retry))
        return random.uniform(ceiling / 2, ceiling)  # "equal jitter": never zero, never above the cap


@lru_cache(maxsize=512)
def _system_message(adapter: "StructuredChain", signature: Any) -> str:
    # Every judge's instructions end by saying that the inputs are material to judge, never instructions.
    return JSONAdapter.format_system_message(adapter, signature.with_instructions(with_notice(signature.instructions)))


def response_format_for(strategy: str, output_type: type[pydantic.BaseModel]) -> dict[str, Any]:
    """The lm15 response_format a strategy asks for."""
    if strategy == "json_schema":
        return {"type": "json_schema", "name": "judgment", "schema": strict_schema(output_type), "strict": True}
    return {"type": "json_object"}


InvalidAnswer = _Invalid  # public name: ``parse_answer`` raises it with ``.outcome`` (parse_error / validation_error)


def parse_answer(text: str, signature: Any) -> tuple[Any, bool]:
    """Parse and validate an answer text for a judge signature exactly as the chain does: (value, recovered)."""
    return _parse(text, signature.output_fields[OUTPUT_FIELD].annotation)


def _parse(text: str, output_type: type[pydantic.BaseModel]) -> tuple[Any, bool]:
    data = _json_object(text)
    recovered = False
    if OUTPUT_FIELD in data:
        value = data[OUTPUT_FIELD]
        if isinstance(value, str):  # some models JSON-encode the inner object
            try:
                value = json.loads(value)
            except json.JSONDecodeError as exc:
                raise _Invalid("parse_error", f"'{OUTPUT_FIELD}' is a string, not an object") from exc
    else:
        value, recovered = data, True
    if value is None:
        raise _Invalid("validation_error", f"'{OUTPUT_FIELD}' is null")
    try:
        return output_type.model_validate(value), recovered
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise _Invalid("validation_error", f"{where}: {first['msg']}") from exc


def _drop_empty_optional(signature: Any, inputs: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """Leave optional inputs out of the prompt entirely when they are empty (no empty headings)."""
    drop = tuple(
        name for name, info in signature.input_fields.items()
        if not info.is_required() and inputs.get(name) in (None, "")
    )
    if not drop:
        return signature, inputs
    return _without(signature, drop), {k: v for k, v in inputs.items() if k not in drop}


@lru_cache(maxsize=512)
def _without(signature: Any, names: tuple[str, ...]) -> Any:
    """Signature minus some inputs; cached because building a signature class costs ~1 ms."""
    for name in names:
        signature = signature.delete(name)
    return signature


def _to_lm15(messages: list[dict[str, Any]]) -> tuple[str | None, tuple[Any, ...]]:
    from dspy import lm15

    system_parts = [m["content"] for m in messages if m["role"] == "system"]
    chat = []
    for m in messages:
        if m["role"] == "user":
            chat.append(lm15.Message.user(m["content"]))
        elif m["role"] == "assistant":
            chat.append(lm15.Message.assistant(m["content"]))
    return ("\n\n".join(system_parts) or None), tuple(chat)


def _logprobs_as_dicts(logprobs: Any) -> list[dict[str, Any]] | None:
    if not logprobs:
        return None
    return [
        {"token": t.token, "logprob": t.logprob,
         "top_logprobs": [{"token": c.token, "logprob": c.logprob} for c in t.top]}
        for t in logprobs
    ]


def _cost(lm: Any, response: Any) -> float | None:
    """Estimated USD cost from DSPy's price table (None when the model is not priced or usage is unknown)."""
    rates = _rates(lm.model, response)
    usage = response.usage
    if rates is None or usage.input_tokens is None or usage.output_tokens is None:
        return None
    return usage.input_tokens * rates[0] + usage.output_tokens * rates[1]


_RATES: dict[str, tuple[float, float] | None] = {}


def _rates(model: str, response: Any) -> tuple[float, float] | None:
    """Per-token input/output prices for a model, looked up once (flat rates; tiered pricing is ignored)."""
    if model in _RATES:
        return _RATES[model]
    from dataclasses import replace

    from dspy import lm15
    from dspy.clients.costs import estimate_cost

    provider = model.split("/", 1)[0] if "/" in model else None
    found: list[float] = []
    for usage in (lm15.Usage(input_tokens=1_000_000, output_tokens=0), lm15.Usage(input_tokens=0, output_tokens=1_000_000)):
        try:
            cost, _ = estimate_cost(replace(response, usage=usage), provider=provider,
                                    requested_model=model.split("/", 1)[-1])
        except Exception:  # noqa: BLE001 - pricing is advisory and must never fail a judgment
            cost = None
        if cost is None:
            _RATES[model] = None
            return None
        found.append(cost / 1_000_000)
    _RATES[model] = (found[0], found[1])
    return _RATES[model]


def _short(exc: Exception) -> str:
    text = redact(str(exc).replace("\n", " "))  # a server may echo the key or the endpoint's credentials
    return text[:300]
