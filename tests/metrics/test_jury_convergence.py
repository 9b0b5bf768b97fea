"""Dawid-Skene juries iterate to convergence by default, and say in one line when a limit stopped them short."""

from __future__ import annotations

import json

import pandas as pd

from scijudge._resources import bundled_path
from scijudge.metrics.jury import jury


def _panel() -> pd.DataFrame:
    rows = [json.loads(line) for line in bundled_path("datasets/jury_example/panel.jsonl").read_text().splitlines()]
    return pd.DataFrame([{k: r.get(k) for k in ("item_id", "judge", "model", "score")} for r in rows])


def test_dawid_skene_converges_by_default_and_reports_a_limit_that_stops_it() -> None:
    frame = _panel()  # a minimal frame (item_id, judge, model, score): the other run-store columns get defaults
    members = ["judge-a", "judge-b", "judge-c"]
    done = jury(frame, members, name="ds", method="dawid-skene", scale="1,5,1")
    assert not [n for n in done.notes if "did not converge" in n]
    converged = {r.result["jury"]["converged"] for r in done.results if r.status == "ok"}
    assert converged == {True}
    short = jury(frame, members, name="ds", method="dawid-skene", scale="1,5,1", ds_max_iter=2)
    lines = [n for n in short.notes if "did not converge in 2 iterations" in n]
    assert len(lines) == short.rows["judge"].nunique() and "raise --ds-max-iter" in lines[0]
