"""The labelling loop: labels in the order given (labelled_at, else file order), one sequence per (judge, model)
and one over a judge's models at once, sequential.csv's columns, and where it stops (API and CLI)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from typer.testing import CliRunner

from scijudge.cli import app
from scijudge.estimation import anytime
from scijudge.estimation.sequential import SEQUENTIAL_COLUMNS, label_order, sequential
from scijudge.records import JudgeResult
from scijudge.run.store import Run

JUDGE = "yescieval.qa.correctness"


def _study(tmp_path: Path, n: int = 300, stamps: bool = False) -> tuple[pd.DataFrame, list[dict], Path, Path]:
    rng = np.random.default_rng(1)
    human = rng.integers(1, 6, n).astype(float)
    rows, labels = [], []
    for i in range(n):
        for model, noise in (("m-a", 0.5), ("m-b", 1.0)):
            score = float(np.clip(np.round(human[i] + rng.normal(0, noise)), 1, 5))
            rows.append(JudgeResult(item_id=f"i{i}", judge=JUDGE, family="likert", spec_hash="h", model=model,
                                    status="ok", score=score))
    for k, i in enumerate(rng.permutation(n)[:200]):
        label = {"item_id": f"i{i}", "judge": JUDGE, "score": float(human[i])}
        if stamps:  # given in reverse time order: the loop must follow the timestamps, not the file
            label["labelled_at"] = f"2026-01-01T00:{(199 - k) // 60:02d}:{(199 - k) % 60:02d}+00:00"
        labels.append(label)
    run_path = tmp_path / "run.sqlite"
    with Run(run_path) as run:
        for r in rows:
            run.record(r)
        frame = run.to_pandas()
    labels_path = tmp_path / "labels.jsonl"
    labels_path.write_text("".join(json.dumps(x) + "\n" for x in labels))
    return frame, labels, run_path, labels_path


def test_label_order_follows_timestamps_else_rows() -> None:
    rows = pd.DataFrame({"item_id": ["a", "b", "a", "c"], "judge": [JUDGE] * 4, "part": [None] * 4,
                         "labelled_at": ["2026-01-01T00:00:03Z", "2026-01-01T00:00:01Z", "2026-01-01T00:00:00Z",
                                         "2026-01-01T00:00:02Z"]})
    assert label_order(rows) == {("a", JUDGE, ""): 0.0, ("b", JUDGE, ""): 1.0, ("c", JUDGE, ""): 2.0}
    rows.loc[1, "labelled_at"] = None  # one label without a time: file order for all
    assert label_order(rows) == {("a", JUDGE, ""): 0.0, ("b", JUDGE, ""): 1.0, ("c", JUDGE, ""): 3.0}


def test_sequences_per_model_and_joint_follow_the_label_order(tmp_path: Path) -> None:
    from scijudge.labels import labels_to_frame, load_labels

    frame, labels, _, labels_path = _study(tmp_path, stamps=True)
    table = sequential(frame, load_labels(labels_path), target_width=0.6, alpha=0.1)
    assert table.equals(sequential(frame, labels_to_frame(load_labels(labels_path)).assign(
        labelled_at=[x["labelled_at"] for x in labels]), target_width=0.6, alpha=0.1))
    assert list(table.columns) == SEQUENTIAL_COLUMNS
    assert set(table["model"]) == {"m-a", "m-b", "m-a + m-b"}
    one = table[table["model"] == "m-a"]
    assert list(one["n"]) == list(range(1, 201))
    # by hand: m-a's sequence on the labels sorted by time (the file holds them newest first)
    scores = frame[frame["model"] == "m-a"].set_index("item_id")["score"]
    ordered = sorted(labels, key=lambda x: x["labelled_at"])
    y = np.array([x["score"] for x in ordered])
    f = scores.loc[[x["item_id"] for x in ordered]].to_numpy(float)
    expected = anytime.ppi_sequence(y, f, scores.mean(), 0.1, bounds=(1.0, 5.0))
    np.testing.assert_allclose(one["estimate"], expected.estimate, rtol=0, atol=1e-12)
    np.testing.assert_allclose(one["lo"], expected.lo, rtol=0, atol=1e-12)
    stops = {s["model"]: s for s in table.attrs["stops"]}
    assert stops["m-a"]["stop"] == expected.stop(0.6)
    width = one["hi"] - one["lo"]
    assert width.iloc[: anytime.DEFAULT_START - 1].isna().all() and width.iloc[anytime.DEFAULT_START - 1] > 0
    # the better judge (less noise) and the two at once need fewer labels than the labels alone would
    human_only = anytime.ppi_sequence(y, f, scores.mean(), 0.1, bounds=(1.0, 5.0), human_only=True).stop(0.6)
    assert stops["m-a"]["stop"] is not None and (human_only is None or stops["m-a"]["stop"] < human_only)


def test_estimate_sequential_writes_the_sequence_and_says_where_it_stops(tmp_path: Path) -> None:
    _, _, run_path, labels_path = _study(tmp_path)
    out = tmp_path / "seq"
    result = CliRunner().invoke(app, ["estimate", "--run", str(run_path), "--labels", str(labels_path),
                                      "--sequential", "--target-width", "0.6", "--alpha", "0.1", "--out", str(out)],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    written = pd.read_csv(out / "sequential.csv")
    assert list(written.columns) == SEQUENTIAL_COLUMNS and len(written) == 3 * 200
    assert "certain enough at n = " in result.output and "m-a + m-b" in result.output
    first = written[written["model"] == "m-a"].set_index("n")
    assert f"path: n=20 {first.at[20, 'estimate']:.3f} [{first.at[20, 'lo']:.3f}, {first.at[20, 'hi']:.3f}]" \
        in result.output
    missing = CliRunner().invoke(app, ["estimate", "--run", str(run_path), "--labels", str(labels_path),
                                       "--sequential"])
    assert missing.exit_code != 0 and "--sequential needs --target-width" in missing.output


def test_certainty_uses_each_judges_joint_sequence_and_stops_when_all_are_narrow(tmp_path: Path) -> None:
    from scijudge.estimation.sequential import certainty

    frame, labels, _, _ = _study(tmp_path)
    lines, stop = certainty(frame, labels[:30], target_width=0.6)
    assert stop is None and len(lines) == 1 and lines[0].startswith(f"{JUDGE} / m-a + m-b: not yet:")
    lines, stop = certainty(frame, labels, target_width=0.6)
    joint = sequential(frame, pd.DataFrame(labels), target_width=0.6).attrs["stops"][-1]
    assert joint["model"] == "m-a + m-b" and joint["stop"] is not None
    assert stop == "certain enough: ±0.3 at 90%" and f"certain enough at n = {joint['stop']}" in lines[0]
    assert certainty(frame, [], target_width=0.6)[1] is None
