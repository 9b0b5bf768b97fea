"""calibrate's verdict and leaderboard weigh coverage: a contender that judged fewer than 80% of the labelled
units is neither ranked nor named best; the report shows each jury against its members (Holm) and the labels'
provenance."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from scijudge._resources import bundled_path
from scijudge.labels import load_labels_frame
from scijudge.metrics.calibration import calibrate
from scijudge.metrics.calibration._blocks import COVERAGE_FLOOR
from scijudge.metrics.jury import jury, jury_vs_best_member
from scijudge.report.calibration import render_html, report_dict
from scijudge.report.summary import verdict_sentence, verdict_summary


def _panel_with_a_majority_jury() -> tuple[pd.DataFrame, pd.DataFrame]:
    rows = [json.loads(line) for line in bundled_path("datasets/jury_example/panel.jsonl").read_text().splitlines()]
    panel = pd.DataFrame([{k: r.get(k) for k in ("item_id", "judge", "model", "score")} for r in rows])
    majority = jury(panel, ["judge-a", "judge-b", "judge-c"], name="maj", method="majority", scale="1,5,1").rows
    both = pd.concat([panel.assign(status=panel["score"].notna().map({True: "ok", False: "abstained"})), majority],
                     ignore_index=True)
    return both, load_labels_frame(bundled_path("datasets/yescieval_example/labels.jsonl"))


@pytest.mark.slow  # seconds: the fast subset stays under a minute
def test_low_coverage_contenders_are_not_ranked_nor_best_and_the_report_shows_the_jury_table() -> None:
    judgments, labels = _panel_with_a_majority_jury()
    result = calibrate(judgments, labels, scale=(1, 5, 1), n_boot=0)
    board = result.leaderboard.set_index("contender")
    assert board.loc["jury:maj", "coverage"] < COVERAGE_FLOOR  # the majority abstains on a quarter of the units
    assert pd.isna(board.loc["jury:maj", "rank"]) and "not ranked: coverage below 0.8" in board.loc["jury:maj", "notes"]
    assert board.loc["judge-a", "rank"] == 1  # highest kappa_w among those covering >= 80%
    coverage = result.per_rubric.set_index(["judge", "contender"])["coverage"]
    summary = verdict_summary(result)
    for row in summary.itertuples(index=False):
        assert row.best is None or coverage[(row.judge, row.best)] >= COVERAGE_FLOOR
    low = summary[summary["not_eligible"].str.contains("jury:maj", regex=False)]
    assert len(low) >= 3 and "not eligible (coverage below 0.8): jury:maj" in verdict_sentence(low.iloc[0])
    result.jury_vs_best_member = jury_vs_best_member(judgments.assign(cost=None, source=""), labels)
    result.provenance = {"labels": "labels: 216 unknown", "from_model": False, "warning": ""}
    page = render_html(result)
    assert "Juries against each member" in page and "labels: 216 unknown" in page
    assert report_dict(result)["provenance"]["labels"] == "labels: 216 unknown"
    assert len(report_dict(result)["jury_vs_best_member"]) == 3
