"""Every DSPy internal scijudge relies on, in one place, each checked against the installed DSPy.

scijudge is tested with DSPy 3.4. The chain subclasses ``JSONAdapter`` and is called with DSPy's adapter
arguments, sends ``lm15.Request`` objects, maps DSPy's LM error classes, reads DSPy's price table, keeps
its own entries in DSPy's response cache and memoises ``model_metadata.model_info``; the local engine
validates requests with DSPy's engine check; Anthropic batches reuse the native client's payload builder
and parser; the optimization budget swaps an LM's class for a counting subclass. ``check()`` verifies each
of these still has the shape we use; ``tests/lm/testdspy_compat.py`` calls it so that a DSPy upgrade that
moves one fails loudly instead of silently doing something else. Only public DSPy API (``dspy.LM``,
``dspy.Predict``, ``dspy.lm15`` types) is used elsewhere.
"""

from __future__ import annotations

import copy
import inspect
import warnings
import weakref
from functools import lru_cache
from typing import Any

import os

TESTED_DSPY = ("3.4",)
_MODEL_INFO_PATCHED = False
_PREPARED = False

LOCAL_COST_MAP = "LITELLM_LOCAL_MODEL_COST_MAP"
"""litellm's switch: "true" reads its bundled price table instead of downloading one at import."""


def use_local_cost_map() -> None:
    """The one place scijudge sets litellm's cost-map switch: DSPy and litellm read their bundled model
    metadata and price table instead of fetching them (5 s timeout) on first use, so offline runs work; a
    user's own setting wins. Call it before anything imports DSPy or litellm (litellm reads it once)."""
    os.environ.setdefault(LOCAL_COST_MAP, "true")


def prepare_dspy() -> None:
    """Everything scijudge sets up around DSPy, once per process: the cost-map switch, the version warning
    and the memoised model-metadata lookup (``scijudge.lm._speedups``)."""
    global _PREPARED
    if _PREPARED:
        return
    use_local_cost_map()
    warn_if_untested()
    from scijudge.lm import _speedups

    _speedups.install()
    raise_connection_cap()
    memoise_proxy_lookup()
    memoise_route_lookup()
    _PREPARED = True


CONNECTION_CAP = 4096
"""Connections one LM's native engine may hold open at once. lm15's default (100) capped every run at 100
requests in flight whatever ``--concurrency`` said (issue 41); connections are opened lazily, so a higher cap
costs nothing until they are used."""


def raise_connection_cap(limit: int = CONNECTION_CAP) -> None:
    """Give the native engines DSPy builds (``dspy.clients.execution`` makes one ``RouterConfig`` per LM,
    model and event loop, with no way to pass ``max_connections``) a cap of ``limit`` connections."""
    from dspy.clients import execution

    original = execution.RouterConfig
    if getattr(original, "scijudge_cap", None) is not None:
        original = original.scijudge_original

    def config(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("transport") is None and kwargs.get("max_connections") is None:
            kwargs["max_connections"] = limit
        return original(*args, **kwargs)

    config.scijudge_cap = limit  # type: ignore[attr-defined]
    config.scijudge_original = original  # type: ignore[attr-defined]
    execution.RouterConfig = config


_PROXY_VARIABLES = ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "no_proxy",
                    "NO_PROXY", "REQUEST_METHOD")


