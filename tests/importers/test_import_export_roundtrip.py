"""Issue 45, item 5: ``export`` -> ``import-judgments`` round-trips a decision run (continuous expected-level scores
re-import without ``--scale``; probs, decoding and tokens survive), and off-scale scores of a judge whose scale is
known (a shipped spec's included) are bad rows named by their line.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from scijudge.cli import app
from scijudge.records import JudgeResult
from scijudge.run.store import Run

JUDGE = "yescieval.qa.correctness"


def _decision_store(path) -> list[dict]:
    rows = []
    for k in range(4):
        probs = {"1": 0.1, "2": 0.1, "3": 0.2 + 0.05 * k, "4": 0.3, "5": 0.3 - 0.05 * k}
        score = sum(int(level) * p for level, p in probs.items())
        rows.append(JudgeResult(item_id=f"q{k}", judge=JUDGE, family="likert", spec_hash="h", model="m",
                                status="ok", score=score, probs=probs, decoding='{"decision":true,"max_tokens":1}',
                                tokens_in=100 + k, tokens_out=1, created_at="2026-12-01T10:00:00+00:00"))
    with Run(path) as run:
        for row in rows:
            run.record(row)
    return [r.model_dump(mode="json") for r in rows]


@pytest.mark.parametrize("suffix", ["jsonl", "csv"])
def test_an_exported_decision_run_imports_back_whole_without_a_scale(tmp_path, monkeypatch, suffix):
    monkeypatch.chdir(tmp_path)
    original = _decision_store(tmp_path / "d.sqlite")
    runner = CliRunner()
    done = runner.invoke(app, ["export", "d.sqlite", "--out", f"d.{suffix}"])
    assert done.exit_code == 0, done.output
    done = runner.invoke(app, ["import-judgments", f"d.{suffix}", "--run", "back.sqlite"])
    assert done.exit_code == 0 and "4 judgments" in done.output and "0 bad rows" in done.output, done.output
    with Run(tmp_path / "back.sqlite", create=False) as run:
        back = {r["item_id"]: r for r in run.rows()}
    for row in original:
        got = back[row["item_id"]]
        assert got["score"] == pytest.approx(row["score"], abs=1e-12)
        assert got["probs"] == pytest.approx(row["probs"], abs=1e-12)
        assert (got["decoding"], got["tokens_in"], got["tokens_out"]) == (row["decoding"], row["tokens_in"], 1)


def test_off_scale_scores_of_a_shipped_judge_are_bad_rows_with_their_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows = [{"item_id": "q1", "judge": JUDGE, "model": "m", "score": 7},
            {"item_id": "q2", "judge": JUDGE, "model": "m", "score": 2.5},
            {"item_id": "q3", "judge": JUDGE, "model": "m", "score": 3}]
    (tmp_path / "j.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    done = CliRunner().invoke(app, ["import-judgments", "j.jsonl", "--run", "s.sqlite"])
    assert done.exit_code == 1, done.output
    text = " ".join(done.output.split())
    assert "j.jsonl:1, field 'score': score 7 is outside the scale 1..5 step 1" in text, text
    assert "j.jsonl:2, field 'score': score 2.5 is outside the scale 1..5 step 1" in text, text
    assert "1 judgment ->" in text and "2 bad rows" in text, text
