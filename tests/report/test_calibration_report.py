"""The calibration report: self-contained HTML, JSON with the same numbers, console summary, CLI function."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from rich.console import Console

from scijudge.errors import InputError
from scijudge.metrics.calibration import calibrate
from scijudge.metrics.robustness import robustness_table
from scijudge.report.calibration import print_summary, render_html, report_dict, write_report

JUDGES = ["yescieval.qa.correctness", "yescieval.qa.completeness"]


def _frames(seed: int = 0, n: int = 40) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    rows, labels = [], []
    for i in range(n):
        for judge in JUDGES:
            h = float(rng.integers(1, 6))
            for ann in ("a", "b"):
                labels.append({"item_id": f"q{i}", "judge": judge, "annotator": ann,
                               "score": float(np.clip(h + rng.integers(-1, 2), 1, 5))})
            for model, noise in (("model-a", 0), ("model-b", 2)):
                score = float(np.clip(h + rng.integers(-noise, noise + 1) + 1, 1, 5))
                rows.append({"item_id": f"q{i}", "judge": judge, "part": "", "family": "likert", "spec_hash": "h1",
                             "model": model, "status": "ok", "score": score, "verdict": None,
                             "confidence": float(rng.uniform(0.4, 1.0)), "probs": None})
                for kind in ("correctness", "injection"):
                    rows.append({**rows[-1], "item_id": f"q{i}::{kind}::extreme", "score": max(1.0, score - 1)})
    frame = pd.DataFrame(rows)
    return frame, pd.DataFrame(labels)


@pytest.fixture(scope="module")
def report_inputs() -> tuple:
    judgments, labels = _frames()
    base = judgments[~judgments["item_id"].str.contains("::")]
    return calibrate(base, labels, n_boot=200), robustness_table(judgments, n_boot=100).table


@pytest.mark.slow
def test_html_is_self_contained_with_plots(report_inputs: tuple, tmp_path: Path) -> None:
    result, rob = report_inputs
    paths = write_report(result, tmp_path / "rep", rob)
    page = paths["html"].read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)  # nothing fetched from a network
    assert "<link" not in page and "<script" not in page
    images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(images) >= 4  # forest plot, confusion matrices, reliability diagrams, robustness bars
    assert all(base64.b64decode(i)[:8] == b"\x89PNG\r\n\x1a\n" for i in images)
    for heading in ("Leaderboard", "Per rubric", "Confusion matrices", "Reliability diagrams", "Human ceiling",
                    "Paired comparisons", "Robustness"):
        assert heading in page
    assert "model-a" in page and "model-b" in page
    assert {"leaderboard", "per_rubric", "paired", "robustness"} <= set(paths)


@pytest.mark.slow
def test_json_holds_the_same_numbers(report_inputs: tuple, tmp_path: Path) -> None:
    result, rob = report_inputs
    paths = write_report(result, tmp_path / "rep", rob)
    data = json.loads(paths["json"].read_text())  # strict JSON: NaN would not parse back as a number
    assert data["settings"]["n_boot"] == 200
    for key in ("leaderboard", "per_rubric", "human_ceiling", "paired", "confusion", "reliability", "robustness"):
        assert data[key], key
    by_contender = {r["contender"]: r for r in data["leaderboard"]}
    for _, row in result.leaderboard.iterrows():
        assert by_contender[row["contender"]]["kappa_w"] == pytest.approx(row["kappa_w"])
        assert by_contender[row["contender"]]["bias_lo"] == pytest.approx(row["bias_lo"])
    assert len(data["robustness"]) == len(rob)
    json.dumps(report_dict(result, rob), allow_nan=False)


@pytest.mark.slow
def test_console_summary(report_inputs: tuple) -> None:
    result, rob = report_inputs
    console = Console(record=True, width=160)
    print_summary(result, rob, console)
    text = console.export_text()
    assert "Calibration leaderboard" in text and "model-a" in text and "Robustness" in text
    assert "Paired comparisons" in text


@pytest.mark.slow
def test_render_html_escapes_names() -> None:
    judgments, labels = _frames(n=12)
    judgments = judgments[~judgments["item_id"].str.contains("::")].copy()
    judgments["model"] = judgments["model"].str.replace("model-a", "<b>evil</b>")
    page = render_html(calibrate(judgments, labels, n_boot=20))
    assert "<b>evil</b>" not in page and "&lt;b&gt;evil&lt;/b&gt;" in page


def _store(path: Path, frame: pd.DataFrame) -> Path:
    from scijudge.records import JudgeResult
    from scijudge.run.store import Run

    with Run(path) as run:
        for record in frame.to_dict(orient="records"):
            run.record(JudgeResult.model_validate({k: v for k, v in record.items() if k != "source"}))
    return path


@pytest.mark.slow
def test_calibrate_cmd_end_to_end(tmp_path: Path) -> None:
    from scijudge.commands.calibrate import calibrate_cmd

    judgments, labels = _frames(seed=1, n=15)
    runs = [_store(tmp_path / f"{m}.sqlite", judgments[judgments["model"] == m]) for m in ("model-a", "model-b")]
    label_path = tmp_path / "labels.jsonl"
    label_path.write_text("".join(json.dumps(r) + "\n" for r in labels.to_dict(orient="records")))
    result = calibrate_cmd(labels=label_path, run=runs, judge=["yescieval.qa"], out=tmp_path / "out", scale=None,
                           n_boot=50, seed=0, allow_extra_labels=False)
    assert set(result.leaderboard["contender"]) == {"model-a", "model-b"}
    assert (tmp_path / "out" / "report.html").exists() and (tmp_path / "out" / "robustness.csv").exists()
    with pytest.raises(InputError, match="no judgment in the runs is by a judge matching"):
        calibrate_cmd(labels=label_path, run=runs, judge=["yescieval.dr"], out=None, scale=None, n_boot=0, seed=0,
                      allow_extra_labels=False)
    with pytest.raises(InputError, match="run store not found"):
        calibrate_cmd(labels=label_path, run=[tmp_path / "missing.sqlite"], judge=None, out=None, scale=None,
                      n_boot=0, seed=0, allow_extra_labels=False)
    with pytest.raises(InputError, match="scale must be"):
        calibrate_cmd(labels=label_path, run=runs, judge=None, out=None, scale="1-5", n_boot=0, seed=0,
                      allow_extra_labels=False)


def test_commands_register_on_a_typer_app_with_help_examples(tmp_path: Path) -> None:
    import typer
    from typer.testing import CliRunner

    from scijudge.commands.calibrate import calibrate_cmd, perturb_cmd

    app = typer.Typer()
    app.command("calibrate")(calibrate_cmd)
    app.command("perturb")(perturb_cmd)
    runner = CliRunner()
    for name in ("calibrate", "perturb"):
        result = runner.invoke(app, [name, "--help"])
        assert result.exit_code == 0 and "Example: scijudge " + name in result.output
    items = tmp_path / "items.jsonl"
    items.write_text(json.dumps({"id": "q1", "answer": "One sentence here. However, a second one follows."}) + "\n")
    out = tmp_path / "p.jsonl"
    result = runner.invoke(app, ["perturb", str(items), "--level", "both", "--out", str(out), "--rubric", "integration"])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [x["id"] for x in lines] == ["q1", "q1::integration::subtle", "q1::integration::extreme"]
    assert lines[1]["answer"] == "One sentence here. A second one follows."


@pytest.mark.slow
def test_report_opens_with_a_verdict_per_rubric_holm_checked_by_hand(report_inputs: tuple) -> None:
    from scijudge.report.summary import verdict_summary

    result, _ = report_inputs
    summary = verdict_summary(result)
    scores = summary[summary["track"] == "scores"].set_index("judge")
    assert set(scores.index) == set(JUDGES)
    per = result.per_rubric
    p = []
    for judge in JUDGES:
        sel = per[per["judge"] == judge].sort_values("kappa_w", ascending=False)
        assert scores.loc[judge, "best"] == sel["contender"].iloc[0] == "model-a"  # the low-noise model
        assert scores.loc[judge, "margin"] == pytest.approx(sel["kappa_w"].iloc[0] - sel["kappa_w"].iloc[1])
        paired = result.paired[(result.paired["judge"] == judge) & (result.paired["metric"] == "kappa_w")]
        p.append(float(paired["p"].iloc[0]))
    # Holm by hand over the two rubrics' paired p-values
    order = np.argsort(p)
    expected = np.empty(2)
    expected[order[0]] = min(1.0, 2 * p[order[0]])
    expected[order[1]] = min(1.0, max(expected[order[0]], p[order[1]]))
    np.testing.assert_allclose(scores.loc[JUDGES, "p_holm"], expected)
    page = render_html(result)
    assert page.index("Verdict per rubric") < page.index("Leaderboard")
    assert "yescieval.qa.correctness: best model-a" in page


@pytest.mark.slow
def test_piped_summary_is_csv_with_full_values_and_no_negative_zero(report_inputs: tuple) -> None:
    from scijudge.report.text import fmt_interval, fmt_number

    result, rob = report_inputs
    piped = Console(record=True, width=40)  # not a terminal: CSV, however narrow
    print_summary(result, rob, piped)
    text = piped.export_text()
    assert "…" not in text and "contender,scale" in text.replace("rank,", "")
    kappa = result.leaderboard["kappa_w"].iloc[0]
    assert f"{float(kappa):.12g}" in text  # 12 significant digits (no float noise), not 3 decimals
    terminal = Console(record=True, width=200, force_terminal=True)
    print_summary(result, rob, terminal)
    assert "┃" in terminal.export_text() or "│" in terminal.export_text()
    assert fmt_number(-0.0001) == "0.000" and fmt_number(-0.0) == "0.000" and fmt_number(-0.0006) == "-0.001"
    assert fmt_interval(-0.0001, 0.0) == "[0.000, 0.000]"
    from scijudge.report.calibration import _with_ci
    from scijudge.report.page import html_table

    frame = result.per_rubric.copy()
    frame[["bias", "bias_lo", "bias_hi"]] = [-1e-9, -1e-9, 1e-9]
    shown = html_table(_with_ci(frame, [("judge", None), ("bias", None)]))
    assert "0.000 [0.000, 0.000]" in shown and "-0.000" not in shown


def test_interval_columns_read_each_row_as_iterrows_does(report_inputs: tuple) -> None:
    """``_with_ci`` reads the frame's rows from one array (``frame.values``, what ``iterrows`` wraps per row): the
    same texts as row by row, for every result frame and for frames of one type, of objects and with gaps."""
    from scijudge.report.calibration import _with_ci, _with_ci_by_rows

    result, _ = report_inputs
    frames = [frame for frame in result.frames().values() if frame is not None and not frame.empty]
    gaps = pd.DataFrame({"n": [1, 2], "x": [0.5, np.nan], "x_lo": [0.1, None], "x_hi": [0.9, 1.0]})
    frames += [gaps, gaps[["n"]], gaps.astype(object), pd.DataFrame({"s": ["a", None], "n": [3, 4]})]
    for frame in frames:
        columns = [(c, None) for c in frame.columns if not str(c).endswith(("_lo", "_hi"))]
        assert _with_ci(frame, columns).equals(_with_ci_by_rows(frame, columns))
    repeated = pd.DataFrame([[1.0, 2.0]], columns=["x", "x"])
    assert _with_ci(repeated, [("x", None)]).equals(_with_ci_by_rows(repeated, [("x", None)]))


def test_confusion_tables_are_the_results_matrices(report_inputs: tuple) -> None:
    from scijudge.metrics.calibration import POOLED
    from scijudge.report.calibration import _confusion_tables

    result, _ = report_inputs
    conf = result.confusion[result.confusion["judge"] != POOLED]
    expected = []
    for (contender, judge, track), _ in conf.groupby(["contender", "judge", "track"], sort=True):
        m = result.confusion_matrix(contender, judge, track)
        m.index = [f"human {v:g}" if isinstance(v, float) else f"human {v}" for v in m.index]
        m.columns = [f"{v:g}" if isinstance(v, float) else str(v) for v in m.columns]
        expected.append(f"<details><summary>{contender} — {judge}</summary>" + m.to_html(escape=True, border=0)
                        + "</details>")
    assert expected and _confusion_tables(result) == "".join(expected)
