"""Decision endpoints as judges: ``decisions:MODEL`` with ``--mode decision`` asks a server that returns
probabilities over typed answers instead of text, and the judgment stores them as its ``probs``.

Several providers and servers now document such an endpoint: OpenAI's Decisions API and SGLang's
``/v1/decisions`` (an input plus typed questions -- choice, score, yes/no -- each answered with the probability of
every option, read from the model's scores at the answer position, no text generated). Their field names differ in
details this module could not check against a live server, so scijudge speaks one small protocol modelled on
them, documented here and served by ``scijudge.testing.decision_server`` in the tests:

    POST {api_base}/decisions
    {"model": "...", "input": [{"role": "system"|"user"|"assistant", "content": "..."}],
     "questions": [{"type": "score", "name": "answer", "levels": ["1", "2", "3", "4", "5"]}]}
      (type "choice" with "choices": [...] for word labels such as satisfied / not_satisfied)
    200 {"model": "...", "answers": [{"type": "score", "name": "answer",
                                      "probabilities": [{"value": "1", "probability": 0.02}, ...]}],
         "usage": {"input_tokens": 812, "output_tokens": 0}}
    or an answer {"type": "refusal", "name": "answer", "refusal": "why"}: that judgment abstains.
    ``probabilities`` may also be an object {"1": 0.02, ...}.

The endpoint is a DSPy engine behind the ``decisions:`` backend, so a decision judgment goes through the chain's
one transport (retries, rate-limit pauses, fault classes) and the one judgment lifecycle like any other: the
engine turns the answer's probabilities into the top log-probabilities of one answer token, which the decision
chain already reads (``scijudge.chain.decision.level_distribution``). HTTP statuses map to the chain's faults:
429 a rate limit, 5xx a server error (retried), 401/403 a run-level stop, 404 an unknown model or route, other 4xx
and refusals an abstention of that item, no connection a run-level stop.
"""

from __future__ import annotations

import asyncio
import json
import math
import socket
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

PREFIX = "decisions:"
LEVELS_KEY = "scijudge_levels"
"""The request's ``config.extensions`` key that carries the levels a decision request asks about."""


def decision_body(model: str, request: Any, levels: Sequence[str]) -> dict[str, Any]:
    """The protocol's request body for one lm15 decision request (the judge's whole chat as the input)."""
    messages: list[dict[str, str]] = []
    system = request.system
    if system:
        text = system if isinstance(system, str) else "\n".join(getattr(p, "text", "") or "" for p in system)
        messages.append({"role": "system", "content": text})
    for message in request.messages:
        text = "\n".join(getattr(p, "text", "") or "" for p in message.parts)
        messages.append({"role": str(getattr(message, "role", "user")), "content": text})
    numeric = all(str(x).lstrip("-").isdigit() for x in levels)
    question: dict[str, Any] = {"type": "score" if numeric else "choice", "name": "answer"}
    question["levels" if numeric else "choices"] = [str(x) for x in levels]
    return {"model": model, "input": messages, "questions": [question]}


def read_answer(payload: Any, levels: Sequence[str]) -> dict[str, float]:
    """The probability of each level in a protocol response; ValueError when it is not one."""
    answers = payload.get("answers") if isinstance(payload, dict) else None
    if not isinstance(answers, list) or not answers or not isinstance(answers[0], dict):
        raise ValueError("the response has no answers")
    answer = answers[0]
    if answer.get("type") == "refusal":
        raise LookupError(str(answer.get("refusal") or "the model refused to answer"))
    raw = answer.get("probabilities")
    if isinstance(raw, list):
        pairs = [(str(e.get("value", e.get("level", e.get("choice")))), e.get("probability")) for e in raw
                 if isinstance(e, dict)]
    elif isinstance(raw, dict):
        pairs = [(str(k), v) for k, v in raw.items()]
    else:
        raise ValueError("the answer has no probabilities")
    wanted = {str(x) for x in levels}
    out: dict[str, float] = {}
    for value, p in pairs:
        if value in wanted and isinstance(p, (int, float)) and math.isfinite(p) and p >= 0:
            out[value] = out.get(value, 0.0) + float(p)
    if not out or sum(out.values()) <= 0:
        raise ValueError(f"no probability for any of the levels {sorted(wanted)}")
    return out


