"""LeMaterial end to end from the CLI: import-lematerial, then calibrate with only --allow-extra-labels.

Every statistic of a criterion judge and of the continuous overall is recomputed here from the same pairs
with scipy / scikit-learn / pingouin / krippendorff.
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score
from typer.testing import CliRunner

from scijudge.cli import app
from scijudge.importers.lematerial import load_lematerial_annotations
from scijudge.materials.outputs import SynthesisJudgment
from scijudge.run.store import Run

DATA = Path(__file__).resolve().parents[1] / "data" / "lematerial_annotations"
CRITERIA = SynthesisJudgment.CRITERIA


def _kappa(h: np.ndarray, j: np.ndarray) -> float:
    """Quadratic κ from scikit-learn on half-step indices (it wants class labels, not floats)."""
    return cohen_kappa_score((h * 2).astype(int), (j * 2).astype(int), weights="quadratic", labels=list(range(2, 11)))


@pytest.fixture(scope="module")
def folder(tmp_path_factory):  # type: ignore[no-untyped-def]
    """The test folder plus a paper with more materials, a 0.0 human score, an off-grid one and a duplicate."""
    root = tmp_path_factory.mktemp("lemat") / "annotations"
    shutil.copytree(DATA, root)
    judge = json.loads((DATA / "2101.00001" / "result.json").read_text())[0]
    human = json.loads((DATA / "2101.00001" / "result_human.json").read_text())[0]
    rng = np.random.default_rng(5)
    judges, humans = [], []
    for i in range(14):
        j, h = copy.deepcopy(judge), copy.deepcopy(human)
        j["material"] = h["material"] = f"Mat{i}X"
        for c in CRITERIA:
            base = float(rng.integers(2, 9)) / 2 + 0.5
            h["evaluation"]["scores"][f"{c}_score"] = base
            j["evaluation"]["scores"][f"{c}_score"] = float(np.clip(base + rng.choice([-1, -0.5, 0, 0.5, 1]), 1, 5))
        judges.append(j)
        humans.append(h)
    humans[0]["evaluation"]["scores"]["process_steps_score"] = 0.0  # out of range: dropped and listed
    humans[1]["evaluation"]["scores"]["semantic_accuracy_score"] = 3.3  # off the half-step grid
    humans.append(copy.deepcopy(humans[2]))  # a duplicate entry for Mat2X
    (root / "extra").mkdir()
    (root / "extra" / "result.json").write_text(json.dumps(judges))
    (root / "extra" / "result_human.json").write_text(json.dumps(humans))
    return root


def test_drops_and_duplicates_are_counted_and_listed(folder) -> None:  # type: ignore[no-untyped-def]
    imported = load_lematerial_annotations(folder)
    rules = imported.drop_counts()
    assert rules == {"outside the scale 1-5": 1, "criterion score not on the 0.5-step grid": 1,
                     "duplicate human entry for an item already labelled (the first in file order is kept)": 1}
    dup = next(d for d in imported.dropped if d.rule.startswith("duplicate"))
    assert dup.item_id == "extra::Mat2X" and dup.file.endswith("result_human.json")
    assert "extra::Mat2X" not in imported.unmatched_human
    zero = next(d for d in imported.dropped if d.value == 0.0)
    assert (zero.item_id, zero.judge) == ("extra::Mat0X", "lematerial.synthesis.process_steps")
    # the overall of an item with a dropped criterion is the annotator's stated overall, not a 6-criterion mean
    assert not any(lab.item_id == "extra::Mat0X" and lab.judge == "lematerial.synthesis.process_steps"
                   for lab in imported.labels)


@pytest.mark.slow
def test_import_then_calibrate_per_criterion_matches_scipy_and_sklearn(folder, tmp_path) -> None:  # type: ignore[no-untyped-def]
    krippendorff = pytest.importorskip("krippendorff")
    pingouin = pytest.importorskip("pingouin")
    store, labels, out = tmp_path / "lemat.sqlite", tmp_path / "labels.jsonl", tmp_path / "report"
    runner = CliRunner()
    done = runner.invoke(app, ["import-lematerial", str(folder), "--run", str(store), "--labels", str(labels)])
    assert done.exit_code == 0, done.output
    text = " ".join(done.output.split())
    assert "human scores left out: 3" in text and "1 left out: outside the scale 1-5" in text
    done = runner.invoke(app, ["calibrate", "--labels", str(labels), "--run", str(store), "--allow-extra-labels",
                               "--n-boot", "200", "--out", str(out)])
    assert done.exit_code == 0, done.output
    per = pd.read_csv(out / "per_rubric.csv")
    judges = set(per["judge"])
    assert judges == {"lematerial.synthesis"} | {f"lematerial.synthesis.{c}" for c in CRITERIA}

    frame = Run(store, create=False).to_pandas()
    lab = pd.read_json(labels, lines=True)

    def pairs(judge: str, model: str) -> tuple[np.ndarray, np.ndarray]:
        j = frame[(frame["judge"] == judge) & (frame["model"] == model) & (frame["status"] == "ok")]
        m = j.merge(lab[lab["judge"] == judge], on=["item_id", "judge"], suffixes=("", "_h"))
        return m["score"].to_numpy(float), m["score_h"].to_numpy(float)

    model = "lematerial-judge"
    # a criterion: a 1-5 half-step ordinal scale
    crit = "lematerial.synthesis.process_steps"
    j, h = pairs(crit, model)
    row = per[(per["judge"] == crit) & (per["contender"] == model)].iloc[0]
    grid = np.arange(1.0, 5.01, 0.5)
    assert row["n"] == len(j) >= 10
    assert row["kappa_w"] == pytest.approx(_kappa(h, j))
    assert row["spearman"] == pytest.approx(stats.spearmanr(j, h).statistic)
    assert row["kendall"] == pytest.approx(stats.kendalltau(j, h).statistic)
    assert row["mae"] == pytest.approx(np.abs(j - h).mean())
    assert row["alpha_ordinal"] == pytest.approx(
        krippendorff.alpha(np.vstack([h, j]), level_of_measurement="ordinal", value_domain=grid))

    # the overall: continuous (means of seven criteria), raw statistics + κ/α on the grid after rounding
    j, h = pairs("lematerial.synthesis", model)
    row = per[(per["judge"] == "lematerial.synthesis") & (per["contender"] == model)].iloc[0]
    assert "continuous" in row["scale"] and "raw values" in row["notes"]
    assert not np.allclose(j, np.round(j * 2) / 2)  # really off the grid
    assert row["mae"] == pytest.approx(np.abs(j - h).mean())
    assert row["bias"] == pytest.approx((j - h).mean())
    assert row["pearson"] == pytest.approx(stats.pearsonr(j, h).statistic)
    assert row["spearman"] == pytest.approx(stats.spearmanr(j, h).statistic)
    assert row["kendall"] == pytest.approx(stats.kendalltau(j, h).statistic)
    long = pd.DataFrame({"t": np.r_[np.arange(len(j)), np.arange(len(j))], "r": ["h"] * len(h) + ["j"] * len(j),
                         "x": np.r_[h, j]})
    icc = pingouin.intraclass_corr(long, targets="t", raters="r", ratings="x").set_index("Type")["ICC"]
    assert row["icc_a1"] == pytest.approx(icc["ICC(A,1)"] if "ICC(A,1)" in icc else icc["ICC2"])
    assert row["icc_c1"] == pytest.approx(icc["ICC(C,1)"] if "ICC(C,1)" in icc else icc["ICC3"])
    jg, hg = np.round(j * 2) / 2, np.round(h * 2) / 2  # stated rounding: half steps, half-way to even
    assert row["kappa_w"] == pytest.approx(_kappa(hg, jg))
    assert row["exact"] == pytest.approx(np.mean(jg == hg))
    assert row["alpha_interval"] == pytest.approx(krippendorff.alpha(np.vstack([hg, jg]), level_of_measurement="interval"))
    assert row["mae_lo"] <= row["mae"] <= row["mae_hi"] and row["icc_a1_lo"] <= row["icc_a1"] <= row["icc_a1_hi"]
    # coverage counts only labels of judged items: 10CeGd (labelled, never judged) is not a missing unit;
    # an item other judge models judged and this one did not is
    overall = frame[frame["judge"] == "lematerial.synthesis"]
    labelled = set(lab.loc[lab["judge"] == "lematerial.synthesis", "item_id"])
    missing = (labelled & set(overall["item_id"])) - set(overall.loc[overall["model"] == model, "item_id"])
    assert "2101.00001::10CeGd" in labelled and row["n_missing"] == len(missing) == 1
