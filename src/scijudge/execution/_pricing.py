"""Per-token batch prices: the cost map's batch price where it has one, else half the list price, labelled."""

from __future__ import annotations

import os
from functools import lru_cache

BATCH_PRICE = "batch price (cost map)"
HALF_LIST_PRICE = "50% of list price (assumed batch discount)"
UNPRICED = "unpriced"


@lru_cache(maxsize=128)
def batch_rates(model: str) -> tuple[tuple[float, float] | None, str]:
    """((input, output) USD per token, how the price was found) for a model string such as ``openai/gpt-4o-mini``."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "true")
    import litellm

    entry = litellm.model_cost.get(model) or litellm.model_cost.get(model.split("/", 1)[-1]) or {}
    batch_in, batch_out = entry.get("input_cost_per_token_batches"), entry.get("output_cost_per_token_batches")
    if batch_in is not None and batch_out is not None:
        return (float(batch_in), float(batch_out)), BATCH_PRICE
    list_in, list_out = entry.get("input_cost_per_token"), entry.get("output_cost_per_token")
    if list_in is not None and list_out is not None:
        return (float(list_in) / 2, float(list_out) / 2), HALF_LIST_PRICE
    return None, UNPRICED
