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
    from scijudge.lm.dspy_compat import model_rates

    provider, _, name = model.partition("/") if "/" in model else ("openai", "", model)
    try:
        batch_in, batch_out = model_rates(provider, name, ("input_cost_per_token_batches",
                                                           "output_cost_per_token_batches"))
        list_in, list_out = model_rates(provider, name, ("input_cost_per_token", "output_cost_per_token"))
    except Exception:
        batch_in = batch_out = list_in = list_out = None
    if batch_in is not None and batch_out is not None:
        return (batch_in, batch_out), BATCH_PRICE
    if list_in is not None and list_out is not None:
        return (list_in / 2, list_out / 2), HALF_LIST_PRICE
    return None, UNPRICED
