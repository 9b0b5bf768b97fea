"""scijudge's own entries in DSPy's response cache: validated answers only, keyed with the endpoint.

The chain calls the LM with DSPy's cache off (DSPy would store any reply, including one that does not
parse, and key it without ``api_base``), and writes here only after an answer parsed and validated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scijudge.lm import _dspy_compat


def logprobs_as_dicts(logprobs: Any) -> list[dict[str, Any]] | None:
    if not logprobs:
        return None
    return [
        {"token": t.token, "logprob": t.logprob,
         "top_logprobs": [{"token": c.token, "logprob": c.logprob} for c in t.top]}
        for t in logprobs
    ]


_CACHE_VERSION = "scijudge.chain/1"


def cache_key(lm: Any, request: Any) -> dict[str, Any]:
    from scijudge.records import endpoint_of

    # rollout_id: optimizers resample with lm.copy(rollout_id=...); each rollout is a separate entry, as in DSPy.
    return {"_fn_identifier": _CACHE_VERSION, "endpoint": endpoint_of(lm),
            "rollout_id": (getattr(lm, "kwargs", None) or {}).get("rollout_id"),
            "request": _dspy_compat.request_as_dict(request)}


@dataclass
class _CachedResponse:
    text: str
    finish_reason: str | None
    logprobs: Any = None


def cached_response(key: dict[str, Any]) -> _CachedResponse | None:
    entry = _dspy_compat.cache_get(key)
    if not isinstance(entry, dict) or entry.get("version") != _CACHE_VERSION:
        return None
    return _CachedResponse(entry["text"], entry.get("finish_reason"), _logprobs_from_dicts(entry.get("logprobs")))


def store_response(key: dict[str, Any], response: Any) -> None:
    _dspy_compat.cache_put(key, {"version": _CACHE_VERSION, "text": response.text or "",
                                 "finish_reason": response.finish_reason,
                                 "logprobs": logprobs_as_dicts(response.logprobs)})


@dataclass
class _Token:
    token: str
    logprob: float
    top: list[Any]


def _logprobs_from_dicts(data: Any) -> list[_Token] | None:
    if not data:
        return None
    return [_Token(t["token"], t["logprob"], [_Token(c["token"], c["logprob"], []) for c in t["top_logprobs"]])
            for t in data]
