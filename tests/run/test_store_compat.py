"""A store written by the release before the layer move resumes with no request: identities did not move."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from scijudge import Run, judge_items, load_items, load_judge
from scijudge.testing.scripted import scripted_lm

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "store_before_layer_move.sqlite"
JUDGES = ("yescieval.qa.correctness", "yescieval.qa.coherence", "yescieval.qa.correctness.pairwise")


def test_a_store_from_the_previous_release_resumes_with_zero_requests(tmp_path, repo):
    # Built by the previous release (commit b3d2e79): 4 bundled items, 2 Likert rubrics and a pairwise variant,
    # judged by a scripted model; 12 judgments (8 ok, 4 abstained), 2 (item, pairwise) pairs not applicable.
    store = tmp_path / "old.sqlite"
    shutil.copy(FIXTURE, store)
    before = store.read_bytes()
    lm = scripted_lm(lambda request: json.dumps({"judgment": {"rationale": "ok", "rating": 4}}))
    items, _ = load_items(repo / "datasets/yescieval_example/items.jsonl")
    with Run(store) as run:
        assert len(run) == 12
        summary = judge_items(items[:4], [load_judge(name, lm=lm) for name in JUDGES], run)
    assert lm.engine.requests == [], "every stored judgment keeps its identity after the move"
    assert (summary.judged, summary.skipped_done, summary.not_applicable) == (0, 12, 2)
    assert before != b"" and len(Run(store)) == 12
