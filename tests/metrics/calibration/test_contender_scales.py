"""Issue 35 item 10: each contender is calibrated on its own scale, so adding a mean jury (a continuous scale) to
``calibrate`` never changes its members' figures; the jury's rows are continuous and the report says which."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from scijudge.cli import app
from scijudge.metrics.calibration import POOLED, calibrate

REPO = Path(__file__).resolve().parents[3]
JUDGE = "toy.quality"


def _judgments(model: str, scores: list[float], source: str) -> pd.DataFrame:
    return pd.DataFrame({"item_id": ["i1", "i2", "i3"], "judge": JUDGE, "part": "", "family": "likert",
                         "spec_hash": "toy", "model": model, "status": "ok", "score": scores, "verdict": None,
                         "confidence": np.nan, "probs": None, "source": source})


# three items, two annotators each: medians 2.5, 4.5 and 1 (snapped half-to-even on 1..5 step 1: 3, 5, 1)
LABELS = pd.DataFrame({"item_id": ["i1", "i1", "i2", "i2", "i3", "i3"], "judge": JUDGE, "part": "",
                       "score": [2.0, 3.0, 4.0, 5.0, 1.0, 1.0], "annotator": ["x", "y"] * 3})


def test_hand_case_each_contender_on_its_own_scale():
    member = _judgments("member", [3.0, 4.0, 2.0], "members")
    jury = _judgments("jury:mean", [2.5, 4.0, 1.5], "jury")
    run_scales = {"jury": {JUDGE: "1,5,1,continuous"}}
    both = calibrate(pd.concat([member, jury], ignore_index=True), LABELS, n_boot=0, run_scales=run_scales)
    board = both.leaderboard.set_index("contender")
    # member vs the snapped medians (3, 5, 1): |3-3| + |4-5| + |2-1| = 2 over 3; bias (0 - 1 + 1) / 3 = 0
    assert board.loc["member", "mae"] == 2 / 3 and board.loc["member", "bias"] == 0.0
    assert board.loc["member", "scale"] == "1..5 step 1"
    # jury vs the raw medians (2.5, 4.5, 1): 0 + 0.5 + 0.5 = 1 over 3; bias (0 - 0.5 + 0.5) / 3 = 0
    assert math.isclose(board.loc["jury:mean", "mae"], 1 / 3) and board.loc["jury:mean", "bias"] == 0.0
    assert board.loc["jury:mean", "scale"] == "1..5 step 1 (continuous)"
    assert any("each contender is calibrated on its own scale: jury:mean" in n for n in both.notes)
    alone = calibrate(member, LABELS, n_boot=0).leaderboard.set_index("contender")
    pd.testing.assert_series_equal(alone.loc["member"], board.loc["member"].reindex(alone.columns))


def _panel_and_jury(tmp_path: Path) -> tuple[Path, Path]:
    """The bundled jury panel imported, and its mean jury (a store recording a continuous scale per judge)."""
    runner = CliRunner()
    panel, jury = tmp_path / "panel.sqlite", tmp_path / "jury.sqlite"
    for args in (["import-judgments", str(REPO / "datasets" / "jury_example" / "panel.jsonl"), "--run", str(panel)],
                 ["jury", str(panel), "-m", "judge-a", "-m", "judge-b", "-m", "judge-c", "--method", "mean",
                  "--name", "panel", "--out", str(jury)]):
        done = runner.invoke(app, args)
        assert done.exit_code == 0, done.output
    return panel, jury


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    return _panel_and_jury(tmp_path_factory.mktemp("panel"))


def _calibrate_stores(paths: list[Path], n_boot: int) -> object:
    """What ``scijudge calibrate`` does with the stores: their rows with a source, and each one's stored scales."""
    from scijudge.labels import load_labels_frame
    from scijudge.run.store import Run

    frames, run_scales = [], {}
    for path in paths:
        with Run(path, create=False) as store:
            frames.append(store.to_pandas().assign(source=path.stem))
            run_scales[path.stem] = dict(store.meta().get("scales") or {})
    return calibrate(pd.concat(frames, ignore_index=True), load_labels_frame(LABELS_FILE), n_boot=n_boot,
                     run_scales=run_scales)


