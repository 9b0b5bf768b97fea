"""Figure-extraction metric: hand-computed cases, the worst case for empty output, and an independent
brute-force cross-check of the KD-tree distances."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.spatial.distance import cdist

from scijudge.commands.figure_metric import figure_metric_command
from scijudge.errors import InputError
from scijudge.metrics.figures import (
    WORST_DISTANCE,
    figure_metric,
    figure_scores_frame,
    normalize_series_name,
)

W = math.sqrt(2)


def _fig(*series: tuple[str, list[list[float]]], **axes: Any) -> dict[str, Any]:
    return {**axes, "series": [{"name": n, "points": p} for n, p in series]}


def _one(extracted: Any, truth: Any) -> Any:
    (score,) = figure_metric(extracted, truth)
    return score


def test_identical_series_score_zero_distance() -> None:
    truth = _fig(("A", [[0, 0], [1, 3], [2, 1]]), ("B", [[0, 5], [2, 7]]))
    s = _one(truth, truth)
    for attr in ("precision_rmse", "precision_mae", "recall_rmse", "recall_mae", "symmetric_rmse", "symmetric_mae"):
        assert getattr(s, attr) == 0.0
    assert s.score == 1.0 and s.unmatched_truth == [] and s.unmatched_extracted == []


@pytest.mark.parametrize("extracted", [None, {"series": []}, _fig(("A", [])), _fig(("A", []), ("B", []))])
def test_empty_extraction_is_the_worst_case(extracted: Any) -> None:
    truth = _fig(("A", [[0, 0], [1, 1]]), ("B", [[0, 1], [1, 0]]))
    s = _one(extracted, truth)
    assert WORST_DISTANCE == W
    for attr in ("precision_rmse", "precision_mae", "recall_rmse", "recall_mae", "symmetric_rmse", "symmetric_mae"):
        assert getattr(s, attr) == pytest.approx(W)
    assert s.score == pytest.approx(0.0)
    assert {r.status for r in s.series} <= {"missing", "empty"}


def test_empty_is_worse_than_any_real_attempt() -> None:
    truth = _fig(("A", [[0, 0], [1, 1]]))
    far = _one(_fig(("A", [[1e6, -1e6]])), truth)  # absurd, but capped at the worst distance
    assert far.symmetric_rmse == pytest.approx(W)
    near = _one(_fig(("A", [[0.5, 0.5]])), truth)
    empty = _one(None, truth)
    assert near.score > empty.score == 0.0


def test_missing_series_lowers_recall_not_precision() -> None:
    truth = _fig(("A", [[0, 0], [1, 1]]), ("B", [[0, 1], [1, 0]]))
    s = _one(_fig(("A", [[0, 0], [1, 1]])), truth)
    assert s.precision_rmse == 0.0  # everything extracted is right
    assert s.recall_rmse == pytest.approx(W / 2)  # mean over true series of (0, √2)
    assert s.unmatched_truth == ["B"]
    assert [r.status for r in s.series] == ["matched", "missing"]


def test_spurious_series_lowers_precision_and_is_listed() -> None:
    truth = _fig(("A", [[0, 0], [1, 1]]))
    s = _one(_fig(("A", [[0, 0], [1, 1]]), ("Z", [[0, 0]])), truth)
    assert s.recall_rmse == 0.0
    assert s.precision_rmse == pytest.approx(W / 2)
    assert s.unmatched_extracted == ["Z"]


def test_hand_computed_distances() -> None:
    # truth spans 10 x 10 -> normalised (0,0),(1,1); extracted -> (0,.1),(1,1),(1,.9)
    truth = _fig(("A", [[0, 0], [10, 10]]))
    s = _one(_fig(("A", [[0, 1], [10, 10], [10, 9]])), truth).series[0]
    assert s.precision_rmse == pytest.approx(math.sqrt(0.02 / 3))  # distances .1, 0, .1
    assert s.precision_mae == pytest.approx(0.2 / 3)
    assert s.recall_rmse == pytest.approx(math.sqrt(0.01 / 2))  # distances .1, 0
    assert s.recall_mae == pytest.approx(0.05)
    assert s.symmetric_rmse == pytest.approx(math.sqrt(0.03 / 5))  # pooled .1, 0, .1, .1, 0
    assert s.symmetric_mae == pytest.approx(0.06)
    assert s.score == pytest.approx(1 - math.sqrt(0.006) / W)


def test_log_axis_hand_computed() -> None:
    # y on log10: truth 1 -> 0, 100 -> 2 decades (range 2); x range 1. Extracted y=10 sits at 0.5.
    truth = _fig(("A", [[1, 1], [2, 100]]), y_axis={"scale": "log"})
    s = _one(_fig(("A", [[1, 10], [2, 100]])), truth).series[0]
    assert s.precision_rmse == pytest.approx(math.sqrt(0.25 / 2))
    assert s.precision_mae == pytest.approx(0.25)
    # the same extraction read on a linear axis would be 9/99 off, not half the range
    linear = _one(_fig(("A", [[1, 10], [2, 100]])), _fig(("A", [[1, 1], [2, 100]]))).series[0]
    assert linear.precision_mae == pytest.approx((9 / 99) / 2)


def test_dual_axis_uses_each_axis_range() -> None:
    truth = _fig(("left", [[0, 0], [1, 1]]), ("right", [[0, 0], [1, 1000]]), y2_axis={"label": "S"})
    truth["series"][1]["axis"] = "right"
    extracted = _fig(("left", [[0, 0], [1, 1]]), ("right", [[0, 100], [1, 1000]]))
    extracted["series"][1]["axis"] = "right"
    right = _one(extracted, truth).series[1]
    assert right.precision_mae == pytest.approx(0.05)  # 100/1000 on one of two points
    assert not right.axis_mismatch
    extracted["series"][1]["axis"] = "left"
    assert _one(extracted, truth).series[1].axis_mismatch


def test_names_match_after_normalisation() -> None:
    assert normalize_series_name("  Capacity  (mAh g⁻¹) ") == "capacity"
    assert normalize_series_name("ＬＦＰ＿７００ [wt%]") == "lfp 700"
    assert normalize_series_name("Ni(OH)2") == "ni 2"  # bracket stripping is by design; still unique here
    assert normalize_series_name("(a)") == "(a)"  # a name that is only a bracket keeps it
    truth = _fig(("LFP-700 (mAh/g)", [[0, 0], [1, 1]]))
    s = _one(_fig(("lfp-700", [[0, 0], [1, 1]])), truth)
    assert s.series[0].status == "matched" and s.symmetric_rmse == 0.0


def _brute_force(pred: np.ndarray, true: np.ndarray, logx: bool, logy: bool) -> dict[str, float]:
    """Independent reference: transform, scale by the truth's range, all-pairs distances with cdist."""
    p, t = pred.astype(float).copy(), true.astype(float).copy()
    for col, use_log in ((0, logx), (1, logy)):
        if use_log:
            p[:, col], t[:, col] = np.log10(p[:, col]), np.log10(t[:, col])
        lo, span = t[:, col].min(), np.ptp(t[:, col])
        p[:, col], t[:, col] = (p[:, col] - lo) / span, (t[:, col] - lo) / span
    d = cdist(p, t)
    d_p = np.minimum(d.min(axis=1), math.sqrt(2))
    d_r = np.minimum(d.min(axis=0), math.sqrt(2))
    both = np.concatenate([d_p, d_r])
    return {"precision_rmse": np.sqrt(np.mean(d_p**2)), "precision_mae": d_p.mean(),
            "recall_rmse": np.sqrt(np.mean(d_r**2)), "recall_mae": d_r.mean(),
            "symmetric_rmse": np.sqrt(np.mean(both**2)), "symmetric_mae": both.mean()}


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize(("logx", "logy"), [(False, False), (True, False), (False, True), (True, True)])
def test_matches_brute_force_cdist_on_random_series(seed: int, logx: bool, logy: bool) -> None:
    rng = np.random.default_rng(seed)
    n_true, n_pred = int(rng.integers(20, 400)), int(rng.integers(1, 400))
    true = np.column_stack([rng.uniform(1, 500, n_true), rng.lognormal(3, 1.5, n_true)])
    pred = true[rng.integers(0, n_true, n_pred)] * rng.lognormal(0, 0.05, (n_pred, 2))
    if seed == 3:  # some points far outside the truth's box, to exercise the cap
        pred[: max(1, n_pred // 10)] *= 1e4
    axes = {"x_axis": {"scale": "log" if logx else "linear"}, "y_axis": {"scale": "log" if logy else "linear"}}
    s = _one(_fig(("s", pred.tolist())), _fig(("s", true.tolist()), **axes)).series[0]
    expected = _brute_force(pred, true, logx, logy)
    for attr, value in expected.items():
        assert getattr(s, attr) == pytest.approx(value, rel=1e-9, abs=1e-12), attr


def test_mismatched_axis_scale_is_an_error_naming_the_field() -> None:
    truth = _fig(("A", [[1, 1], [2, 2]]), y_axis={"scale": "log"})
    with pytest.raises(InputError) as err:
        figure_metric(_fig(("A", [[1, 1]]), y_axis={"scale": "linear"}), truth, extracted_source="pred.json")
    assert err.value.field == "y_axis.scale" and err.value.file == "pred.json"
    # an extraction that does not state its scale is read on the truth's scale
    assert _one(_fig(("A", [[1, 1], [2, 2]])), truth).symmetric_rmse == 0.0


def test_non_positive_extracted_point_on_log_axis_is_named() -> None:
    truth = _fig(("A", [[1, 1], [2, 2]]), x_axis={"scale": "log"})
    with pytest.raises(InputError) as err:
        figure_metric(_fig(("A", [[1, 1], [-2, 2]])), truth, extracted_source="pred.json")
    assert err.value.field == "series[0].points[1].x"


def test_nan_points_are_rejected_with_the_field() -> None:
    with pytest.raises(InputError) as err:
        figure_metric(_fig(("A", [[0, float("nan")]])), _fig(("A", [[0, 0], [1, 1]])), extracted_source="p.json")
    assert err.value.field == "plot_data.series[0].points" and "points[0].y" in str(err.value)


def test_ambiguous_or_empty_ground_truth_is_an_error() -> None:
    with pytest.raises(InputError) as err:
        figure_metric(None, _fig(("A (V)", [[0, 0]]), ("a", [[1, 1]])), truth_source="t.json")
    assert err.value.field == "series[1].name"
    with pytest.raises(InputError, match="no points"):
        figure_metric(None, _fig(("A", [])))
    with pytest.raises(InputError, match="no series"):
        figure_metric(None, {"series": []})


def test_figures_pair_by_id_and_missing_figure_is_worst() -> None:
    truth = [{"figure": "Fig. 2", **_fig(("A", [[0, 0], [1, 1]]))},
             {"figure": "Fig. 3", **_fig(("B", [[0, 0], [1, 2]]))}]
    extracted = [{"figure": "fig. 3", **_fig(("B", [[0, 0], [1, 2]]))}]
    scores = figure_metric(extracted, truth)
    assert [s.figure for s in scores] == ["Fig. 2", "Fig. 3"]
    assert scores[0].score == 0.0 and scores[1].score == 1.0
    frame = figure_scores_frame(scores)
    assert list(frame["status"]) == ["missing", "matched"]
    with pytest.raises(InputError, match="2 extracted figures but 1"):
        figure_metric([_fig(("A", [[0, 0]])), _fig(("A", [[0, 0]]))], _fig(("A", [[0, 0], [1, 1]])))


def test_ground_truth_subplot_format_is_read() -> None:
    truth = {"subplots": [{"x_label": "t", "y_label": "y", "coordinates": {"A": [[0, 0], [1, 1]]}}]}
    s = _one(_fig(("a", [[0, 0], [1, 1]])), truth)
    assert s.score == 1.0


def test_cli_prints_table_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    truth = tmp_path / "truth.json"
    pred = tmp_path / "pred.json"
    truth.write_text(json.dumps(_fig(("A", [[0, 0], [1, 1]]), ("B", [[0, 1], [1, 0]]))))
    pred.write_text(json.dumps(_fig(("A", [[0, 0], [1, 1]]))))
    figure_metric_command(pred, truth)
    out = capsys.readouterr().out
    assert "missing" in out and "B" in out and "1.4142" in out
    figure_metric_command(pred, truth, as_json=True)
    data = json.loads(capsys.readouterr().out)
    assert data[0]["unmatched_truth"] == ["B"]
    with pytest.raises(InputError) as err:
        figure_metric_command(tmp_path / "nope.json", truth)
    assert err.value.file == str(tmp_path / "nope.json")


# --- issue 16: source-compatible mode and every layout the source accepts ---------------------------------

_OUTLIER_TRUTH = _fig(("A", [[0, 0], [10, 10]]))
_OUTLIER_PRED = _fig(("A", [[0, 0], [10, 10], [10, 60]]))


def test_no_cap_reproduces_lematerial_number_on_an_outlier_by_hand() -> None:
    # Hand computation with LeMaterial's rule: x and y spans of the truth are 10 and 10; the extracted
    # points' nearest true points are at normalised distances 0, 0 and |60-10|/10 = 5.
    # RMSE = sqrt((0 + 0 + 25) / 3) = 2.88675..., MAE = 5 / 3.
    capped = _one(_OUTLIER_PRED, _OUTLIER_TRUTH)
    assert capped.capped and capped.source_rmse is None
    assert capped.precision_rmse == pytest.approx(math.sqrt(2 / 3))  # the outlier capped at sqrt(2)
    (raw,) = figure_metric(_OUTLIER_PRED, _OUTLIER_TRUTH, cap=False)
    assert not raw.capped
    assert raw.source_rmse == pytest.approx(math.sqrt(25 / 3))
    assert raw.source_mae == pytest.approx(5 / 3)
    assert raw.precision_rmse == pytest.approx(math.sqrt(25 / 3))  # uncapped distances in the table too
    assert raw.score == 0.0  # clipped at 0 when the uncapped error passes the worst bounded value


def test_no_cap_source_rule_ignores_missing_series_and_pools_y() -> None:
    truth = _fig(("A", [[0, 0], [1, 0]]), ("B", [[0, 100], [1, 100]]))  # pooled y span 100, x span 1
    pred = _fig(("A", [[0, 10]]))  # B missing: ignored by the source rule; distance (0, 10/100)
    (raw,) = figure_metric(pred, truth, cap=False)
    assert raw.source_rmse == pytest.approx(0.1) and raw.source_mae == pytest.approx(0.1)
    (none,) = figure_metric(_fig(("C", [[0, 0]])), truth, cap=False)
    assert none.source_rmse is None


def test_name_to_points_layouts_score_like_the_series_layout(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    truth = _fig(("A", [[0, 0], [1, 1], [2, 4]]), ("B", [[0, 1], [1, 0]]))
    series_layout = _fig(("A", [[0, 0.1], [2, 3.5]]), ("B", [[0.5, 0.5]]))
    bare = {"A": [[0, 0.1], [2, 3.5]], "B": [{"x": 0.5, "y": 0.5}]}
    lematerial = {"name_to_coordinates": {"A": [[0, 0.1], [2, 3.5]], "B": [[0.5, 0.5]]}, "title": None}
    paths = {}
    for name, data in (("truth", truth), ("series", series_layout), ("bare", bare), ("lem", lematerial)):
        paths[name] = tmp_path / f"{name}.json"
        paths[name].write_text(json.dumps(data))
    outputs = {}
    for name in ("series", "bare", "lem"):
        figure_metric_command(paths[name], paths["truth"], as_json=True)
        outputs[name] = [{k: v for k, v in row.items() if k != "extracted_name"}
                         for row in json.loads(capsys.readouterr().out)[0]["series"]]
    assert outputs["series"][0]["status"] == "matched" and outputs["series"][0]["precision_rmse"] > 0
    assert outputs["bare"] == outputs["series"] == outputs["lem"]


@pytest.mark.parametrize("data", [{"seris": [{"name": "A", "points": [[0, 0]]}]}, {}, {"figure": "3a"}])
def test_file_without_recognisable_series_is_an_error_naming_the_file(tmp_path: Path, data: Any) -> None:
    truth = tmp_path / "truth.json"
    truth.write_text(json.dumps(_fig(("A", [[0, 0], [1, 1]]))))
    pred = tmp_path / "typo.json"
    pred.write_text(json.dumps(data))
    with pytest.raises(InputError) as err:
        figure_metric_command(pred, truth)
    assert err.value.file == str(pred) and "series" in str(err.value)


def test_cli_figure_metric_no_series_exits_non_zero_and_no_cap_prints_source_number(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from scijudge.cli import app

    truth, pred, typo = tmp_path / "t.json", tmp_path / "p.json", tmp_path / "typo.json"
    truth.write_text(json.dumps(_OUTLIER_TRUTH))
    pred.write_text(json.dumps({"A": [[0, 0], [10, 10], [10, 60]]}))
    typo.write_text(json.dumps({"seris": []}))
    result = CliRunner().invoke(app, ["figure-metric", str(typo), str(truth)])
    assert result.exit_code != 0 and "typo.json" in result.output
    result = CliRunner().invoke(app, ["figure-metric", "--no-cap", str(pred), str(truth)])
    assert result.exit_code == 0, result.output
    assert f"RMSE {math.sqrt(25 / 3):.4f}" in result.output
