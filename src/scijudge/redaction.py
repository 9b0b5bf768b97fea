"""Credentials never reach a store, an export, a report or the terminal: redact them from any text first.

What counts as a credential: URL userinfo (``http://user:KEY@host``), secret-looking query parameters
(``?token=…``, ``api_key``, ``key``, ``sig``, …), ``Authorization: …`` / ``Bearer …`` strings, provider-key
shapes (``sk-…``, ``hf_…``, …) and the literal values of the configured keys: every environment variable
named like ``*_API_KEY``, ``*_TOKEN``, ``*_SECRET``, ``*_PASSWORD`` and any key passed explicitly
(``register_secret``). Regular expressions rather than a library: no maintained package covers this
short, project-specific list, and the rules must stay cheap enough to run on every stored error.
"""

from __future__ import annotations

import os
import re
import threading
from typing import Any
from urllib.parse import quote, quote_plus

MASK = "***"
_SECRET_ENV = re.compile(r"(?:^|_)(?:API_?KEY|TOKEN|SECRET|PASSWORD|ACCESS_KEY|SECRET_KEY)$", re.IGNORECASE)
_MIN_SECRET = 6  # shorter values ("x", "none") would blank out ordinary words
_QUERY_KEYS = (
    r"api[_-]?key|apikey|key|token|access[_-]?token|refresh[_-]?token|id[_-]?token|auth|authorization"
    r"|sig|signature|secret|client[_-]?secret|password|passwd|pwd|x-amz-signature|x-amz-credential|code"
)
_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # scheme://user:password@host  ->  scheme://***@host
    (re.compile(r"(\b[a-z][a-z0-9+.\-]*://)[^/\s@?#\"'<>]+@", re.IGNORECASE), r"\1" + MASK + "@"),
    # ?token=...&api_key=...  (values end at &, #, whitespace or a quote)
    (re.compile(rf"([?&;](?:{_QUERY_KEYS})=)[^&#\s\"'<>]+", re.IGNORECASE), r"\1" + MASK),
    # Authorization: Bearer xyz / "authorization": "xyz" / api-key: xyz
    (re.compile(r"((?:authorization|x-api-key|api-key|proxy-authorization)[\"']?\s*[:=]\s*[\"']?)"
                r"(?:(?:bearer|basic|token)\s+)?[^\s\"',;}]+", re.IGNORECASE), r"\1" + MASK),
    (re.compile(r"\b(bearer|basic)\s+[A-Za-z0-9._~+/=\-]{6,}", re.IGNORECASE), r"\1 " + MASK),
    # provider key shapes
    (re.compile(r"\b(?:sk|pk|rk)-[A-Za-z0-9_\-]{8,}"), MASK),
    (re.compile(r"\b(?:hf|ghp|gho|ghs|github_pat|glpat|xox[abposr])[_\-][A-Za-z0-9_\-]{8,}"), MASK),
    (re.compile(r"\bAIza[0-9A-Za-z_\-]{20,}"), MASK),
)

_registered: set[str] = set()
_lock = threading.Lock()


def register_secret(value: str | None) -> None:
    """Treat this value (an explicitly passed API key) as a secret from now on, in this process."""
    if value and len(value) >= _MIN_SECRET:
        with _lock:
            _registered.add(value)


def register_url_secrets(url: str | None) -> None:
    """Remember the credentials inside an endpoint URL (userinfo, secret query values), so that they are
    redacted wherever they appear later, e.g. echoed alone in a server's error message."""
    if not url:
        return
    from urllib.parse import parse_qsl, unquote, urlsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return
    for value in (parts.username, parts.password):
        register_secret(unquote(value) if value else None)
    for key, value in parse_qsl(parts.query, keep_blank_values=False):
        if re.fullmatch(_QUERY_KEYS, key, re.IGNORECASE):
            register_secret(value)


def known_secrets() -> list[str]:
    """The literal secret values to hide: configured key variables and registered keys, longest first."""
    values = {v for k, v in os.environ.items() if _SECRET_ENV.search(k) and v and len(v) >= _MIN_SECRET}
    with _lock:
        values |= _registered
    return sorted(values, key=len, reverse=True)


def redact(text: Any) -> Any:
    """``text`` with every credential replaced by ``***`` (non-strings are returned unchanged)."""
    if not isinstance(text, str) or not text:
        return text
    for secret in known_secrets():
        for form in {secret, quote(secret, safe=""), quote_plus(secret)}:
            if form in text:
                text = text.replace(form, MASK)
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def redact_url(url: str | None) -> str | None:
    """An endpoint URL without userinfo, secret query parameters or key values (for storing or printing)."""
    return redact(url) if url else url


def redact_data(value: Any) -> Any:
    """A copy of JSON-like data (dicts, lists, strings) with every string redacted."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {key: redact_data(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_data(item) for item in value]
    return value


_SECRET_OPTION = re.compile(r"^--?(?:[a-z0-9]+[-_])*(?:key|token|secret|password|passwd|apikey)(?:[-_][a-z0-9]+)*$",
                            re.IGNORECASE)


def redact_argv(argv: list[str]) -> list[str]:
    """A command line safe to store: values of ``--*key*``/``--*token*`` options hidden, every other
    argument redacted (so ``--api-base http://u:KEY@h/?token=T`` keeps its host but loses KEY and T)."""
    safe: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            safe.append(MASK)
            hide_next = False
            continue
        name, eq, _ = arg.partition("=")
        if arg.startswith("-") and _SECRET_OPTION.match(name):
            if eq:
                safe.append(f"{name}={MASK}")
            else:
                safe.append(arg)
                hide_next = True
            continue
        safe.append(redact(arg))
    return safe
