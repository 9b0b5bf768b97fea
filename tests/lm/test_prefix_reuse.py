"""Prefix KV reuse across batches (scijudge.lm._prefix): the same decision probabilities and the same greedy text
as without it, on the tiny random model, with an item's rubrics split over several batches."""

from __future__ import annotations

import random
from importlib.util import find_spec

import pytest

pytestmark = pytest.mark.skipif(find_spec("torch") is None or find_spec("transformers") is None,
                                reason="not installed: torch/transformers (the local extra)")
VOCAB, PAD, EOS = 300, 0, 1


@pytest.fixture(scope="module")
def model():
    import torch

    from scijudge.lm.tiny import tiny_llama

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a 64-wide model: more threads only wait on each other
    yield tiny_llama(VOCAB, seed=5, pad_token_id=PAD, eos_token_id=EOS)
    torch.set_num_threads(threads)


def _prompts() -> list[list[int]]:
    """Two items x three rubrics, item first: each item's rubrics share its 80 opening tokens."""
    rng = random.Random(7)
    prompts = []
    for _ in range(2):
        opening = [rng.randrange(10, VOCAB) for _ in range(80)]
        for _ in range(3):
            prompts.append(opening + [rng.randrange(10, VOCAB) for _ in range(rng.randrange(5, 15))])
    return prompts


def test_decision_probabilities_are_the_same_with_prefix_reuse(model) -> None:
    from scijudge.lm._prefix import PrefixStore
    from scijudge.lm.decision import DecideRow, decide_batch, plan_levels

    plan = plan_levels([(level,) for level in range(5, 10)], None)
    rows = [DecideRow(ids, plan) for ids in _prompts()]
    alone = [decide_batch(model, [row], pad_id=PAD)[0] for row in rows]
    store = PrefixStore()
    reused = []
    for batch in ([rows[0], rows[1]], [rows[2], rows[3]], [rows[4]], [rows[5]]):  # items split across batches
        reused += decide_batch(model, batch, pad_id=PAD, store=store)
    assert store.reused_tokens >= 3 * 80  # item 1's third rubric, item 2's second and third took the item stored
    for a, b in zip(alone, reused, strict=True):
        assert a.probs == pytest.approx(b.probs, abs=1e-5)
        assert a.coverage == pytest.approx(b.coverage, abs=1e-5)


def test_greedy_text_is_the_same_with_prefix_reuse(model) -> None:
    from scijudge.lm._decode import Row, decode_batch
    from scijudge.lm._prefix import PrefixStore

    prompts = _prompts()

    def decode(batch: list[list[int]], store: PrefixStore | None) -> list[list[int]]:
        rows = [Row(input_ids=ids, max_new_tokens=6) for ids in batch]
        results = decode_batch(model, rows, stop_ids=[EOS], pad_id=PAD, detokenize=lambda ids: " ".join(map(str, ids)),
                               store=store)
        return [r.token_ids for r in results]

    alone = [decode([ids], None)[0] for ids in prompts]
    store = PrefixStore()
    reused = decode(prompts[:2], store) + decode(prompts[2:4], store) + decode(prompts[4:], store)
    assert store.reused_tokens >= 2 * 80
    assert reused == alone
    assert all(len(tokens) == 6 for tokens in alone)


def test_the_store_keeps_within_its_budget_and_forgets_other_weights() -> None:
    import torch

    from scijudge.lm._prefix import PrefixStore

    store = PrefixStore(budget=3 * 2 * 64 * 4 * 40)  # room for three entries of 40 tokens
    kv = [(torch.zeros(1, 1, 40, 64), torch.zeros(1, 1, 40, 64))]
    for start in range(4):
        store.add(list(range(start * 100, start * 100 + 40)), kv)
    assert store.best(list(range(0, 40)))[1] == 0  # the oldest went first
    entry, common = store.best(list(range(300, 335)) + [9, 9, 9])
    assert entry is not None and common == 35
    store.use(("another adapter",))
    assert store.best(list(range(300, 340)))[1] == 0
