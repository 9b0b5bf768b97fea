"""The one place scijudge sets litellm's cost-map switch (litellm reads it once, when it is imported)."""

from __future__ import annotations

import os

LOCAL_COST_MAP = "LITELLM_LOCAL_MODEL_COST_MAP"
"""litellm's switch: "true" reads its bundled price table instead of downloading one at import."""


def use_local_cost_map() -> None:
    """Price calls from litellm's bundled table, so that importing litellm never reaches the network (offline
    runs work; a user's own setting wins). Call it before anything imports DSPy or litellm."""
    os.environ.setdefault(LOCAL_COST_MAP, "true")
