"""The local extra (torch, transformers, peft): imported when a local model needs it, or one error naming the
install command. Its own module so that the model loaders (``_models``, ``smollm2``, ``tiny``) all import it from
below them."""

from __future__ import annotations

from typing import Any

from scijudge.errors import ModelError

_INSTALL = "pip install 'scijudge[local]'"


def require_torch() -> tuple[Any, Any]:
    """Import torch and transformers, or raise a ModelError naming the extra."""
    try:
        import torch
        import transformers
    except ImportError as exc:
        raise ModelError(f"local models need torch and transformers ({exc.name} is missing): {_INSTALL}") from exc
    return torch, transformers


def require_peft() -> Any:
    """Import peft, or raise a ModelError naming the extra."""
    try:
        import peft
    except ImportError as exc:
        raise ModelError(f"PEFT adapters need peft ({exc.name} is missing): {_INSTALL}") from exc
    return peft
