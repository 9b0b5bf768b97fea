"""A judge compared on fewer than 30 labelled units gets a note (its interval is what to read); 30 or more, none."""

from __future__ import annotations

import numpy as np
import pandas as pd

from scijudge import calibrate


def _frames(n: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(5)
    truth = rng.integers(1, 6, n).astype(float)
    ids = [f"i{i}" for i in range(n)]
    judgments = pd.DataFrame({"item_id": ids, "judge": "j", "part": "", "family": "likert", "spec_hash": "h",
                              "model": "m/x", "endpoint": "", "status": "ok",
                              "score": np.clip(truth + rng.integers(-1, 2, n), 1, 5), "verdict": None, "source": "run"})
    labels = pd.DataFrame({"item_id": ids, "judge": "j", "part": "", "score": truth, "verdict": None, "annotator": "a"})
    return judgments, labels


def test_fewer_than_thirty_labelled_units_carry_a_note_naming_the_judge_and_its_count() -> None:
    notes = calibrate(*_frames(12), n_boot=0).notes
    assert [n for n in notes if n.startswith("fewer than 30 labelled units: j / m/x (12)")]
    assert not [n for n in calibrate(*_frames(30), n_boot=0).notes if n.startswith("fewer than 30")]
