"""Honest train/dev/test splits: by item, stratified by label, seeded.

Every item goes to exactly one split, so no item's text can reach the optimizer and the held-out
report at once. Within the seeded order, items are grouped by label (stratum) and dealt out by a
quota rule: item k goes to the split furthest behind its share ``ratio * k``. Each stratum is thus
spread over the splits in proportion to the ratios, and the split sizes come out exactly as asked.
"""

from __future__ import annotations

import random
from collections.abc import Hashable, Mapping
from dataclasses import dataclass

SPLITS: tuple[str, str, str] = ("train", "dev", "test")


@dataclass(frozen=True)
class ItemSplit:
    """Item ids per split (disjoint; each list in a seeded order)."""

    train: tuple[str, ...]
    dev: tuple[str, ...]
    test: tuple[str, ...]

    def of(self, item_id: str) -> str:
        """The split an item belongs to."""
        for name in SPLITS:
            if item_id in getattr(self, name):
                return name
        raise KeyError(item_id)

    def sizes(self) -> dict[str, int]:
        return {name: len(getattr(self, name)) for name in SPLITS}


def split_sizes(n: int, ratios: tuple[float, float, float]) -> tuple[int, int, int]:
    """Split ``n`` items by ``ratios`` (largest remainder); every split with a positive ratio gets ≥ 1 item.

    Raises ValueError when ``n`` is too small for that.
    """
    needed = sum(1 for r in ratios if r > 0)
    if n < needed:
        raise ValueError(f"{n} item(s) cannot fill {needed} non-empty splits")
    total = sum(ratios)
    exact = [n * r / total for r in ratios]
    sizes = [int(x) for x in exact]
    order = sorted(range(3), key=lambda i: (-(exact[i] - sizes[i]), i))
    for i in order[: n - sum(sizes)]:
        sizes[i] += 1
    for i, r in enumerate(ratios):  # a positive ratio never rounds down to an empty split
        while r > 0 and sizes[i] == 0:
            donor = max(range(3), key=lambda j: (sizes[j], -j))
            sizes[donor] -= 1
            sizes[i] += 1
    return sizes[0], sizes[1], sizes[2]


def _stratum_key(value: Hashable) -> tuple[int, float, str]:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, float(value), "")
    return (1, 0.0, str(value))


def split_items(strata: Mapping[str, Hashable], ratios: tuple[float, float, float], seed: int) -> ItemSplit:
    """Assign each item id to train/dev/test, stratified by its label ``strata[item_id]``, reproducibly."""
    n = len(strata)
    targets = split_sizes(n, ratios)
    rng = random.Random(seed)
    ids = sorted(strata)
    rng.shuffle(ids)
    labels = sorted({strata[i] for i in ids}, key=_stratum_key)
    rng.shuffle(labels)  # which stratum comes first (and so where rounding falls) depends on the seed too
    rank = {label: k for k, label in enumerate(labels)}
    ids.sort(key=lambda i: rank[strata[i]])  # stable: shuffled order kept within a stratum
    out: list[list[str]] = [[], [], []]
    for k, item_id in enumerate(ids, start=1):
        deficits = [targets[s] * k / n - len(out[s]) for s in range(3)]
        best = max(range(3), key=lambda s: (deficits[s], -s) if len(out[s]) < targets[s] else (-1e9, -s))
        out[best].append(item_id)
    if tuple(len(o) for o in out) != targets:  # pragma: no cover - the quota rule always meets its targets
        raise AssertionError(f"split sizes {[len(o) for o in out]} differ from targets {targets}")
    return ItemSplit(train=tuple(out[0]), dev=tuple(out[1]), test=tuple(out[2]))
