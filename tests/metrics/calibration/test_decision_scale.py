"""Decision judgments (expected level on the judge's scale) are calibrated as continuous scores, no --scale needed."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from scijudge import calibrate
from scijudge.records import decoding_text


def test_decision_scores_are_continuous_on_the_judges_scale():
    rng = np.random.default_rng(3)
    truth = rng.integers(1, 6, 60).astype(float)
    expected = np.clip(truth + rng.normal(0, 0.6, 60), 1, 5)
    decoding = decoding_text({"mode": "decision", "decision_score": "expected", "max_tokens": 3, "top_logprobs": 20})
    judgments = pd.DataFrame({"item_id": [f"i{i}" for i in range(60)], "judge": "j", "part": "", "family": "likert",
                              "spec_hash": "h", "model": "m/x", "endpoint": "", "status": "ok", "score": expected,
                              "verdict": None, "decoding": decoding, "source": "run"})
    labels = pd.DataFrame({"item_id": [f"i{i}" for i in range(60)], "judge": "j", "part": "", "score": truth,
                           "verdict": None, "annotator": "a"})
    result = calibrate(judgments, labels, n_boot=0)
    assert "j" in result.continuous
    assert any("decision judgments score the expected level" in note for note in result.notes)
    row = result.per_rubric.iloc[0]
    assert abs(row["spearman"] - spearmanr(expected, truth).statistic) < 1e-12  # raw expected scores, not rounded
    assert abs(row["mae"] - np.mean(np.abs(expected - truth))) < 1e-12
