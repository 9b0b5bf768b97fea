"""match_units' indexed join: same human scores as calibration's consensus, a cache keyed on content, minimal frames."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from scijudge.errors import InputError
from scijudge.estimation import estimate, match_units
from scijudge.estimation._units import consensus_arrays
from scijudge.metrics.calibration.scales import _consensus
from scijudge.metrics.frames import EXPECTED_DECODING, complete_judgments
from scijudge.vocab import ScaleTuple

JUDGE = "j.quality"


def _minimal(n: int = 40, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.integers(1, 6, n).astype(float)
    f = np.clip(y + rng.integers(-1, 2, n), 1, 5).astype(float)
    judgments = pd.DataFrame({"item_id": [f"i{k}" for k in range(n)], "judge": JUDGE, "score": f})
    labels = pd.DataFrame({"item_id": [f"i{k}" for k in range(0, n, 2)], "judge": JUDGE, "score": y[::2]})
    return judgments, labels, y


def test_consensus_arrays_equal_calibrations_consensus_and_a_hand_case() -> None:
    rng = np.random.default_rng(3)
    rows = [{"item_id": f"i{rng.integers(0, 30)}", "judge": JUDGE, "part": "", "score": float(rng.integers(1, 6)),
             "annotator": f"a{k}"} for k in range(200)]
    lab = pd.DataFrame(rows)
    scales = {JUDGE: ScaleTuple(1.0, 5.0, 1.0)}
    ref, _, _ = _consensus(lab.assign(verdict=None), scales)
    keys = (lab["item_id"] + "\x1f" + JUDGE + "\x1f").to_numpy(object)
    ukeys, h, counts = consensus_arrays(keys, lab["judge"].to_numpy(object), lab["score"].to_numpy(float), scales,
                                        set(), "median")
    mine = dict(zip([k.split("\x1f")[0] for k in ukeys], h))
    assert mine == pytest.approx(dict(zip(ref["item_id"], ref["h_score"])))
    # hand case: medians 2.5 and 3.5 are 1.5 and 2.5 steps above the low end 1, both rounded half-to-even to
    # 2 steps: 3; the median of (1, 2, 4) is 2; the mean of (1, 2, 4) is 7/3
    keys = np.array(["a", "a", "b", "b", "c", "c", "c"], dtype=object)
    scores = np.array([2.0, 3.0, 3.0, 4.0, 1.0, 2.0, 4.0])
    judge = np.full(7, JUDGE, dtype=object)
    _, med, _ = consensus_arrays(keys, judge, scores, scales, set(), "median")
    assert med.tolist() == [3.0, 3.0, 2.0]
    _, mean, n = consensus_arrays(keys, judge, scores, scales, set(), "mean")
    assert mean.tolist() == pytest.approx([2.5, 3.5, 7 / 3]) and n.tolist() == [2, 2, 3]


def test_a_minimal_frame_estimates_like_the_full_run_store_frame() -> None:
    judgments, labels, _ = _minimal()
    full = judgments.assign(part="", family="likert", spec_hash="", model="model", status="ok", verdict=None,
                            confidence=None, probs=None)
    a = estimate(judgments, labels)
    b = estimate(full, labels)
    pd.testing.assert_frame_equal(a, b)
    ppi = a[a["method"] == "ppi"].iloc[0]
    assert (ppi["model"], ppi["n_labeled"], ppi["n_unlabeled"]) == ("model", 20, 20)


def test_the_cache_follows_the_content_not_the_object() -> None:
    judgments, labels, _ = _minimal()
    first = estimate(judgments, labels)
    judgments.loc[judgments.index[1], "score"] = 1.0  # an unlabelled item's score changes in place
    second = estimate(judgments, labels)
    judge_only = lambda t: float(t.loc[t["method"] == "judge-only", "estimate"].iloc[0])  # noqa: E731
    assert judge_only(second) == pytest.approx(judgments["score"].mean())
    assert judge_only(first) != judge_only(second)


def test_minimal_frame_defaults_and_expected_scores_read_as_continuous() -> None:
    probs = [{"1": 0.5, "2": 0.5}, {"1": 0.0, "2": 1.0}, None]
    frame = pd.DataFrame({"item_id": ["a", "b", "c"], "judge": JUDGE, "score": [1.5, 2.0, None], "probs": probs})
    done = complete_judgments(frame)
    assert done["status"].tolist() == ["ok", "ok", "abstained"]
    assert done["decoding"].tolist() == [EXPECTED_DECODING, "", ""]  # 2.0 is a level, not an expectation
    assert (done["model"].unique().tolist(), done["family"].unique().tolist()) == (["model"], ["likert"])
    assert "status" not in frame  # the caller's frame is not modified
    labels = pd.DataFrame({"item_id": ["a", "b"], "judge": JUDGE, "score": [1.0, 2.0]})
    units = match_units(frame, labels, scale=(1, 5, 1))  # 1.5 off the grid is accepted: expected scores
    assert units.frame["human"].tolist()[:2] == [1.0, 2.0]


def test_labels_refused_with_calibrations_one_line() -> None:
    judgments, labels, _ = _minimal()
    twice = pd.concat([labels, labels.iloc[:1]], ignore_index=True)
    with pytest.raises(InputError, match="duplicate label"):
        estimate(judgments, twice)
    with pytest.raises(InputError, match="outside the scale"):
        estimate(judgments, labels.assign(score=labels["score"] + 10))
    with pytest.raises(InputError, match="lack a column"):
        estimate(judgments.drop(columns="judge"), labels)