def memoise_proxy_lookup() -> bool:
    """lm15's transports look the proxy up for every request with ``urllib.request.getproxies()``, which scans
    and lower-cases the whole environment (about 0.3-1 ms of CPU per request, measured in
    ``benchmarks/bench_async.py``'s profile). On Linux that lookup reads only the environment, and only these
    variables decide it (``getproxies_environment`` and ``proxy_bypass_environment``), so the route is cached
    per target and proxy variables: a changed variable is seen at the next request. Returns whether applied."""
    import sys

    if sys.platform in ("darwin", "win32"):  # there getproxies also reads the system's settings
        return False
    from dspy._vendor.lm15.transports import _async, _proxy, _sync

    original = _proxy.proxy_route_for
    if getattr(original, "scijudge_memo", False):
        return True
    cache: dict[tuple[Any, ...], Any] = {}

    def proxy_route_for(parsed: Any, *, proxy: str | None, trust_env: bool) -> Any:
        if proxy is not None or not trust_env:
            return original(parsed, proxy=proxy, trust_env=trust_env)
        key = (parsed.scheme, parsed.host, tuple(os.environ.get(name) for name in _PROXY_VARIABLES))
        if key not in cache:
            if len(cache) > 256:
                cache.clear()
            cache[key] = original(parsed, proxy=proxy, trust_env=trust_env)
        return cache[key]

    proxy_route_for.scijudge_memo = True  # type: ignore[attr-defined]
    for module in (_sync, _async):
        if getattr(module, "proxy_route_for", None) is not original:
            return False
    _sync.proxy_route_for = proxy_route_for
    _async.proxy_route_for = proxy_route_for
    return True


def memoise_route_lookup() -> bool:
    """DSPy prices each response after resolving the LM's route offline (``capabilities.resolve``: a new engine and
    router per call), which depends only on the model, model type and declared providers: kept per those."""
    from dspy.clients import capabilities

    original = capabilities.resolve
    if getattr(original, "scijudge_memo", False):
        return True
    cache: dict[tuple[Any, ...], Any] = {}

    def resolve(lm: Any) -> Any:
        try:
            key = (lm.model, lm.model_type, getattr(lm, "_providers", ()))
            route = cache.get(key)
        except (AttributeError, TypeError):  # unhashable declarations: resolved every time, as DSPy does
            return original(lm)
        if route is None:
            if len(cache) > 256:
                cache.clear()
            route = cache[key] = original(lm)
        return route

    resolve.scijudge_memo, resolve.__wrapped__ = True, original  # type: ignore[attr-defined]
    capabilities.resolve = resolve
    return True


def dspy_version() -> str:
    import dspy

    return str(getattr(dspy, "__version__", "unknown"))


