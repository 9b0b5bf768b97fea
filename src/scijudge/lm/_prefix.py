"""Prompt-prefix KV reuse across batches for the local engine (issue 51).

Within one batch the decoder computes a prefix shared by several rows once (``_decode._groups_by_prefix``). Across
batches nothing was kept: with the item-first layout the nine rubrics of an item share the question, the papers
and the answer (about 1,300 of 1,500 tokens on the bundled items), but rows that land in different batches (more
rubrics than ``max_batch_size``, or fewer in flight) prefilled the item again. ``PrefixStore`` keeps the KV cache
of the prefixes computed lately (least recently used first out, within a byte budget); a later prefix that starts
with the same tokens takes the common part from it (the KV of position i depends only on tokens 0..i) and computes
only the rest. Greedy text and decision probabilities equal those without reuse up to floating-point rounding
(``tests/lm/test_prefix_reuse.py``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

MIN_REUSE = 32  # tokens; a shorter common prefix is computed again
DEFAULT_BUDGET = 512 << 20  # bytes of stored KV (SmolLM2-135M in float32: about 46 KB per token)


@dataclass
class _Entry:
    tokens: tuple[int, ...]
    layers: list[tuple[Any, Any]]  # per layer (keys, values), each [1, kv heads, len(tokens), head dim]
    nbytes: int


class PrefixStore:
    """The KV of recently computed prompt prefixes of one model state (weights and adapter): ``owner`` changes
    empty it, since KV computed under other weights is not this model's."""

    def __init__(self, budget: int = DEFAULT_BUDGET) -> None:
        self.budget = budget
        self._entries: OrderedDict[tuple[int, ...], _Entry] = OrderedDict()
        self._owner: Hashable = None
        self.reused_tokens = 0  # prefix tokens taken from the store instead of computed (tests, benchmarks)

    def clear(self) -> None:
        self._entries.clear()

    def use(self, owner: Hashable) -> None:
        if owner != self._owner:
            self._entries.clear()
            self._owner = owner

    def best(self, ids: Sequence[int]) -> tuple[_Entry | None, int]:
        """The stored entry sharing the longest prefix with ``ids``, and that length."""
        best: tuple[_Entry | None, int] = (None, 0)
        for entry in self._entries.values():
            tokens, n = entry.tokens, min(len(entry.tokens), len(ids))
            common = 0
            while common < n and tokens[common] == ids[common]:
                common += 1
            if common > best[1]:
                best = (entry, common)
        if best[0] is not None:
            self._entries.move_to_end(best[0].tokens)
        return best

    def add(self, tokens: Sequence[int], layers: list[tuple[Any, Any]]) -> None:
        key = tuple(tokens)
        nbytes = sum(k.element_size() * k.nelement() + v.element_size() * v.nelement() for k, v in layers)
        if nbytes > self.budget or len(key) < MIN_REUSE:
            return
        self._entries.pop(key, None)
        self._entries[key] = _Entry(key, layers, nbytes)
        while sum(e.nbytes for e in self._entries.values()) > self.budget:
            self._entries.popitem(last=False)


def kv_layers(cache: Any) -> list[tuple[Any, Any]] | None:
    """(keys, values) per layer of a transformers ``DynamicCache`` of full-attention layers, else None (sliding
    windows and other layouts are not stored)."""
    layers = getattr(cache, "layers", None)
    if not layers or any(type(layer).__name__ != "DynamicLayer" or not layer.is_initialized for layer in layers):
        return None
    return [(layer.keys, layer.values) for layer in layers]


def prefix_pass(call: Any, prefixes: list[list[int]], pad_id: int, torch: Any, device: Any,
                store: PrefixStore | None) -> tuple[Any, Any]:
    """The KV cache of ``prefixes`` (one row each, left-padded) and its mask; with a ``store``, what it holds is
    taken from it and what is computed is kept in it."""
    cache = call.new_cache()
    hits = [store.best(p) if store is not None else (None, 0) for p in prefixes]
    if all(common < MIN_REUSE for _, common in hits):
        ids, mask = left_pad(prefixes, pad_id, torch, device)
        call(ids, mask, (mask.cumsum(-1) - 1).clamp(min=0), cache)
        layers = kv_layers(cache) if store is not None else None
        if store is not None and layers is not None:
            width = ids.shape[1]
            for g, prefix in enumerate(prefixes):
                start = width - len(prefix)
                store.add(prefix, [(k[g:g + 1, :, start:].clone(), v[g:g + 1, :, start:].clone()) for k, v in layers])
        return cache, mask
    assert store is not None
    rows = [_one_prefix(call, prefix, entry, common, torch, device, store) for prefix, (entry, common) in
            zip(prefixes, hits, strict=True)]
    width = max(len(p) for p in prefixes)
    for layer in range(len(rows[0])):
        keys, values = rows[0][layer]
        shape = (len(rows), keys.shape[1], width, keys.shape[3])
        batch_k, batch_v = keys.new_zeros(shape), values.new_zeros(shape)
        for g, row in enumerate(rows):
            n = row[layer][0].shape[2]
            batch_k[g, :, width - n:] = row[layer][0][0]
            batch_v[g, :, width - n:] = row[layer][1][0]
        cache.update(batch_k, batch_v, layer)
    _, mask = left_pad(prefixes, pad_id, torch, device)
    return cache, mask


def _one_prefix(call: Any, prefix: list[int], entry: _Entry | None, common: int, torch: Any, device: Any,
                store: PrefixStore) -> list[tuple[Any, Any]]:
    """One prefix's KV: the stored common part (if long enough) plus the rest computed on top of it."""
    common = min(common, len(prefix)) if common >= MIN_REUSE and entry is not None else 0
    part = call.new_cache()
    if common:
        for layer, (keys, values) in enumerate(entry.layers):  # type: ignore[union-attr]
            part.update(keys[:, :, :common], values[:, :, :common], layer)
        store.reused_tokens += common
    if common < len(prefix):
        ids = torch.tensor([prefix[common:]], dtype=torch.long, device=device)
        mask = torch.ones((1, len(prefix)), dtype=torch.long, device=device)
        positions = torch.arange(common, len(prefix), device=device).unsqueeze(0)
        call(ids, mask, positions, part)
    layers = kv_layers(part)
    assert layers is not None  # the entry came from a cache of this kind
    if common < len(prefix):
        store.add(prefix, layers)
    return layers


def left_pad(sequences: Sequence[Sequence[int]], pad_id: int, torch: Any, device: Any) -> tuple[Any, Any]:
    """Left-pad token lists into (ids, mask) tensors."""
    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for r, seq in enumerate(sequences):
        if seq:
            ids[r, width - len(seq) :] = torch.tensor(seq, dtype=torch.long)
            mask[r, width - len(seq) :] = 1
    return ids.to(device), mask.to(device)
