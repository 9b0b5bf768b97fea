"""What the GPU benchmarks (`bench_layouts.py`, `bench_decision.py`, `bench_distill.py`) share: the model shapes
they build with random weights, and scijudge's modules imported without ``scijudge/__init__`` (which imports DSPy,
absent on the GPU machine)."""

from __future__ import annotations

import sys
import types
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
# Llama-3.1-8B's shape, with a 16k context (1,800-token prompts and their continuations fit).
LLAMA_8B = dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=16384,
                rope_theta=500000.0, rms_norm_eps=1e-5)


def tiny(vocab_size: int) -> dict[str, float]:
    """A two-layer Llama for the CPU dry runs, with ``vocab_size`` tokens."""
    return dict(vocab_size=vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=8192, rope_theta=500000.0,
                rms_norm_eps=1e-5)


def scijudge_without_init() -> None:
    """Make ``import scijudge.<module>`` load that module from ``src/`` without running ``scijudge/__init__``."""
    if "scijudge" not in sys.modules:
        package = types.ModuleType("scijudge")
        package.__path__ = [str(SRC / "scijudge")]
        sys.modules["scijudge"] = package