def check() -> list[str]:
    """Problems with the DSPy internals scijudge uses (empty when all is as expected)."""
    problems: list[str] = []
    from dspy.adapters.json_adapter import JSONAdapter

    params = list(inspect.signature(JSONAdapter.__call__).parameters)
    if params[:6] != ["self", "lm", "lm_kwargs", "signature", "demos", "inputs"]:
        problems.append(f"JSONAdapter.__call__ parameters changed: {params}")
    for name in ("format", "format_system_message", "format_field_with_value"):
        if not callable(getattr(JSONAdapter, name, None)):
            problems.append(f"JSONAdapter.{name} is gone")
    from dspy.utils import exceptions

    for name in ("ContextWindowExceededError", "LMRateLimitError", "LMTimeoutError", "LMServerError",
                 "LMTransportError", "LMInvalidRequestError", "LMAuthError", "LMBillingError",
                 "LMConfigurationError", "LMUnsupportedModelError", "LMProviderError"):
        if not isinstance(getattr(exceptions, name, None), type):
            problems.append(f"dspy.utils.exceptions.{name} is gone")
    from dspy import lm15

    for name in ("Request", "Config", "Message", "Usage"):
        if getattr(lm15, name, None) is None:
            problems.append(f"dspy.lm15.{name} is gone")
    config_fields = set(getattr(lm15.Config, "__dataclass_fields__", {}))
    for name in ("temperature", "max_tokens", "response_format", "logprobs"):
        if name not in config_fields:
            problems.append(f"dspy.lm15.Config has no field {name!r}")
    from dspy._vendor.lm15 import serde

    if not callable(getattr(serde, "request_to_dict", None)):
        problems.append("dspy._vendor.lm15.serde.request_to_dict is gone")
    from dspy.clients import costs, model_metadata

    if not callable(getattr(costs, "estimate_cost", None)):
        problems.append("dspy.clients.costs.estimate_cost is gone")
    info = getattr(model_metadata, "model_info", None)
    if info is None or "namespaces" not in inspect.signature(info).parameters:
        problems.append("dspy.clients.model_metadata.model_info(provider, model, *, namespaces) changed")
    if not callable(getattr(model_metadata, "rate", None)):
        problems.append("dspy.clients.model_metadata.rate is gone")
    from dspy.clients.cache import Cache

    fresh = Cache(enable_disk_cache=False, enable_memory_cache=True, disk_cache_dir=None)
    if not all(hasattr(fresh, n) for n in ("get", "put", "cache_key", "memory_cache", "disk_cache", "_lock")):
        problems.append("dspy.clients.cache.Cache changed (cache_layers reads its layers)")
    problems.extend(_check_engines_and_batches())
    try:  # short_answer_request filters this warning by its logger and text; memoise_route_lookup wraps the
        # resolve that pricing imports at call time
        from dspy.clients import capabilities, execution

        if "response was truncated" not in inspect.getsource(execution):
            problems.append("dspy.clients.execution no longer logs 'LM response was truncated'")
        price = getattr(execution, "_price_result", None)
        if price is None or "from dspy.clients.capabilities import resolve" not in inspect.getsource(price) or \
                list(inspect.signature(capabilities.resolve).parameters) != ["lm"]:
            problems.append("dspy.clients.capabilities.resolve(lm) is no longer what pricing resolves routes with")
    except (ImportError, OSError, AttributeError, TypeError) as exc:
        problems.append(f"dspy.clients.execution or capabilities cannot be read: {exc}")
    problems.extend(_check_class_swap())
    changed = sorted(name for name, digest in _mirrored_sources().items() if _MIRRORED.get(name) != digest)
    if changed:  # acall_request mirrors them
        problems.append(f"DSPy changed {', '.join(changed)}: acall_request falls back to lm.acall (update _MIRRORED)")
    try:  # StructuredChain.format_user_message_content repeats ChatAdapter's, minus a TypeAdapter per text value
        from dspy.adapters.chat_adapter import ChatAdapter

        source = inspect.getsource(ChatAdapter.format_user_message_content)
        if "format_field_value(field_info=v, value=value)" not in source or \
                "user_message_output_requirements" not in source:
            problems.append("dspy ChatAdapter.format_user_message_content changed (the chain repeats it)")
    except (ImportError, OSError) as exc:
        problems.append(f"dspy.adapters.chat_adapter cannot be read: {exc}")
    try:  # raise_connection_cap wraps the RouterConfig that execution builds engines with
        from dspy.clients import execution
        from dspy.lm15 import RouterConfig

        if "max_connections" not in getattr(RouterConfig, "__dataclass_fields__", {}):
            problems.append("dspy.lm15.RouterConfig has no max_connections")
        if "RouterConfig(" not in inspect.getsource(execution):
            problems.append("dspy.clients.execution no longer builds engines with RouterConfig(...)")
    except (ImportError, OSError) as exc:
        problems.append(f"dspy.clients.execution cannot be read: {exc}")
    return problems


def _check_engines_and_batches() -> list[str]:
    problems: list[str] = []
    from dspy.clients.engines import base as engine_base

    if not callable(getattr(engine_base, "validate_request", None)):
        problems.append("dspy.clients.engines.base.validate_request is gone")
    from dspy import lm15

    anthropic = getattr(lm15, "AnthropicLM", None)
    if anthropic is None:
        problems.append("dspy.lm15.AnthropicLM is gone")
    else:
        payload = getattr(anthropic, "_payload", None)
        if payload is None or list(inspect.signature(payload).parameters)[:3] != ["self", "request", "stream"]:
            problems.append("dspy.lm15.AnthropicLM._payload(request, stream) changed")
        parse = getattr(anthropic, "parse_response", None)
        if parse is None or len(inspect.signature(parse).parameters) < 3:
            problems.append("dspy.lm15.AnthropicLM.parse_response(request, http_response) changed")
    from dspy._vendor.lm15.providers import base as provider_base

    for name in ("batch_entry_http", "batch_entry_request"):
        if not callable(getattr(provider_base, name, None)):
            problems.append(f"dspy._vendor.lm15.providers.base.{name} is gone")
    return problems