class DecisionEngine:
    """A DSPy engine that answers decision requests from a decision endpoint (module docstring)."""

    decision_endpoint = True
    """``scijudge.judges.decision`` sends this engine's LM the levels with each request."""

    def __init__(self, model: str, api_base: str, *, api_key: str | None = None, timeout: float = 60.0) -> None:
        self.model = model
        self.endpoint = api_base
        """What a judgment's identity records (``scijudge.records.endpoint_of``)."""
        self.url = api_base.rstrip("/") + "/decisions"
        self.api_key = api_key
        self.timeout = timeout

    def complete(self, request: Any) -> Any:
        from dspy import lm15

        extensions = getattr(request.config, "extensions", None) or {}
        levels = extensions.get(LEVELS_KEY) if isinstance(extensions, Mapping) else None
        if not levels:
            raise lm15.ConfigurationError(f"{PREFIX}{self.model} is a decision endpoint: it answers decision "
                                          "requests only (judge with --mode decision)")
        payload = self._post(decision_body(self.model, request, levels))
        try:
            probs = read_answer(payload, levels)
        except LookupError as exc:
            raise lm15.InvalidRequestError(f"the decision endpoint refused this item: {exc}", status=400) from None
        except ValueError as exc:
            raise lm15.TransportError(f"not a decision response from {self.url}: {exc}") from None
        raw_usage = payload.get("usage")
        usage: dict[str, Any] = raw_usage if isinstance(raw_usage, dict) else {}
        return _response(request.model, probs, int(usage.get("input_tokens") or 0),
                         int(usage.get("output_tokens") or 0))

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        from dspy import lm15

        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        data = json.dumps(body).encode()
        try:
            with urllib.request.urlopen(urllib.request.Request(self.url, data=data, headers=headers),
                                        timeout=self.timeout) as reply:
                text = reply.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as exc:
            raise _http_error(exc) from None
        except TimeoutError as exc:
            raise lm15.TimeoutError(f"{self.url} timed out ({exc})") from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, (TimeoutError, socket.timeout)):
                raise lm15.TimeoutError(f"{self.url} timed out ({exc.reason})") from None
            cause = exc.reason if isinstance(exc.reason, BaseException) else exc
            raise lm15.TransportError(f"cannot reach {self.url}: connection refused or unreachable "
                                      f"({exc.reason})") from cause
        try:
            payload = json.loads(text)
        except ValueError:
            raise lm15.ProviderError(f"invalid response from LLM endpoint {self.url}: not JSON (text/html?)",
                                     status=502) from None
        if not isinstance(payload, dict):
            raise lm15.ProviderError(f"invalid response from LLM endpoint {self.url}: not a JSON object", status=502)
        return payload

    async def acomplete(self, request: Any) -> Any:
        return await asyncio.to_thread(self.complete, request)

    def stream(self, request: Any) -> Any:  # pragma: no cover - judges never stream
        raise NotImplementedError("a decision endpoint does not stream")

    def close(self) -> None:
        return None


class AsyncDecisionEngine:
    """The async face of a :class:`DecisionEngine` (the asyncio executor awaits it on a worker thread)."""

    def __init__(self, engine: DecisionEngine) -> None:
        self.engine = engine

    async def complete(self, request: Any) -> Any:
        return await self.engine.acomplete(request)

    async def stream(self, request: Any) -> Any:  # pragma: no cover - judges never stream
        raise NotImplementedError("a decision endpoint does not stream")

    async def aclose(self) -> None:
        return None


def _http_error(exc: urllib.error.HTTPError) -> Exception:
    from dspy import lm15

    try:
        detail = exc.read().decode("utf-8", "replace")[:300]
    except OSError:
        detail = ""
    message = f"decision endpoint answered HTTP {exc.code}: {detail or exc.reason}"
    if exc.code == 429:
        return lm15.RateLimitError(message, status=429)
    if exc.code in (401, 403):
        return lm15.AuthError(message, status=exc.code)
    if exc.code == 404:
        return lm15.UnsupportedModelError(message, status=404)
    if exc.code >= 500:
        return lm15.ServerError(message, status=exc.code)
    return lm15.InvalidRequestError(message, status=exc.code)


def _response(model: str, probs: dict[str, float], tokens_in: int, tokens_out: int) -> Any:
    """An lm15 response whose one answer token carries the levels' probabilities as its top log-probabilities."""
    from dspy import lm15

    total = math.fsum(probs.values())
    top = [lm15.TopLogprob(token=level, logprob=math.log(p / total)) for level, p in probs.items() if p > 0]
    best = max(top, key=lambda t: t.logprob)
    chosen = lm15.TokenLogprob(token=best.token, logprob=best.logprob, top=tuple(top))
    return lm15.Response(id=None, model=model, message=lm15.Message.assistant(best.token), finish_reason="stop",
                         usage=lm15.Usage(input_tokens=tokens_in, output_tokens=tokens_out), logprobs=[chosen])


def decisions_lm(model: str, *, api_base: str | None = None, api_key: str | None = None, timeout: float | None = None,
                 cache: bool = True, max_tokens: int | None = None, **options: Any) -> Any:
    """``decisions:MODEL`` at ``api_base`` (the server's /v1 base): a ``dspy.LM`` on a :class:`DecisionEngine`."""
    import dspy

    from scijudge.errors import InputError
    from scijudge.lm.dspy_compat import use_local_cost_map

    if not api_base:
        raise InputError(f"model {model!r} is a decision endpoint: give its server's /v1 base URL with --api-base",
                         field="api_base")
    for ignored in ("engine", "logprobs", "top_logprobs", "temperature"):
        options.pop(ignored, None)
    use_local_cost_map()
    engine = DecisionEngine(model[len(PREFIX):], api_base, api_key=api_key, timeout=float(timeout or 60.0))
    return dspy.LM(model, engine=engine, async_engine=AsyncDecisionEngine(engine), cache=cache, num_retries=0,
                   **({"max_tokens": max_tokens} if max_tokens else {}))
