"""A causal LM's KV cache as this transformers version spells it: the engine's decoding and the distiller's shared
prefix both build caches and pass them to ``forward`` through here."""

from __future__ import annotations

import inspect
import weakref
from typing import Any

_NAMES: weakref.WeakKeyDictionary[Any, tuple[str, str | None]] = weakref.WeakKeyDictionary()


def forward_names(model: Any) -> tuple[str, str | None]:
    """(the KV cache's keyword, ``cache`` or ``past_key_values``; the last-logits keyword, ``logits_to_keep`` or
    ``num_logits_to_keep``, or None) of ``model``'s forward (a PEFT model's base's): read once per model, since the
    signature costs milliseconds."""
    names = _NAMES.get(model)
    if names is None:
        inner = model.get_base_model() if hasattr(model, "get_base_model") else model
        params = inspect.signature(inner.forward).parameters
        keep = next((k for k in ("logits_to_keep", "num_logits_to_keep") if k in params), None)
        names = _NAMES[model] = ("cache" if "cache" in params else "past_key_values", keep)
    return names


def new_cache(model: Any) -> Any:
    """An empty dynamic KV cache for ``model``."""
    from transformers import DynamicCache

    try:
        return DynamicCache(config=model.config)
    except TypeError:  # older transformers
        return DynamicCache()