def _check_class_swap() -> list[str]:
    """``rebind_class`` needs a ``dspy.LM`` whose class can be reassigned and whose calls record history."""
    import dspy

    problems: list[str] = []
    if "__slots__" in vars(dspy.LM) or not hasattr(dspy.LM("openai/compat-check"), "__dict__"):
        problems.append("dspy.LM instances no longer have a __dict__ (the budget's class swap cannot apply)")
    for name in ("__call__", "acall", "update_history", "copy"):
        if not callable(getattr(dspy.LM, name, None)):
            problems.append(f"dspy.LM.{name} is gone")
    return problems


def warn_if_untested() -> None:
    """One warning when the installed DSPy is outside the tested range."""
    version = dspy_version()
    if not version.startswith(TESTED_DSPY):
        warnings.warn(f"scijudge is tested with DSPy {', '.join(TESTED_DSPY)}.x; found {version}", stacklevel=2)


# --- what the chain uses ---------------------------------------------------------------------------
def json_adapter() -> type:
    from dspy.adapters.json_adapter import JSONAdapter

    return JSONAdapter


def format_field_value(field_info: Any, value: Any) -> str:
    """DSPy's text for one input value (``dspy.adapters.utils.format_field_value``)."""
    from dspy.adapters.utils import format_field_value as dspy_format

    return str(dspy_format(field_info=field_info, value=value))


def lm_errors() -> Any:
    """DSPy's LM error classes (``dspy.utils.exceptions``)."""
    from dspy.utils import exceptions

    return exceptions


def request_as_dict(request: Any) -> dict[str, Any]:
    """A plain-data form of an ``lm15.Request`` (what DSPy hashes for its own cache)."""
    from dspy._vendor.lm15.serde import request_to_dict

    return request_to_dict(request)


_cache_opening: list[Any] = []


def open_cache_soon() -> None:
    """Open DSPy's response cache in a background thread, once per process. DSPy builds it at its first use, and
    its disk layer opens (or creates) one SQLite file per shard: about half a second in a new folder on a busy
    machine, which otherwise stalls every task of an event loop at the first answer looked up (a quarter of a
    1,000-judgment run's judging time in ``benchmarks/bench_cli.py``). Loading and planning the run overlap it."""
    if _cache_opening:
        return
    import threading

    def open_it() -> None:
        import dspy

        try:
            dspy.cache  # noqa: B018 - the attribute builds the cache (under DSPy's own lock)
        except Exception:  # the first use will say what is wrong
            pass

    _cache_opening.append(threading.Thread(target=open_it, name="scijudge-open-cache", daemon=True))
    _cache_opening[0].start()


def cache_opened(timeout: float = 30.0) -> None:
    """Wait for ``open_cache_soon``'s thread, if one was started: a run opens the cache while it sets up (it
    counts in the command's wall time, not in the judging time) rather than at its first answer."""
    if _cache_opening:
        _cache_opening[0].join(timeout)


def cache_layers() -> tuple[Any, Any, Any] | None:
    """(memory layer, disk layer, lock) of DSPy's own ``Cache`` (a layer that is off: None) for a caller that hashes
    a key once, as ``Cache.cache_key`` does, and reads the layers itself; None for a cache of another class."""
    import dspy
    from dspy.clients.cache import Cache

    cache = dspy.cache
    if type(cache) is not Cache:
        return None
    return (cache.memory_cache if cache.enable_memory_cache else None,
            cache.disk_cache if cache.enable_disk_cache else None, cache._lock)


