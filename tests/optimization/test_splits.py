"""Honest splits: by item, stratified by label, seeded, exact sizes; too few items is a clear error."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest

from scijudge.testing.toy_judge import toy_setup
from scijudge.optimization._recipes import recipe_from_dict
from scijudge.optimization._splits import split_items, split_sizes
from scijudge.errors import InputError
from scijudge.labels import HumanLabel
from scijudge.optimization._data import build_data as _build_data, split_data as _split


def test_sizes_by_hand() -> None:
    assert split_sizes(10, (0.5, 0.25, 0.25)) == (5, 3, 2)  # 5 / 2.5 / 2.5: the tie goes to the earlier split
    assert split_sizes(12, (0.5, 0.25, 0.25)) == (6, 3, 3)
    assert split_sizes(3, (0.8, 0.1, 0.1)) == (1, 1, 1)  # every split with a positive ratio gets an item
    assert split_sizes(7, (0.6, 0.0, 0.4)) == (4, 0, 3)
    with pytest.raises(ValueError):
        split_sizes(2, (0.5, 0.25, 0.25))


@pytest.mark.parametrize("seed", range(20))
def test_disjoint_complete_exact_and_stratified(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randint(10, 60)
    ratios = (0.6, 0.2, 0.2) if seed % 2 else (0.5, 0.0, 0.5)
    strata = {f"item{i}": rng.choice([1, 2, 3, 4, 5]) for i in range(n)}
    split = split_items(strata, ratios, seed)
    parts = [set(split.train), set(split.dev), set(split.test)]
    assert parts[0].isdisjoint(parts[1]) and parts[0].isdisjoint(parts[2]) and parts[1].isdisjoint(parts[2])
    assert set().union(*parts) == set(strata)
    assert tuple(len(p) for p in parts) == split_sizes(n, ratios)
    for label, size in Counter(strata.values()).items():  # each label spread in proportion, within one item
        for part, ratio in zip(parts, ratios):
            in_part = sum(1 for i in part if strata[i] == label)
            assert abs(in_part - size * ratio) < 1 + 1e-9, (label, size, ratio, in_part)


def test_seeded() -> None:
    strata = {f"i{k}": k % 5 for k in range(40)}
    a = split_items(strata, (0.5, 0.25, 0.25), seed=7)
    assert a == split_items(strata, (0.5, 0.25, 0.25), seed=7)
    assert a != split_items(strata, (0.5, 0.25, 0.25), seed=8)
    shuffled = dict(sorted(strata.items(), key=lambda kv: kv[0][::-1]))  # input order does not matter
    assert a == split_items(shuffled, (0.5, 0.25, 0.25), seed=7)


def test_items_with_several_labels_stay_in_one_split() -> None:
    """Two annotators and two parts (overall + one criterion) per item: every example of an item lands in the
    same split."""
    spec, items, labels, _ = toy_setup(n_items=20, annotators=2)
    # a multi-criterion output, so that a label's part can name a criterion
    spec = spec.model_copy(update={"output": "scijudge.materials.outputs:SynthesisJudgment"})
    extra = [HumanLabel(item_id=lab.item_id, judge=lab.judge, part="process_steps", score=lab.score,
                        annotator=lab.annotator) for lab in labels]
    recipe = recipe_from_dict({"optimizer": "copro", "split": {"train": 0.5, "dev": 0.25, "test": 0.25, "seed": 1}})
    data = _build_data(spec, items, labels + extra, recipe, None)
    assert len(data.examples) == 40  # 20 items x 2 parts, annotators merged into one consensus each
    assert all(ex["sj_scores"] == [ex["sj_human"]] * 2 for ex in data.examples)
    split = _split(data, recipe, None)
    for item_id, examples in data.by_item.items():
        assert {split.of(ex["sj_item"]) for ex in examples} == {split.of(item_id)}
    assert split.sizes() == {"train": 10, "dev": 5, "test": 5}


def test_too_few_items_for_the_split(tmp_path: Path) -> None:
    spec, items, labels, _ = toy_setup(n_items=6)
    recipe = recipe_from_dict({"optimizer": "copro"}, source=tmp_path / "r.toml")
    data = _build_data(spec, items, labels[:2], recipe, "labels.jsonl")
    with pytest.raises(InputError) as err:
        _split(data, recipe, "labels.jsonl")
    assert err.value.file == "labels.jsonl" and err.value.field == "item_id"
    assert "cover 2 item(s)" in str(err.value) and "0.5/0.25/0.25" in str(err.value)
    no_dev = recipe_from_dict({"optimizer": "copro", "split": {"train": 0.5, "dev": 0.0, "test": 0.5}})
    assert _split(data, no_dev, "labels.jsonl").sizes() == {"train": 1, "dev": 0, "test": 1}
