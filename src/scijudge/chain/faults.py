"""What a failed LM request means for the chain: retry, try the next format, abstain this item, or stop the run.

The classes, by who is at fault:
- the *request format* (evidence only: the provider's message names ``response_format``/schema, or a probe
  without the item text fails the same way) -> the format is remembered as unsupported for that model;
- the *item* (a content filter, context length, any other 400 once the format is known to work) -> this
  judgment abstains with the provider's reason, nothing else changes;
- the *transport* (timeouts, 5xx, resets) -> retried with backoff, then the judgment gets no answer and is
  not stored;
- the *run* (connection refused, DNS, 401/403, billing, model not found, a 429 asking for longer than the
  cap) -> the run stops at once with one clear line.
"""

from __future__ import annotations

import re
import socket
from typing import Any, Literal

from scijudge.chain.replies import non_json_reply
from scijudge.lm.dspy_compat import lm_errors
from scijudge.redaction import redact

from scijudge.records import Outcome

Fault = Literal["format", "item", "context", "transport", "rate_limited", "timeout", "not_found", "run"]

_FORMAT_WORDS = ("response_format", "json_schema", "json schema", "structured output", "schema", "json_object",
                 "guided_json", "grammar")
_CONNECT_WORDS = ("connection refused", "failed to connect", "name or service not known", "nodename nor servname",
                  "getaddrinfo", "temporary failure in name resolution", "no route to host", "connection error.")


def classify(exc: BaseException) -> tuple[Fault, Outcome]:
    """The fault class of an LM error and the chain outcome to record for it."""
    errors = lm_errors()
    status = getattr(exc, "status", None)
    if isinstance(exc, errors.ContextWindowExceededError):
        return "context", "context_overflow"
    if isinstance(exc, (errors.LMAuthError, errors.LMBillingError, errors.LMConfigurationError)):
        return "run", "provider_error"
    if isinstance(exc, errors.LMUnsupportedModelError) or status == 404:
        return "not_found", "not_found"
    if isinstance(exc, errors.LMRateLimitError) or status == 429:
        return "rate_limited", "rate_limited"
    if is_connect_failure(exc):
        return "run", "transport_error"
    if non_json_reply(exc):
        return "transport", "transport_error"  # an HTML page behind HTTP 200: a proxy answered, retry (issue 11)
    text = str(exc).lower()
    if "text/html" in text or "invalid response from llm endpoint" in text:
        return "run", "provider_error"  # a web page, not an API: wrong --api-base or a login proxy
    if isinstance(exc, errors.LMTimeoutError):
        return "timeout", "timeout"
    if isinstance(exc, errors.LMServerError):
        return "transport", "server_error"
    if isinstance(exc, errors.LMTransportError):
        # The native engine reports a read timeout as a transport error; keep the distinction.
        return ("timeout", "timeout") if "timed out" in str(exc).lower() else ("transport", "transport_error")
    if isinstance(exc, errors.LMInvalidRequestError):
        if status in (400, 422, None):
            return ("format", "format_rejected") if names_the_format(exc) else ("item", "request_rejected")
        return "item", "provider_error"
    if isinstance(exc, errors.LMProviderError):
        status = status or 0
        if status >= 500:
            return "transport", "server_error"
        if status in (401, 403):
            return "run", "provider_error"
        return ("item", "provider_error") if 400 <= status < 500 else ("run", "provider_error")
    return "run", "provider_error"


def names_the_format(exc: BaseException) -> bool:
    """Whether the provider's error is about the response format (its message or ``param`` says so)."""
    param = str(getattr(exc, "param", "") or "").lower()
    if "response_format" in param or "schema" in param:
        return True
    text = str(exc).lower()
    return any(word in text for word in _FORMAT_WORDS)


def is_connect_failure(exc: BaseException) -> bool:
    """Connection refused / DNS failure / no route: the endpoint cannot be reached at all."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, (ConnectionRefusedError, socket.gaierror)):
            return True
        name = type(current).__name__
        if name in ("ConnectError", "ClientConnectorError", "APIConnectionError"):
            return True
        current = current.__cause__ or current.__context__
    text = str(exc).lower()
    return any(word in text for word in _CONNECT_WORDS)


def retry_after(exc: BaseException) -> float | None:
    """The server's Retry-After hint in seconds, if it sent one."""
    hint = getattr(exc, "retry_after", None)
    if isinstance(hint, (int, float)) and hint >= 0:
        return float(hint)
    return None


def short(exc: BaseException) -> str:
    """The error's message on one line, at most 300 characters, credentials redacted (servers echo them)."""
    return str(redact(" ".join(str(exc).split())))[:300]


_MISSING_KEY = re.compile(r"no API key found for provider '([^']+)'\. Set ([A-Z][A-Z0-9_]*)")


def missing_key(exc: BaseException) -> bool:
    """The provider's key is not configured at all (no request could be sent)."""
    return _MISSING_KEY.search(str(exc)) is not None


def run_reason(exc: BaseException) -> str:
    """Why a run-stopping error stopped the run, in the user's words: a missing API key names the environment
    variable to set (DSPy's own text tells a Python caller to pass ``api_key=`` to ``dspy.LM``), else ``short``."""
    found = _MISSING_KEY.search(str(exc))
    if found:
        return (f"no API key for provider {found.group(1)!r}: set {found.group(2)} in the environment or in a .env "
                "file in this folder")
    return short(exc)


def describe_endpoint(lm: Any) -> str:
    from scijudge.records import endpoint_of

    return endpoint_of(lm) or "the provider's default endpoint"
