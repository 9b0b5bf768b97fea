"""One training batch in bounded passes: what keeps distillation's memory flat and Ctrl-C answered.

A batch's forward and backward run in passes of at most ``tokens_per_pass`` padded tokens each (beyond the shared
prefix), their gradients accumulated as those of the batch's mean loss, so memory holds one pass's activations
(on SmolLM2-135M in fp32 about 1.3 MB a token) however large the batch or long the prompts. The judge's system
prompt, shared by every row, runs once per batch: its keys and values become leaves that every pass reads
(expanded to the pass's rows), and their gradients, summed over the passes, go back through the prefix once at the
end, so the gradient is the whole batch's, computed once for the prefix.

A backward pass is one C++ call that holds a pending Ctrl-C until it returns (a minute on two busy cores for a
batch of eight 1,000-token prompts): a no-op gradient hook on each decoder layer's output runs Python between the
layers' backward steps, where the pending signal raises ``KeyboardInterrupt`` at once.

glibc keeps freed activations in the process (its mmap threshold rises to the largest block freed), so the
resident size grows by about a pass's activations each step without it: ``release_memory`` hands them back.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from scijudge.lm.kv_cache import forward_names, new_cache

TOKENS_PER_PASS = 256
"""Default padded tokens (rows x longest row, beyond the shared prefix) in one forward and backward pass. On
SmolLM2-135M with ExpertQA claim prompts (a 735-token shared prefix, 130-220 tokens each beyond it) a batch of 8
peaks 1.7 GB above the model at 256, 3.1 GB at 512, 4.5 GB in one pass, and 256 is also the fastest of the three
(benchmarks/bench_distill_memory.py)."""


def passes(rows: Sequence[Sequence[int]], idx: Iterable[int], skip: int, budget: int) -> list[list[int]]:
    """``idx`` in consecutive groups whose padded size (rows x longest row less ``skip`` tokens) stays within
    ``budget``; a row longer than the budget is a group of its own."""
    groups: list[list[int]] = []
    group: list[int] = []
    longest = 0
    for i in idx:
        n = len(rows[i]) - skip
        if group and max(longest, n) * (len(group) + 1) > budget:
            groups.append(group)
            group, longest = [], 0
        group.append(i)
        longest = max(longest, n)
    if group:
        groups.append(group)
    return groups


class SharedPrefix:
    """The tokens every row of a batch starts with, run once: their keys and values per layer, and the leaves
    that passes read; ``backward`` sends the leaves' summed gradients back through the prefix."""

    def __init__(self, model: Any, ids: Sequence[int], torch: Any, device: Any) -> None:
        self.torch, self.length, self.keyword = torch, len(ids), forward_names(model)[0]
        cache = new_cache(model)
        prefix = torch.tensor([list(ids)], dtype=torch.long, device=device)
        model(input_ids=prefix, use_cache=True, logits_to_keep=1, **{self.keyword: cache})
        self.states = [t for layer in cache.layers for t in (layer.keys, layer.values)]
        self.leaves = [t.detach().requires_grad_(t.requires_grad) for t in self.states]

    def cache(self, model: Any, rows: int) -> Any:
        """A cache holding the prefix for ``rows`` rows (views of the leaves: their gradients add up)."""
        cache = new_cache(model)
        for layer in range(len(self.leaves) // 2):
            keys, values = self.leaves[2 * layer], self.leaves[2 * layer + 1]
            cache.update(keys.expand(rows, -1, -1, -1), values.expand(rows, -1, -1, -1), layer)
        return cache

    def backward(self) -> None:
        """Back through the prefix once, with the gradients the passes left on its leaves."""
        pairs = [(s, leaf.grad) for s, leaf in zip(self.states, self.leaves, strict=True) if leaf.grad is not None]
        if pairs:
            self.torch.autograd.backward([s for s, _ in pairs], [g for _, g in pairs])


def _tick(grad: Any) -> None:
    """A gradient hook that changes nothing: running it lets a pending Ctrl-C raise inside a backward pass."""
    return None


@contextmanager
def interruptible_backward(model: Any, torch: Any) -> Iterator[None]:
    """While inside: each decoder layer's output carries ``_tick`` as a gradient hook (see the module docstring)."""
    try:
        from transformers.modeling_layers import GradientCheckpointingLayer
    except ImportError:  # pragma: no cover - older transformers: Ctrl-C waits for the backward pass
        yield
        return

    def on_output(_module: Any, _args: Any, output: Any) -> None:
        first = output[0] if isinstance(output, (tuple, list)) else output
        if isinstance(first, torch.Tensor) and first.requires_grad:
            first.register_hook(_tick)

    handles = [m.register_forward_hook(on_output) for m in model.modules() if isinstance(m, GradientCheckpointingLayer)]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def checkpoint_layers_in_eval(model: Any) -> None:
    """Make gradient checkpointing work on a model kept in eval mode (its dropout off): transformers checkpoints a
    layer only while that layer is training, so the checkpointed layers alone (not their children) are flagged."""
    for module in model.modules():
        if getattr(module, "gradient_checkpointing", False) is True:
            module.training = True


def release_memory() -> None:
    """Return the memory freed since the last call to the system (glibc ``malloc_trim``; elsewhere nothing)."""
    import ctypes
    import ctypes.util
    import sys

    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim(0)
    except (OSError, AttributeError):  # not glibc (musl has no malloc_trim)
        pass
