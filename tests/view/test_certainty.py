"""The label page's certainty hook without a browser: the queue comes in a fixed random order once a target width
is set, the page shows each judge's interval, and a target already met stops the queue."""

from __future__ import annotations

import pytest
from _view_world import J1, make_world

from scijudge.view.app import make_viewer
from scijudge.view.certainty import Certainty


@pytest.mark.slow
def test_random_order_interval_lines_and_the_stop(tmp_path) -> None:
    world = make_world(tmp_path / "w")
    plain = make_viewer([world.store], labels=[world.labels], label_out=tmp_path / "a.jsonl", annotator="ann",
                        judges=[J1])
    stored = [e.unit for e in plain.labelling.queue.entries(set(), set())]
    viewer = make_viewer([world.store], labels=[world.labels], label_out=tmp_path / "b.jsonl", annotator="ann",
                         judges=[J1])
    Certainty(viewer, target_width=0.05, alpha=0.1, judges=[J1]).install()
    shuffled = [e.unit for e in viewer.labelling.queue.entries(set(), set())]
    assert sorted(shuffled) == sorted(stored) and shuffled != stored
    assert shuffled == [e.unit for e in viewer.labelling.queue.entries(set(), set())]  # the same every time
    viewer.warm()
    page = viewer.label_page()
    assert f"{J1} / m/alpha + m/beta:" in page and "certain-enough" not in page and 'id="unit-item"' in page
    wide = make_viewer([world.store], labels=[world.labels], label_out=tmp_path / "c.jsonl", annotator="ann",
                       judges=[J1])
    Certainty(wide, target_width=100.0, alpha=0.1, judges=[J1], start=2).install()
    wide.warm()
    page = wide.label_page()
    assert "certain enough: ±50 at 90%" in page and 'id="unit-item"' not in page