@pytest.mark.slow  # seconds: the fast subset stays under a minute
def test_members_bit_for_bit_beside_their_jury(stores):
    panel, jury = stores
    alone = _calibrate_stores([panel], 20)
    both = _calibrate_stores([panel, jury], 20)
    for table in ("leaderboard", "per_rubric", "confusion"):  # MAE, bias, κ and their intervals; the matrices
        old, new = getattr(alone, table), getattr(both, table)
        for member in ("judge-a", "judge-b", "judge-c"):
            want = old[old["contender"] == member].drop(columns="rank", errors="ignore").reset_index(drop=True)
            got = new[new["contender"] == member].drop(columns="rank", errors="ignore").reset_index(drop=True)
            assert len(want)
            pd.testing.assert_frame_equal(got[want.columns], want, check_exact=True)
    conf = both.confusion
    assert set(conf.loc[conf["contender"] == "judge-a", "track"]) == {"1..5 step 1"}
    assert set(conf.loc[conf["contender"] == "jury:panel", "track"]) == {"1..5 step 1 (continuous)"}
    rubric = both.per_rubric
    assert set(rubric.loc[rubric["contender"] == "jury:panel", "scale"]) == {"1..5 step 1 (continuous)"}


LABELS_FILE = REPO / "datasets" / "yescieval_example" / "labels.jsonl"


def _records(report: dict, table: str, contender: str) -> list[dict]:
    return [r for r in report[table] if r.get("contender") == contender]


@pytest.mark.slow
def test_report_names_each_contenders_scale(tmp_path, stores):
    runner = CliRunner()
    panel, jury = stores
    labels = LABELS_FILE
    reports = {}
    for name, runs in (("alone", [panel]), ("both", [panel, jury])):
        out = tmp_path / name
        done = runner.invoke(app, ["calibrate", "--labels", str(labels), *sum((["--run", str(r)] for r in runs), []),
                                   "--n-boot", "200", "--out", str(out)])
        assert done.exit_code == 0, done.output
        reports[name] = json.loads((out / "report.json").read_text())
    alone, both = reports["alone"], reports["both"]
    for member in ("judge-a", "judge-b", "judge-c"):
        for table in ("leaderboard", "per_rubric", "confusion"):  # MAE, bias, kappa, intervals, matrices
            assert _records(alone, table, member) == _records(both, table, member), (member, table)
            assert _records(alone, table, member)
    a = _records(both, "leaderboard", "judge-a")[0]
    assert a["scale"] == "1..5 step 1" and round(a["mae"], 3) == 0.520 and round(a["bias"], 3) == 0.441
    assert {r["track"] for r in _records(both, "confusion", "judge-a")} == {"1..5 step 1"}
    jury_rows = _records(both, "per_rubric", "jury:panel")
    assert jury_rows and {r["scale"] for r in jury_rows} == {"1..5 step 1 (continuous)"}
    assert _records(both, "leaderboard", "jury:panel")[0]["scale"] == "1..5 step 1 (continuous)"
    assert any("jury:panel on 1..5 step 1 (continuous)" in n for n in both["notes"])
    # the jury is compared with the raw human median: its pooled MAE from the stored rows, by hand
    judged = pd.read_json(REPO / "datasets" / "yescieval_example" / "labels.jsonl", lines=True)
    median = judged.groupby(["item_id", "judge"])["score"].median()
    from scijudge.run.store import Run

    with Run(jury, create=False) as store:
        rows = store.to_pandas()
    rows = rows[rows["status"] == "ok"].set_index(["item_id", "judge"])
    common = rows.index.intersection(median.index)
    mae = float(np.mean(np.abs(rows.loc[common, "score"].to_numpy(float) - median.loc[common].to_numpy(float))))
    pooled = [r for r in _records(both, "leaderboard", "jury:panel") if r["judge"] == POOLED][0]
    assert math.isclose(pooled["mae"], mae, rel_tol=1e-12)


def test_runs_recording_different_grids_for_one_judge_are_refused():
    from scijudge.errors import InputError

    a = _judgments("a", [3.0, 4.0, 2.0], "ra")
    b = _judgments("b", [3.0, 4.0, 2.0], "rb")
    with pytest.raises(InputError, match="different scales in the runs: 1..5 step 1 .*1..5 step 0.5"):
        calibrate(pd.concat([a, b], ignore_index=True), LABELS, n_boot=0,
                  run_scales={"ra": {JUDGE: "1,5,1"}, "rb": {JUDGE: "1,5,0.5,continuous"}})


