"""Per-token batch prices: the cost map's batch price where it has one, else half the list price, labelled.

Read from DSPy's model metadata (the same price table the chain's direct-call pricing uses); importing
litellm for its copy of the map would cost seconds per process.
"""

from __future__ import annotations

from functools import lru_cache

BATCH_PRICE = "batch price (cost map)"
HALF_LIST_PRICE = "50% of list price (assumed batch discount)"
UNPRICED = "unpriced"


@lru_cache(maxsize=128)
def batch_rates(model: str) -> tuple[tuple[float, float] | None, str]:
    """((input, output) USD per token, how the price was found) for a model string such as ``openai/gpt-4o-mini``."""
    from dspy.clients.model_metadata import model_info, rate

    provider, _, name = model.partition("/") if "/" in model else ("openai", "", model)
    try:
        info = model_info(provider, name)
    except Exception:  # noqa: BLE001 - pricing is advisory and must never fail a judgment
        info = {}
    batch_in, batch_out = rate(info, "input_cost_per_token_batches"), rate(info, "output_cost_per_token_batches")
    if batch_in is not None and batch_out is not None:
        return (batch_in, batch_out), BATCH_PRICE
    list_in, list_out = rate(info, "input_cost_per_token"), rate(info, "output_cost_per_token")
    if list_in is not None and list_out is not None:
        return (list_in / 2, list_out / 2), HALF_LIST_PRICE
    return None, UNPRICED
