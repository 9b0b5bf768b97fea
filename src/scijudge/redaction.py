"""Credentials never reach a store, an export, a report or the terminal: redact them from any text first.

What counts as a credential: URL userinfo (``http://user:KEY@host``), secret-looking query parameters
(``?token=…``, ``api_key``, ``key``, ``sig``, …), ``Authorization: …`` / ``Bearer …`` strings, provider-key
shapes (``sk-…``, ``hf_…``, …) and the literal values of the configured keys: every environment variable
named like ``*_API_KEY``, ``*_TOKEN``, ``*_SECRET``, ``*_PASSWORD`` and any key passed explicitly
(``register_secret``). Regular expressions rather than a library: no maintained package covers this
short, project-specific list, and the rules must stay cheap enough to run on every stored error.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Callable
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
                r"(?:(?:bearer|basic|token)\s+)?[^\s\"',;})\]]+", re.IGNORECASE), r"\1" + MASK),  # ends at ) or ]
    (re.compile(r"\b(bearer|basic)\s+[A-Za-z0-9._~+/=\-]{6,}", re.IGNORECASE), r"\1 " + MASK),
    # provider key shapes
    (re.compile(r"\b(?:sk|pk|rk)-[A-Za-z0-9_\-]{8,}"), MASK),
    (re.compile(r"\b(?:hf|ghp|gho|ghs|github_pat|glpat|xox[abposr])[_\-][A-Za-z0-9_\-]{8,}"), MASK),
    (re.compile(r"\bAIza[0-9A-Za-z_\-]{20,}"), MASK),
)


def _may_match(text: str) -> bool:
    """Whether some pattern could match: every match contains one of these substrings (in lower case), and a
    text with none of them (most ids, rationales and paths) is passed over at the cost of a few ``in`` tests,
    far less than running the expressions (spelled out: a loop over a tuple costs twice as much). A substring
    is looked for only where a character of it occurs: one character is found some 50 times faster than three,
    so texts without ``-``, ``z`` or ``x`` (most stored JSON and rationales) skip half the searches."""
    low = text.lower()
    return (("@" in low and "://" in low) or "=" in low
            or ("-" in low and ("api-key" in low or "sk-" in low or "pk-" in low or "rk-" in low or "hf-" in low))
            or ("_" in low and ("hf_" in low or "github_pat" in low))
            or ("z" in low and ("authorization" in low or "aiza" in low)) or ("x" in low and "xox" in low)
            or "bearer" in low or "basic" in low or "ghp" in low or "gho" in low or "ghs" in low or "glpat" in low)


_registered: set[str] = set()
_lock = threading.Lock()
_generation = 0  # bumped by register_secret: part of the fingerprint of the cached secrets
_cached: tuple[Any, list[str], tuple[str, ...]] | None = None  # (fingerprint, secrets, their literal forms)


def register_secret(value: str | None) -> None:
    """Treat this value (an explicitly passed API key) as a secret from now on, in this process."""
    global _generation
    if value and len(value) >= _MIN_SECRET:
        with _lock:
            if value not in _registered:
                _registered.add(value)
                _generation += 1


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


def _fingerprint() -> Any:
    """A cheap identity of the environment and the registered keys. Walking and decoding every variable and
    matching its name is far too slow to repeat for every string redacted, so the secrets are recomputed only
    when this changes (comparing it costs about a microsecond)."""
    data = getattr(os.environ, "_data", None)  # CPython's raw mapping: reading it decodes nothing
    items = data.items() if isinstance(data, dict) else os.environ.items()
    return _generation, tuple(items)


def _secrets_and_forms() -> tuple[list[str], tuple[str, ...]]:
    global _cached
    fingerprint = _fingerprint()
    cached = _cached
    if cached is not None and cached[0] == fingerprint:
        return cached[1], cached[2]
    values = {v for k, v in os.environ.items() if _SECRET_ENV.search(k) and v and len(v) >= _MIN_SECRET}
    with _lock:
        values |= _registered
    secrets = sorted(values, key=len, reverse=True)
    forms: list[str] = []
    for secret in secrets:  # each as written, percent-encoded and form-encoded; longest secrets first
        forms.extend(dict.fromkeys((secret, quote(secret, safe=""), quote_plus(secret))))
    _cached = (fingerprint, secrets, tuple(forms))
    return secrets, _cached[2]


def known_secrets() -> list[str]:
    """The literal secret values to hide: configured key variables and registered keys, longest first."""
    return list(_secrets_and_forms()[0])


def _redact_with(text: str, forms: tuple[str, ...]) -> str:
    for form in forms:
        if form in text:
            text = text.replace(form, MASK)
    if not _may_match(text):
        return text
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def redact(text: Any) -> Any:
    """``text`` with every credential replaced by ``***`` (non-strings are returned unchanged)."""
    if not isinstance(text, str) or not text:
        return text
    return _redact_with(text, _secrets_and_forms()[1])


class Redactor:
    """``redact`` with the secrets known when it was made: for redacting many strings at once (an export)."""

    def __init__(self) -> None:
        self.forms = _secrets_and_forms()[1]
        # each literal form as it appears inside JSON text (quotes, backslashes and non-ASCII escaped)
        self._in_json = tuple(dict.fromkeys((*self.forms, *(json.dumps(f)[1:-1] for f in self.forms))))

    def __call__(self, text: Any) -> Any:
        if not isinstance(text, str) or not text:
            return text
        return _redact_with(text, self.forms)

    def may_change_json(self, text: str) -> bool:
        """Whether redacting the strings of this JSON text could change any of them (False: copy it as it is)."""
        return _may_match(text) or any(form in text for form in self._in_json)


def redactor() -> Redactor:
    """A ``Redactor`` with the secrets known now."""
    return Redactor()


def redact_url(url: str | None) -> str | None:
    """An endpoint URL without userinfo, secret query parameters or key values (for storing or printing)."""
    return redact(url) if url else url


def redact_data(value: Any, redact_one: Callable[[Any], Any] | None = None) -> Any:
    """A copy of JSON-like data (dicts, lists, strings) with every string redacted (by ``redact_one``)."""
    one = redact_one or redactor()
    if isinstance(value, str):
        return one(value)
    if isinstance(value, dict):
        return {key: redact_data(item, one) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_data(item, one) for item in value]
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
