"""`scijudge estimate` end to end: run stores, items with meta, labels file -> tables, CSVs and an HTML page."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from scijudge.cli import app
from scijudge.records import JudgeResult
from scijudge.run.store import Run

JUDGE = "yescieval.qa.correctness"


def _workspace(tmp_path: Path, n: int = 120) -> dict[str, Path]:
    rng = np.random.default_rng(0)
    items, labels = [], []
    with Run(tmp_path / "run.sqlite") as run:
        for i in range(n):
            system = "A" if i % 2 == 0 else "B"
            human = float(rng.integers(2, 6)) if system == "A" else float(rng.integers(1, 5))
            items.append({"id": f"i{i}", "answer": "An answer.", "meta": {"system": system, "question": f"q{i // 2}"}})
            if i % 37 == 5:
                run.record(JudgeResult(item_id=f"i{i}", judge=JUDGE, family="likert", spec_hash="h", model="judge-m",
                                       status="abstained", reason="no valid answer"))
            else:
                score = float(np.clip(human + (1 if rng.random() < 0.6 else 0), 1, 5))
                run.record(JudgeResult(item_id=f"i{i}", judge=JUDGE, family="likert", spec_hash="h", model="judge-m",
                                       status="ok", score=score))
            if i % 3 == 0:
                labels.append({"item_id": f"i{i}", "judge": JUDGE, "score": human})
    (tmp_path / "items.jsonl").write_text("".join(json.dumps(x) + "\n" for x in items))
    labels.append({"item_id": "i500", "judge": JUDGE, "score": 3.0})  # labelled, never judged
    items_extra = {"id": "i500", "answer": "Another.", "meta": {"system": "B", "question": "q250"}}
    with (tmp_path / "items.jsonl").open("a") as handle:
        handle.write(json.dumps(items_extra) + "\n")
    (tmp_path / "labels.jsonl").write_text("".join(json.dumps(x) + "\n" for x in labels))
    return {"run": tmp_path / "run.sqlite", "items": tmp_path / "items.jsonl", "labels": tmp_path / "labels.jsonl"}


@pytest.mark.slow
def test_estimate_command_writes_tables(tmp_path: Path) -> None:
    paths = _workspace(tmp_path)
    out = tmp_path / "est"
    result = CliRunner().invoke(app, ["estimate", "--run", str(paths["run"]), "--labels", str(paths["labels"]),
                                      "--items", str(paths["items"]), "--by", "system", "--compare", "A", "B",
                                      "--target-width", "0.5", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "Labels needed for an interval of width 0.5" in result.output
    table = pd.read_csv(out / "estimate.csv", keep_default_na=False)
    for column in ("judge", "model", "group", "method", "estimate", "lo", "hi", "n_labeled", "n_unlabeled"):
        assert column in table.columns
    assert set(table["group"]) == {"A", "B", "A - B"}
    assert set(table["method"]) == {"ppi", "ppi-cal", "human-only", "judge-only"}
    ppi_b = table[(table["group"] == "B") & (table["method"] == "ppi")].iloc[0]
    # B: 60 items; i5, i79 abstained (i % 37 == 5); the label on i500 has no judgment
    assert ppi_b["n_abstained"] == 2 and ppi_b["n_label_only"] == 1
    assert ppi_b["n_labeled"] + ppi_b["n_unlabeled"] == 58
    diff = table[table["group"] == "A - B"]
    assert set(diff["paired"].astype(str)) == {"False"}  # different items in A and B, no --pair-by
    sets = pd.read_csv(out / "conformal.csv")
    assert len(sets) == 120 - 4 and {"score", "set", "set_lo", "set_hi"} <= set(sets.columns)
    coverage = pd.read_csv(out / "conformal_coverage.csv")
    assert coverage["n_calibration"].iloc[0] == 40 - 1  # i42 is labelled but abstained (i5, i79, i116 unlabelled)
    assert (out / "labels_needed.csv").exists()
    page = (out / "estimate.html").read_text()
    assert "Estimates of the mean human score" in page and "data:image/png;base64," in page


@pytest.mark.slow
def test_estimate_groups_by_run_and_pairs_by_question(tmp_path: Path) -> None:
    paths = _workspace(tmp_path)
    result = CliRunner().invoke(app, ["estimate", "--run", str(paths["run"]), "--labels", str(paths["labels"])])
    assert result.exit_code == 0, result.output
    assert "run" in result.output  # the group is the run's name
    out = tmp_path / "paired"
    result = CliRunner().invoke(app, ["estimate", "-r", str(paths["run"]), "-l", str(paths["labels"]), "--items",
                                      str(paths["items"]), "--by", "system", "--pair-by", "question", "--compare",
                                      "A", "B", "--out", str(out)])
    assert result.exit_code == 0, result.output
    table = pd.read_csv(out / "estimate.csv")
    assert table.loc[table["kind"] == "difference", "paired"].all()


@pytest.mark.parametrize(("extra", "message"), [
    (["--by", "system"], "give the items file with --items"),
    (["--items", "ITEMS", "--by", "nope"], "has no meta field 'nope'"),
    (["--items", "ITEMS", "--by", "system", "--compare", "A", "Z"], "no group named 'Z'"),
    (["--alpha", "1.5"], "--alpha must be between 0 and 1"),
])
def test_estimate_command_errors_are_one_line(tmp_path: Path, extra: list[str], message: str) -> None:
    paths = _workspace(tmp_path, n=12)
    extra = [str(paths["items"]) if e == "ITEMS" else e for e in extra]
    result = CliRunner().invoke(app, ["estimate", "--run", str(paths["run"]), "--labels", str(paths["labels"]),
                                      *extra])
    assert result.exit_code == 2
    assert message in " ".join(result.output.split()) and "Traceback" not in result.output
