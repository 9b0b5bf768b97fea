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


def test_the_one_few_units_note_names_each_small_figure_or_counts_them_past_a_limit() -> None:
    """The note calibrate, cascade and robustness share (``scijudge.vocab.few_units_note``), by hand."""
    from scijudge.vocab import few_units_note

    counts = [("j / a", 12), ("j / b", 30), ("k / a", 29.0)]
    assert few_units_note(counts, "labelled units", "read the intervals") == \
        ["fewer than 30 labelled units: j / a (12), k / a (29); read the intervals"]
    assert few_units_note([("j / b", 30)], "labelled units", "read the intervals") == []
    assert few_units_note(counts, "items", "wide", name_at_most=1, collapsed="{k} of {total} pairs, {lo} to {hi} each") \
        == ["fewer than 30 items: 2 of 3 pairs, 12 to 29 each; wide"]


def test_calibrate_counts_more_than_four_small_pairs_instead_of_naming_them() -> None:
    judgments, labels = _frames(12)
    many = pd.concat([judgments.assign(model=f"m/{k}") for k in range(5)], ignore_index=True)
    (note,) = [n for n in calibrate(many, labels, n_boot=0).notes if n.startswith("fewer than 30")]
    assert note == ("fewer than 30 labelled units: 5 of 5 (judge, contender) pairs, 12 to 12 units each "
                    "(per_rubric.csv's n); read their intervals, not their points")