def test_a_run_with_no_recorded_scale_and_no_known_spec_takes_the_recorded_grid():
    a = _judgments("a", [3.0, 4.5, 2.0], "ra")  # 4.5: on the recorded 0.5 grid, not on the family's 1..5 step 1
    b = _judgments("b", [3.0, 4.0, 2.0], "rb")
    result = calibrate(pd.concat([a, b], ignore_index=True), LABELS, n_boot=0, run_scales={"ra": {JUDGE: "1,5,0.5"}})
    board = result.leaderboard.set_index("contender")
    assert set(board["scale"]) == {"1..5 step 0.5"}
    # on the 0.5 grid the consensus keeps the medians 2.5, 4.5, 1: b's MAE is (0.5 + 0.5 + 1) / 3
    assert math.isclose(board.loc["b", "mae"], 2 / 3)


@pytest.mark.slow  # seconds: the fast subset stays under a minute
def test_the_viewers_calibration_is_calibrates_and_keeps_members_beside_their_jury(stores):
    """``scijudge view``'s calibration page reads the stores as ``scijudge calibrate`` does: the members' figures
    beside their mean jury are those of the panel calibrated alone (it once merged the stored scales by judge)."""
    pytest.importorskip("starlette")
    from scijudge.labels import load_labels_frame
    from scijudge.view.figures import calibration_result, judgments_frame

    panel, jury = stores
    judgments, _merged, run_scales = judgments_frame([panel, jury])
    viewed = calibration_result(judgments, load_labels_frame(LABELS_FILE), run_scales, n_boot=20).leaderboard
    alone = _calibrate_stores([panel], 20).leaderboard
    for member in ("judge-a", "judge-b", "judge-c"):
        want = alone[alone["contender"] == member].drop(columns="rank").reset_index(drop=True)
        got = viewed[viewed["contender"] == member].drop(columns="rank").reset_index(drop=True)
        assert len(want)
        pd.testing.assert_frame_equal(got[want.columns], want, check_exact=True)


@pytest.mark.slow  # seconds: the fast subset stays under a minute
def test_paired_mae_on_a_continuous_scale_uses_the_raw_values_like_the_per_rubric_row() -> None:
    """One rule: on a continuous scale MAE is on raw values everywhere, the paired comparison included (it was on
    grid-rounded values while the per-rubric MAE used raw ones). Checked against scikit-learn's MAE on the raw
    values, and the bootstrap interval of the difference against a paired t interval over items."""
    from scipy import stats
    from sklearn.metrics import mean_absolute_error

    from scijudge.metrics.calibration import calibrate

    rng = np.random.default_rng(0)
    rows, labels = [], []
    for k in range(80):
        h = round(float(rng.uniform(1, 5)), 2)
        labels.append({"item_id": f"i{k}", "judge": "j", "score": h})
        for model, noise in (("a", 0.5), ("b", 0.9)):
            rows.append({"item_id": f"i{k}", "judge": "j", "model": model,
                         "score": float(np.clip(h + rng.normal(0, noise), 1, 5))})
    judgments, human = pd.DataFrame(rows), pd.DataFrame(labels)
    result = calibrate(judgments, human, scale=(1, 5, 1, "continuous"), n_boot=500)
    paired = result.paired.set_index(["judge", "metric"]).loc[("j", "mae")]
    per = result.per_rubric.set_index("contender")
    errors = {m: np.abs(judgments[judgments["model"] == m]["score"].to_numpy() - human["score"].to_numpy())
              for m in ("a", "b")}
    for side, model in (("value_a", "a"), ("value_b", "b")):
        raw = mean_absolute_error(human["score"], judgments[judgments["model"] == model]["score"])
        assert paired[side] == pytest.approx(raw, abs=1e-12) == pytest.approx(per.loc[model, "mae"], abs=1e-12)
    d = errors["a"] - errors["b"]
    half = stats.t.ppf(0.975, d.size - 1) * d.std(ddof=1) / np.sqrt(d.size)
    assert paired["diff_lo"] == pytest.approx(d.mean() - half, abs=0.3 * half)
    assert paired["diff_hi"] == pytest.approx(d.mean() + half, abs=0.3 * half)