def estimate_cost(response: Any, provider: str | None, model: str) -> Any:
    from dspy.clients.costs import estimate_cost as estimate

    return estimate(response, provider=provider, requested_model=model)


def lm_error_class() -> type:
    """The base class of every DSPy LM error (``dspy.utils.exceptions.LMError``)."""
    return lm_errors().LMError


def model_rates(provider: str, name: str, keys: tuple[str, str]) -> tuple[float | None, float | None]:
    """Two per-token prices (e.g. input/output) of a model from DSPy's metadata map; None where it has none."""
    use_local_cost_map()
    from dspy.clients.model_metadata import model_info, rate

    info = model_info(provider, name)
    return rate(info, keys[0]), rate(info, keys[1])


# --- what the asyncio executor's requests use (issue 41) ---------------------------------------------
# ``lm.acall`` hops to threads three times a request (``prepare``, which may read media files; the engine's client
# look-up; pricing) and routes and plans the whole request each call. ``acall_request`` runs the same steps on the
# loop, the engine kept per request shape, mirroring these functions as the tested DSPy has them (else: ``lm.acall``).
_MIRRORED = {
    "dspy.clients.base_lm:BaseLM.acall": "62d038fbc5149f15",
    "dspy.clients.execution:aexecute": "8e7c28f2cb294990",
    "dspy.clients.execution:_select_engine": "f055e39fc3d20180",
    "dspy.clients.engines.lm15_engine:AsyncLM15Engine.complete": "d7f62d00e4876cf8",
    "dspy.clients.engines.lm15_engine:_Routing._target": "2e834e2103ca4d66",
}
_MIRROR_HOLDS: bool | None = None
_ENGINE_MEMO: Any = weakref.WeakKeyDictionary()  # LM -> {request shape: (config, engine, provider)}


def _mirrored_sources() -> dict[str, str]:
    """The installed DSPy's source fingerprint of each function ``acall_request`` mirrors."""
    import functools
    import hashlib
    import importlib

    found: dict[str, str] = {}
    for name in _MIRRORED:
        module, _, path = name.partition(":")
        try:
            obj = functools.reduce(getattr, path.split("."), importlib.import_module(module))
            found[name] = hashlib.sha256(inspect.getsource(obj).encode()).hexdigest()[:16]
        except (ImportError, AttributeError, OSError, TypeError):
            found[name] = "gone"
    return found


def inline_acall_holds() -> bool:
    """Whether the installed DSPy runs ``lm.acall`` as ``acall_request`` mirrors it (checked once)."""
    global _MIRROR_HOLDS
    if _MIRROR_HOLDS is None:
        _MIRROR_HOLDS = _mirrored_sources() == _MIRRORED
    return _MIRROR_HOLDS


async def acall_request(lm: Any, request: Any) -> Any:
    """``lm.acall(request, cache=False)``: the same Response, history entry, usage, price and errors, with no thread
    hop and the engine remembered per request shape (see above); other LMs, or callbacks: ``lm.acall`` itself."""
    import dspy
    from dspy.clients import execution
    from dspy.clients.base_lm import BaseLM

    if not (inline_acall_holds() and type(lm).acall is BaseLM.acall and hasattr(lm, "_engine_spec")
            and not dspy.settings.get("callbacks", []) and not getattr(lm, "callbacks", None)):
        return await lm.acall(request, cache=False)
    call = execution.prepare(lm, request, None, {"cache": False}, asynchronous=True)
    if not call.managed or call.cache or call.request is None or call.n != 1:
        return await lm.acall(request, cache=False)
    return execution.finalize(lm, call, await _aexecute(lm, call))


