"""`estimate`: the mean human rating as estimand (checked by simulation), continuous and stored scales, comparisons
across models and judges, unmatched labels, CSV when piped and files written before printing."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from scijudge.cli import app
from scijudge.records import JudgeResult
from scijudge.run.store import Run

J1, J2 = "yescieval.qa.correctness", "yescieval.qa.completeness"


def _workspace(tmp_path: Path, n: int = 60, *, continuous: bool = False) -> dict[str, Path]:
    rng = np.random.default_rng(7)
    labels = []
    for model in ("m-a", "m-b"):
        with Run(tmp_path / f"{model}.sqlite") as run:
            for i in range(n):
                for judge in (J1, J2):
                    truth = float(rng.integers(1, 6))
                    score = float(np.clip(truth + rng.integers(-1, 2), 1, 5))
                    if continuous:
                        score = float(np.clip(truth + rng.choice([-2, -1, 0, 1]) / 3, 1, 5))
                    run.record(JudgeResult(item_id=f"i{i}", judge=judge, family="likert", spec_hash="h", model=model,
                                           status="ok", score=score))
    rng = np.random.default_rng(8)
    for i in range(0, n, 2):
        for judge in (J1, J2):
            for ann in ("a", "b", "c"):
                labels.append({"item_id": f"i{i}", "judge": judge, "annotator": ann, "score": float(rng.integers(1, 6))})
    (tmp_path / "labels.jsonl").write_text("".join(json.dumps(x) + "\n" for x in labels))
    return {"a": tmp_path / "m-a.sqlite", "b": tmp_path / "m-b.sqlite", "labels": tmp_path / "labels.jsonl"}


def _csv_tables(output: str) -> dict[str, pd.DataFrame]:
    """The piped output: '# title' lines, each followed by one CSV table."""
    tables, title, lines = {}, None, []
    for line in output.splitlines() + ["# end"]:
        if line.startswith("# "):
            if title is not None and lines:
                tables[title] = pd.read_csv(io.StringIO("\n".join(lines)))
            title, lines = line[2:], []
        elif line.strip() and title is not None and not line.startswith(("warning", "estimates written")):
            lines.append(line)
    return tables


def test_default_estimand_is_the_mean_rating_and_median_is_an_option(tmp_path: Path) -> None:
    paths = _workspace(tmp_path)
    labels = pd.read_json(paths["labels"], lines=True)
    per_item = labels[labels["judge"] == J1].groupby("item_id")["score"]
    done = CliRunner().invoke(app, ["estimate", "-r", str(paths["a"]), "-l", str(paths["labels"]), "-j", J1])
    assert done.exit_code == 0, done.output
    (title, table), *_ = _csv_tables(done.output).items()
    assert title.startswith("Estimated mean human rating")
    human = table[table["method"] == "human-only"].iloc[0]
    assert human["estimate"] == pytest.approx(per_item.mean().mean()) and human["estimand"] == "mean human rating"
    median = CliRunner().invoke(app, ["estimate", "-r", str(paths["a"]), "-l", str(paths["labels"]), "-j", J1,
                                      "--human", "median"])
    table = next(iter(_csv_tables(median.output).values()))
    snapped = np.clip(np.round(per_item.median()), 1, 5)  # medians of three integers are integers already
    assert table[table["method"] == "human-only"].iloc[0]["estimate"] == pytest.approx(snapped.mean())


@pytest.mark.slow
def test_mean_rating_intervals_cover_by_simulation() -> None:
    """3 ratings per item, 100 labelled of 1,000, 100 label sets: 90% PPI++ intervals cover the mean rating ~90%."""
    from scijudge.estimation import estimate

    rng = np.random.default_rng(11)
    n = 1000
    quality = rng.uniform(1, 5, n)
    ratings = np.clip(np.rint(quality[:, None] + rng.normal(0, 1.0, (n, 3))), 1, 5)
    target = ratings.mean(axis=1).mean()
    judge = np.clip(np.rint(quality + rng.normal(0.4, 0.7, n)), 1, 5)
    judgments = pd.DataFrame({"item_id": [f"s{i}" for i in range(n)], "judge": J1, "part": "", "family": "likert",
                              "spec_hash": "h", "model": "m", "status": "ok", "score": judge, "verdict": None,
                              "source": "run"})
    hits = 0
    reps = 100
    for _ in range(reps):
        chosen = rng.choice(n, 100, replace=False)
        labels = pd.DataFrame([{"item_id": f"s{i}", "judge": J1, "annotator": str(a), "score": ratings[i, a]}
                               for i in chosen for a in range(3)])
        table = estimate(judgments, labels, alpha=0.1, scale=(1, 5, 1))
        row = table[table["method"] == "ppi"].iloc[0]
        hits += row["lo"] <= target <= row["hi"]
    assert hits / reps >= 0.82  # binomial SE 0.03 at 90%; the median-consensus target covered 49.5% in the story study


def test_continuous_scale_and_comparisons_across_models_and_judges(tmp_path: Path) -> None:
    paths = _workspace(tmp_path, continuous=True)
    base = ["estimate", "-r", str(paths["a"]), "-r", str(paths["b"]), "-l", str(paths["labels"])]
    refused = CliRunner().invoke(app, base)
    assert refused.exit_code == 2 and "continuous" in refused.output
    done = CliRunner().invoke(app, [*base, "--scale", "1,5,1,continuous", "--compare", "m-a", "m-b"])
    assert done.exit_code == 0, done.output
    table = next(iter(_csv_tables(done.output).values()))
    diff = table[table["kind"] == "difference"]
    assert set(diff["model"]) == {"m-a - m-b"} and diff["paired"].astype(str).eq("True").all()
    # the same labels on both sides: the human-only difference of the mean rating is exactly zero
    assert diff[diff["method"] == "human-only"]["estimate"].abs().max() == pytest.approx(0.0)
    judges = CliRunner().invoke(app, [*base, "--scale", "1,5,1,continuous", "--compare", J1, J2])
    assert judges.exit_code == 0, judges.output
    table = next(iter(_csv_tables(judges.output).values()))
    row = table[(table["judge"] == f"{J1} - {J2}") & (table["method"] == "human-only")].iloc[0]
    labels = pd.read_json(paths["labels"], lines=True)
    means = labels.groupby(["judge", "item_id"])["score"].mean().unstack(0)
    assert row["estimate"] == pytest.approx((means[J1] - means[J2]).mean())
    assert bool(row["paired"]) is True


def test_unmatched_labels_are_an_error_or_a_counted_warning(tmp_path: Path) -> None:
    paths = _workspace(tmp_path, n=10)
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"item_id": "zzz", "judge": J1, "score": 3}) + "\n")
    refused = CliRunner().invoke(app, ["estimate", "-r", str(paths["a"]), "-l", str(other)])
    assert refused.exit_code == 2 and "no judgment matches a label" in refused.output
    extra = tmp_path / "extra.jsonl"
    extra.write_text(paths["labels"].read_text() + json.dumps({"item_id": "i0", "judge": "no.such.judge",
                                                               "score": 3}) + "\n")
    done = CliRunner().invoke(app, ["estimate", "-r", str(paths["a"]), "-l", str(extra)])
    assert done.exit_code == 0 and "1 label(s) of judge(s) no run has were left out: no.such.judge" in done.output


@pytest.mark.slow
def test_files_are_written_before_printing_into_a_closed_pipe(tmp_path: Path) -> None:
    paths = _workspace(tmp_path)
    out = tmp_path / "est"
    code = ("import sys; from scijudge.cli import app; sys.argv = ['scijudge'] + sys.argv[1:]; app()")
    command = [sys.executable, "-c", code, "estimate", "-r", str(paths["a"]), "-l", str(paths["labels"]),
               "--out", str(out)]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        proc.stdout.close()  # what `| head -1` does
        proc.wait(timeout=300)
        errors = proc.stderr.read() if proc.stderr else b""
    assert first.startswith(b"#") and (out / "estimate.csv").exists() and (out / "estimate.html").exists()
    assert b"Traceback" not in errors
