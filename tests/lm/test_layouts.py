"""Item-first prompts and the fused judge on the local engine: batched greedy equals unbatched greedy."""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path

import pytest

# The local extra is checked without importing it, so that collecting this module stays cheap.
_MISSING = [name for name in ("torch", "transformers", "peft") if find_spec(name) is None]
pytestmark = [pytest.mark.slow,  # builds and runs a tiny random transformers model
              pytest.mark.skipif(bool(_MISSING), reason=f"not installed: {_MISSING} (the local extra)")]

from scijudge import Item, Run, get_spec, judge_items, load_judge  # noqa: E402
from scijudge.judges.fused import FusedJudge  # noqa: E402
from scijudge.judges.layout import apply_layout  # noqa: E402
from scijudge.lm import make_lm  # noqa: E402
from scijudge.lm._batching import Job, _by_prefix  # noqa: E402
from scijudge.lm.local import _prefix_key  # noqa: E402
from scijudge.lm.tiny import build_tiny_model  # noqa: E402

RUBRICS = ["yescieval.qa.correctness", "yescieval.qa.completeness", "yescieval.qa.readability"]
PAPERS = [{"title": "Garnet electrolytes", "abstract": "Doping raised the ionic conductivity of the garnet."}]
ITEMS = [Item(id=f"q{i}", question=f"How does doping change conductivity in sample {i}?", papers=PAPERS,
              answer=f"Sample {i} conducts {i + 2} times better after doping.") for i in range(3)]


@pytest.fixture(scope="module")
def lm(tmp_path_factory: pytest.TempPathFactory):
    paths = build_tiny_model(tmp_path_factory.mktemp("tiny_layout"), seed=1)
    # 96: the fused judgment of three rubrics needs ~74 tokens; at 48 every fused call was cut and run again
    model = make_lm(f"hf:{paths['adapter']}", cache=False, max_batch_size=9, max_wait_ms=50, max_tokens=96)
    yield model
    model.engine.close()


def _judged(judges, run_path: Path, concurrency: int) -> dict[tuple[str, str], tuple]:
    with Run(run_path) as run:
        summary = judge_items(ITEMS, judges, run=run, concurrency=concurrency)
        frame = run.to_pandas()
    assert summary.abstained == 0
    return {(r.item_id, r.judge): (r.score, r.rationale) for r in frame.itertuples()}


def test_item_first_batched_equals_unbatched_greedy(lm, tmp_path: Path) -> None:
    judges = [apply_layout(load_judge(name, lm=lm), "item-first") for name in RUBRICS]
    before = len(lm.engine.batch_sizes)
    one_by_one = _judged(judges, tmp_path / "single.sqlite", concurrency=1)
    assert set(lm.engine.batch_sizes[before:]) == {1}
    before = len(lm.engine.batch_sizes)
    batched = _judged(judges, tmp_path / "batched.sqlite", concurrency=9)
    assert max(lm.engine.batch_sizes[before:]) > 1
    assert len(batched) == 9 and batched == one_by_one


def test_fused_item_first_batched_equals_unbatched_and_stores_each_rubric(lm, tmp_path: Path) -> None:
    fused = apply_layout(FusedJudge([get_spec(n) for n in RUBRICS], lm=lm), "item-first")
    one_by_one = _judged([fused], tmp_path / "fused_single.sqlite", concurrency=1)
    batched = _judged([fused], tmp_path / "fused_batched.sqlite", concurrency=3)
    assert sorted(one_by_one) == sorted((i.id, n) for i in ITEMS for n in RUBRICS)
    assert batched == one_by_one


def test_prefix_keys_follow_the_layout() -> None:
    rubric_first = [[{"role": "system", "content": f"rubric {r}"}, {"role": "user", "content": f"item {i}"}]
                    for i in range(2) for r in range(2)]
    keys = [_prefix_key(m, [1, 2, 3]) for m in rubric_first]
    assert keys[0] == keys[2] and keys[0] != keys[1]  # same rubric, different items: one key
    item_first = [[100 + i] * 70 + [r] for i in range(2) for r in range(2)]  # item tokens, then the rubric's
    keys = [_prefix_key([{"role": "user", "content": "x"}], ids) for ids in item_first]
    assert keys[0] == keys[1] and keys[0] != keys[2]  # same item, different rubrics: one key
    jobs = [Job(payload=n, group=None, prefix_key=k, max_batch_size=4, max_wait_s=0)
            for n, k in enumerate(["a", "b", "a", "c", "b", "a"])]
    assert [j.payload for j in _by_prefix(jobs)] == [0, 2, 5, 1, 4, 3]


def test_rows_of_two_rubrics_keep_their_own_longer_shared_prefix() -> None:
    from scijudge.lm._decode import Row, _groups_by_prefix

    boiler, rubric = list(range(1000, 1040)), {r: [2000 + r] * 50 for r in range(2)}
    rows = [Row(input_ids=[1, *boiler, *rubric[r], 3000 + i, 7], max_new_tokens=4) for r in range(2) for i in range(4)]
    groups = _groups_by_prefix(rows)
    assert sorted((length, sorted(members)) for length, members in groups) == [(91, [0, 1, 2, 3]), (91, [4, 5, 6, 7])]
    one_rubric = rows[:4] + [Row(input_ids=[1, *boiler, 9, 9], max_new_tokens=4)]  # shares only the boilerplate
    assert sorted(len(m) for _, m in _groups_by_prefix(one_rubric)) == [1, 4]
    pair = _groups_by_prefix([rows[0], rows[4]])  # two rows: sharing the boilerplate still saves prefill
    assert pair == [(41, [0, 1])]