async def _aexecute(lm: Any, call: Any) -> Any:
    """``execution.aexecute`` for one uncached canonical request, pricing on the loop."""
    import asyncio

    from dspy.clients import execution

    backend, request, provider = _engine_for(lm, call)
    results: list[Any] = []
    try:
        for attempt in range(lm.num_retries + 1):
            state = execution._Attempt()
            try:
                with execution.error_boundary(lm.model, provider=provider, unexpected=True):
                    await execution._aattempt(lm, call, backend, request, provider, state, results)
                break
            except Exception as exc:
                if not execution._retryable(state, exc, attempt, lm.num_retries):
                    raise
                await asyncio.sleep(execution._delay(exc, attempt))
        execution._price_result(lm, state.result, state.response, provider, request)
        return results[0] if len(results) == 1 else execution.combine(results, model_type=lm.model_type)
    except BaseException as exc:
        execution._hint_responses_api(lm, exc)
        execution._account_failed_call(lm, results, exc)
        raise


def _request_shape(lm: Any, request: Any) -> tuple[Any, ...] | None:
    """What DSPy's engine choice for ``request`` depends on, less its texts (None: not plain text, routed afresh)."""
    import asyncio

    system, parts = request.system, [part.type for message in request.messages for part in message.parts]
    if request.tools or not (system is None or isinstance(system, str)) or any(kind != "text" for kind in parts):
        return None
    try:
        options = tuple(sorted((k, v if isinstance(v, (str, int, float, bool, type(None))) else id(v))
                               for k, v in lm.kwargs.items()))
    except TypeError:
        return None
    return (asyncio.get_running_loop(), lm.model, lm.model_type, id(lm._engine_spec), id(getattr(lm, "_providers", None)),
            options, request.model, system is None, tuple((m.role, len(m.parts)) for m in request.messages),
            id(request.config))


def _engine_for(lm: Any, call: Any) -> tuple[Any, Any, Any]:
    """``execution._engine(lm, call, True)``, remembered per request shape while its native engine is still the
    LM's (a request whose features the native route refused is routed afresh, as DSPy does)."""
    from dspy.clients import execution

    request = call.request
    shape = _request_shape(lm, request)
    try:
        memo = _ENGINE_MEMO.setdefault(lm, {}) if shape is not None else None
    except TypeError:  # an LM that cannot be weakly referenced
        memo = None
    if memo is not None:
        hit = memo.get(shape)
        if hit is not None and hit[0] is request.config and _owns(lm, hit[1]):
            return _InlineTarget(hit[1]), request, hit[2]
    backend, canonical, provider = execution._engine(lm, call, True)
    if memo is not None and canonical is request and _owns(lm, backend):
        if len(memo) > 64:
            memo.clear()
        memo[shape] = (request.config, backend, provider)  # the config is kept alive: its id stays its own
        return _InlineTarget(backend), canonical, provider
    return backend, canonical, provider


class _InlineTarget:
    """An LM's native async engine whose ``complete`` looks its provider client up on the loop once it exists
    (``AsyncLM15Engine.complete`` hops to a thread for it every time, for the first construction, which may load
    credentials); the first call, streams and all else are the engine's own."""

    def __init__(self, engine: Any) -> None:
        self._engine = engine

    async def complete(self, request: Any) -> Any:
        from dspy.clients.engines.lm15_engine import AsyncLM15Engine

        engine = self._engine
        if type(engine) is not AsyncLM15Engine or not engine._providers:
            return await engine.complete(request)
        provider, routed = engine._target(request)
        return await provider.complete(routed)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)


def _owns(lm: Any, backend: Any) -> bool:  # one of the LM's pooled native engines (closed pools leave the store)
    return any(engine is backend for engine in list(getattr(lm, "_engine_store", {}).values()))


# --- what the local engine uses ----------------------------------------------------------------------
def validate_engine_request(request: Any) -> None:
    """DSPy's own check that a request may reach an engine (type, no execution controls in extensions)."""
    from dspy.clients.engines.base import validate_request

    validate_request(request)


# --- what Anthropic message batches use --------------------------------------------------------------
def anthropic_payload(client: Any, request: Any) -> dict[str, Any]:
    """The Messages-API params DSPy's native Anthropic client sends for ``request`` (without ``stream``)."""
    params = client._payload(request, stream=False)
    params.pop("stream", None)
    return params


