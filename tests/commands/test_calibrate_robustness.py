"""calibrate's robustness section is ``scijudge robustness``'s table: imported variants (``result.variant_of``)
count too, and a store without variants gets none."""

from __future__ import annotations

import pandas as pd

from scijudge.commands.calibrate import _robustness
from scijudge.metrics.robustness import robustness_table


def _imported(with_variants: bool) -> pd.DataFrame:
    rows = []
    for i in range(8):
        rows.append({"item_id": f"q{i}", "judge": "j", "model": "m", "score": 4.0, "result": None})
        if with_variants:
            rows.append({"item_id": f"q{i}-v", "judge": "j", "model": "m", "score": 2.0 + i % 2,
                         "result": {"variant_of": f"q{i}", "level": "extreme", "changed": True}})
    return pd.DataFrame(rows).assign(part="", family="imported", spec_hash="imported", status="ok", verdict=None)


def test_calibrate_uses_the_robustness_commands_table_and_sees_imported_variants() -> None:
    frame = _imported(True)
    mine = _robustness(frame, 200, 0)
    pd.testing.assert_frame_equal(mine, robustness_table(frame, n_boot=200, seed=0).table)
    row = mine[(mine["judge"] == "j") & (mine["level"] == "extreme")].iloc[0]
    assert row["n_pairs"] == 8 and row["drop"] == 1.5  # 4 - (2, 3, 2, 3, ...)
    assert _robustness(_imported(False), 200, 0) is None
