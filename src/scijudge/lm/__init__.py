"""Model strings to DSPy LMs: any litellm/DSPy model string, or ``hf:`` for the in-process local engine.

API keys come from the environment or a ``.env`` file (loaded once, never overriding variables already
set) and are never written anywhere by scijudge: the run store records only the model string.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scijudge.errors import ModelError
from scijudge.lm._backends import backend_for, is_local_model, local_prefixes, register_backend

if TYPE_CHECKING:  # pragma: no cover
    import dspy

__all__ = ["fold_system", "is_local_model", "parse_model_string", "load_dotenv_once", "make_lm", "register_backend"]

_DOTENV_LOADED = False


def load_dotenv_once(path: str | Path | None = None) -> None:
    """Load ``.env`` from the working directory (or ``path``) without overriding the environment."""
    global _DOTENV_LOADED
    if _DOTENV_LOADED and path is None:
        return
    from dotenv import load_dotenv

    load_dotenv(dotenv_path=path or Path.cwd() / ".env", override=False)
    _DOTENV_LOADED = True


def make_lm(model: str, *, api_base: str | None = None, api_key: str | None = None, cache: bool = True,
            timeout: float | None = 60.0, engine: str = "auto", max_tokens: int | None = None,
            **local_options: Any) -> dspy.LM:
    """Build a ``dspy.LM`` for a model string.

    Args:
        model: ``openai/gpt-4o-mini``, ``anthropic/…``, ``gemini/…``, ``openrouter/…``, a model served by an
            OpenAI-compatible server (with ``api_base``), or ``hf:<model or adapter>`` for the local engine.
        api_base: URL of an OpenAI-compatible server (``http://host:port/v1``).
        api_key: explicit key; by default the provider's environment variable (or ``.env``) is used.
        cache: reuse DSPy's response cache (a re-run of the same prompts costs nothing).
        timeout: deadline in seconds for a whole request (connect to last byte); the chain retries a timed-out
            request once, and a run stops after a streak of them.
        engine: DSPy's engine selection for API models: ``auto`` (native lm15 where possible) or ``litellm``.

    Model strings with a registered prefix (``hf:``, see ``register_backend``) go to that backend's factory
    with every argument above and the extra keyword options; all others go to DSPy/litellm.
    """
    from scijudge.lm import dspy_compat

    dspy_compat.prepare_dspy()  # once per process, before DSPy first reads its price map
    import dspy

    if not model or not isinstance(model, str):
        raise ModelError("a model string is required, e.g. openai/gpt-4o-mini or hf:/path/to/adapter")
    recipe = {"model": model, "api_base": api_base, "cache": cache, "timeout": timeout, "engine": engine,
              "max_tokens": max_tokens, **local_options}
    backend = backend_for(model)
    if backend is not None:
        return _noted(backend.factory(model, cache=cache, max_tokens=max_tokens, api_base=api_base, api_key=api_key,
                                      timeout=timeout, engine=engine, **local_options), recipe)
    if local_options:
        raise ModelError(f"options {sorted(local_options)} apply only to local models "
                         f"({', '.join(local_prefixes())} model strings)")
    load_dotenv_once()
    from scijudge.redaction import register_secret, register_url_secrets

    register_secret(api_key)  # issue 11: redacted from everything written or printed
    register_url_secrets(api_base)
    kwargs: dict[str, Any] = {}
    if api_base:
        api_base, url_key = _split_credentials(api_base)  # a key in the URL goes to the client, not the URL
        api_key = api_key or url_key
        kwargs["api_base"] = api_base
        if "/" not in model:
            model = f"openai/{model}"
        # OpenAI-compatible servers often need no key; the client still wants one.
        kwargs["api_key"] = api_key or os.environ.get("OPENAI_API_KEY") or "sk-no-key"
    elif api_key:
        kwargs["api_key"] = api_key
    if timeout is not None:
        kwargs["timeout"] = timeout
    if "/" not in model:
        raise ModelError(f"model {model!r} needs a provider prefix, e.g. openai/{model}, or pass --api-base")
    if cache:
        from scijudge.lm.dspy_compat import open_cache_soon

        open_cache_soon()
    try:
        lm = dspy.LM(model, cache=cache, num_retries=0, engine=engine, max_tokens=max_tokens, **kwargs)
    except (ValueError, TypeError) as exc:
        raise ModelError(f"cannot build model {model!r}: {exc}") from exc
    return _noted(lm, recipe)


_URL_KEY_PARAMETERS = frozenset({"api_key", "api-key", "apikey", "key", "token", "access_token"})


def _split_credentials(url: str) -> tuple[str, str | None]:
    """``http://user:KEY@host/v1?api_key=KEY`` -> (``http://host/v1``, ``KEY``): clients send the key as a
    header, and a URL with userinfo or a query cannot have paths appended (``/chat/completions``)."""
    from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return url, None
    key = unquote(parts.password or parts.username or "") or None if "@" in parts.netloc else None
    kept = []
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name.lower() in _URL_KEY_PARAMETERS:
            key = key or value or None
        else:
            kept.append((name, value))
    if key is None and not parts.query:
        return url, None
    host = (parts.hostname or "") + (f":{port}" if port is not None else "")
    if parts.hostname and ":" in parts.hostname:  # IPv6
        host = f"[{parts.hostname}]" + (f":{port}" if port is not None else "")
    return urlunsplit((parts.scheme, host, parts.path, urlencode(kept), parts.fragment)), key


def _noted(lm: Any, recipe: dict[str, Any]) -> Any:
    """Note how an LM was built (never its key: an explicit one stays in this process), so that a worker
    process can build the same one (``scijudge.judges.recipe``)."""
    try:
        lm.scijudge_recipe = {k: v for k, v in recipe.items() if v is not None}
    except AttributeError:
        pass
    return lm


def __getattr__(name: str) -> Any:
    """``parse_model_string`` (an ``hf:`` model string's base and adapter) and ``fold_system`` (a chat without a
    system role), imported when first used so that ``import scijudge.lm`` stays light."""
    if name == "parse_model_string":
        from scijudge.lm._models import parse_model_string

        return parse_model_string
    if name == "fold_system":
        from scijudge.lm._runtime import fold_system

        return fold_system
    raise AttributeError(f"module 'scijudge.lm' has no attribute {name!r}")