def anthropic_batch_answer(client: Any, message: dict[str, Any]) -> Any:
    """An lm15 Response read from one succeeded batch entry by the same client's parser as direct calls."""
    from dspy._vendor.lm15.providers.base import batch_entry_http, batch_entry_request

    return client.parse_response(batch_entry_request(message.get("model")), batch_entry_http(message))


# --- what the optimization budget uses ---------------------------------------------------------------
def rebind_class(obj: Any, cls: type) -> None:
    """Give a DSPy LM ``obj`` the class ``cls`` (a subclass of its own class that adds hooks).

    Relies on ``dspy.LM`` being a plain Python object (no ``__slots__``) whose ``__call__``/``acall`` go
    through ``update_history``; ``check()`` verifies both, so a DSPy release that changes it fails loudly.
    """
    if not issubclass(cls, type(obj)):
        raise TypeError(f"{cls.__name__} does not extend {type(obj).__name__}")
    obj.__class__ = cls


# --- the model_info memoisation (see lm/_speedups.py) ------------------------------------------------
def patch_model_info() -> bool:
    """Wrap ``model_metadata.model_info`` in every DSPy module that imported it by name; True when applied."""
    global _MODEL_INFO_PATCHED
    if _MODEL_INFO_PATCHED:
        return True
    from dspy.clients import capabilities, costs, model_metadata

    original = model_metadata.model_info

    @lru_cache(maxsize=512)
    def _cached(provider: Any, model: Any, namespaces: tuple[str, ...] | None) -> Any:
        return original(provider, model, namespaces=namespaces)

    def model_info(provider: Any, model: Any, *, namespaces: Any = None) -> Any:
        try:
            key_ns = tuple(namespaces) if namespaces is not None else None
            hash((provider, model, key_ns))
        except TypeError:
            return original(provider, model, namespaces=namespaces)
        return copy.deepcopy(_cached(provider, model, key_ns))

    model_info.__wrapped__ = original  # type: ignore[attr-defined]
    patched = []
    for module in (model_metadata, costs, capabilities):
        if getattr(module, "model_info", None) is original:
            module.model_info = model_info
            patched.append(module.__name__)
    # costs is the module that prices every response: without it the patch buys nothing.
    _MODEL_INFO_PATCHED = "dspy.clients.costs" in patched
    return _MODEL_INFO_PATCHED


def model_info_patched() -> bool:
    """Whether DSPy's price lookup now goes through the memoised wrapper."""
    from dspy.clients import costs

    return getattr(getattr(costs, "model_info", None), "__wrapped__", None) is not None


# --- decision requests (issue 25) ----------------------------------------------------------------------
_SHORT_ANSWER = __import__("contextvars").ContextVar("scijudge_short_answer", default=False)
_TRUNCATION_FILTER_ADDED = False


class _DropTruncationWarning:
    """Drops DSPy's "LM response was truncated" warning for requests that ask for a few tokens on purpose."""

    def filter(self, record: Any) -> bool:
        return not (_SHORT_ANSWER.get() and "response was truncated" in record.getMessage())


def short_answer_request() -> Any:
    """Within this block DSPy's truncation warning (``dspy.clients.execution``, logger ``dspy.clients.lm``) is
    not logged: a decision request stops after a few tokens by design (``finish_reason="length"``)."""
    import logging
    from contextlib import contextmanager

    global _TRUNCATION_FILTER_ADDED
    if not _TRUNCATION_FILTER_ADDED:
        logging.getLogger("dspy.clients.lm").addFilter(_DropTruncationWarning())
        _TRUNCATION_FILTER_ADDED = True

    @contextmanager
    def block() -> Any:
        token = _SHORT_ANSWER.set(True)
        try:
            yield
        finally:
            _SHORT_ANSWER.reset(token)

    return block()
