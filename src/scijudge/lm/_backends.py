"""LM backends by model-string prefix: ``make_lm`` and the executors ask here instead of testing prefixes.

A backend is a factory ``factory(model, *, cache, max_tokens, api_base, api_key, timeout, engine, **options)``
returning a ``dspy.LM``, registered under the prefix of the model strings it serves (``hf:`` for the in-process
local engine). ``local=True`` marks backends that run the model in this process: they batch inside one process,
so the worker pool and the provider batch APIs refuse them and Ray serves them. Model strings no backend claims
go to DSPy/litellm (``openai/...``, ``anthropic/...``). Imports nothing heavy, so the CLI can ask cheaply.

Example::

    register_backend("toy:", lambda model, **_: scripted_lm(lambda request: '{"judgment": ...}'))
    lm = make_lm("toy:anything")
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

LMFactory = Callable[..., Any]


@dataclass(frozen=True)
class Backend:
    """One registered backend: the prefix it serves, how to build its LM, whether it runs in-process."""

    prefix: str
    factory: LMFactory
    local: bool = False


_BACKENDS: dict[str, Backend] = {}
_LOCK = threading.Lock()


def register_backend(prefix: str, factory: LMFactory, *, local: bool = False, replace: bool = False) -> Backend:
    """Serve model strings starting with ``prefix`` with ``factory``; refuses to shadow a prefix silently."""
    if not prefix or not isinstance(prefix, str):
        raise ValueError("a backend prefix is a non-empty string such as 'hf:'")
    if not callable(factory):
        raise TypeError(f"the factory for {prefix!r} is not callable")
    backend = Backend(prefix=prefix, factory=factory, local=local)
    with _LOCK:
        if prefix in _BACKENDS and not replace:
            raise ValueError(f"an LM backend is already registered for {prefix!r} (pass replace=True)")
        _BACKENDS[prefix] = backend
    return backend


def unregister_backend(prefix: str) -> None:
    """Forget a backend (tests that add a toy one remove it again)."""
    with _LOCK:
        _BACKENDS.pop(prefix, None)


def backend_for(model: str) -> Backend | None:
    """The backend whose prefix is the longest one ``model`` starts with; None for DSPy/litellm model strings."""
    if not isinstance(model, str):
        return None
    with _LOCK:
        matches = [b for p, b in _BACKENDS.items() if model.startswith(p)]
    return max(matches, key=lambda b: len(b.prefix)) if matches else None


def is_local_model(model: str) -> bool:
    """Whether ``model`` runs in this process (a local engine), not behind a provider API."""
    backend = backend_for(model)
    return backend is not None and backend.local


def local_prefixes() -> tuple[str, ...]:
    """Prefixes of the in-process backends, for messages that tell the user what a local model looks like."""
    with _LOCK:
        return tuple(p for p, b in _BACKENDS.items() if b.local)


def _hf_factory(model: str, *, cache: bool = True, max_tokens: int | None = None, **options: Any) -> Any:
    """``hf:<model or adapter>``: the in-process transformers (+PEFT) engine from the 'local' extra."""
    for ignored in ("api_base", "api_key", "timeout", "engine"):  # API settings mean nothing to a local model
        options.pop(ignored, None)
    from scijudge.errors import ModelError

    try:
        from scijudge.lm.local import local_lm
    except ImportError as exc:  # pragma: no cover - depends on the optional extra
        raise ModelError(f"local models need the 'local' extra: pip install 'scijudge[local]' ({exc})") from exc
    return local_lm(model, cache=cache, max_tokens=max_tokens, **options)


register_backend("hf:", _hf_factory, local=True)


def _decisions_factory(model: str, **options: Any) -> Any:
    """``decisions:<model>`` with ``api_base``: a decision endpoint (``scijudge.lm.decisions``)."""
    from scijudge.lm.decisions import decisions_lm

    return decisions_lm(model, **options)


register_backend("decisions:", _decisions_factory)
