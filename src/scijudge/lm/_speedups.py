"""Memoise DSPy's model-metadata lookup, which dominates per-call CPU for models missing from its map.

DSPy 3.4 prices every response by looking the model up in its bundled metadata snapshot; for a model
the snapshot does not list (any self-hosted OpenAI-compatible model) that is a scan of every entry,
about 2 ms of CPU per call, twice per call. At high concurrency on two cores that alone caps
throughput well below the ideal. The snapshot is loaded once and never changes during a process,
so the lookup is a pure function of its arguments: we cache it and hand out deep copies exactly as
the original does. Installed once, idempotent; measured in benchmarks/bench_throughput.py.
"""

from __future__ import annotations

import copy
from functools import lru_cache
from typing import Any

_INSTALLED = False


def install() -> None:
    """Wrap ``model_info`` in the DSPy modules that imported it by name."""
    global _INSTALLED
    if _INSTALLED:
        return
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
    for module in (model_metadata, costs, capabilities):
        if getattr(module, "model_info", None) is original:
            module.model_info = model_info
    _INSTALLED = True
