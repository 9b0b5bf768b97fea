"""Memoise DSPy's model-metadata lookup, which dominates per-call CPU for models missing from its map.

DSPy 3.4 prices every response by looking the model up in its bundled metadata snapshot; for a model
the snapshot does not list (any self-hosted OpenAI-compatible model) that is a scan of every entry,
about 2 ms of CPU per call, twice per call. At high concurrency on two cores that alone caps
throughput well below the ideal. The snapshot is loaded once and never changes during a process,
so the lookup is a pure function of its arguments: we cache it and hand out deep copies exactly as
the original does. The patch itself lives in ``lm/dspy_compat.py`` with the other DSPy internals.
Installed once, idempotent; measured in benchmarks/bench_throughput.py.
"""

from __future__ import annotations

import warnings


def install() -> bool:
    """Apply the memoisation; warns (once) when DSPy no longer has the function where we patch it."""
    from scijudge.lm import dspy_compat

    applied = dspy_compat.patch_model_info()
    if not applied:
        warnings.warn("scijudge could not memoise dspy.clients.costs.model_info (DSPy changed); "
                      "judging works but uses more CPU per call", stacklevel=2)
    return applied
