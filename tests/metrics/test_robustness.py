"""Robustness from recorded judgments, checked against independent pandas / scipy / scikit-learn code."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import mannwhitneyu
from sklearn.metrics import roc_auc_score
from typer.testing import CliRunner

from scijudge.cli import app
from scijudge.errors import InputError
from scijudge.importers.judgments import load_judgments, parse_mapping
from scijudge.metrics.robustness import COLUMNS, robustness_table

MODELS = ["gpt-4o", "llama-3.1-8b", "qwen-72b", "mistral-large"]
RUBRICS = ["cohesion", "conciseness", "readability", "coherence", "relevancy", "correctness", "informativeness",
           "integration", "completeness"]
MAPPING = ["question_id=item_id", "rubric=judge", "llm=model", "rating=score", "perturbation=level"]


def _published_shape(path, n_items=510, seed=3, missing=40):
    """~55,000 ratings: four LLM judges × nine rubrics × items × original/subtle/extreme, some ratings missing."""
    rng = np.random.default_rng(seed)
    frames = []
    for m, model in enumerate(MODELS):
        for rubric in RUBRICS:
            base = rng.integers(2, 6, size=n_items)
            for level, shift in (("original", 0.0), ("subtle", 0.4 + 0.2 * m), ("extreme", 1.2 + 0.1 * m)):
                rating = np.clip(base - np.rint(rng.normal(shift, 0.9, size=n_items)), 1, 5)
                frames.append(pd.DataFrame({"question_id": [f"paper{i}" for i in range(n_items)], "rubric": rubric,
                                            "llm": model, "rating": rating, "perturbation": level}))
    df = pd.concat(frames, ignore_index=True)
    df.loc[rng.choice(len(df), size=missing, replace=False), "rating"] = np.nan
    df.to_csv(path, index=False)
    return df


def _rows(imported):
    return pd.DataFrame([r.model_dump(mode="json") for r in imported.results])


@pytest.mark.slow
def test_published_shape_pooled_p_and_drop_match_independent_pandas(tmp_path):
    raw = _published_shape(tmp_path / "release.csv")
    assert 54_000 < len(raw) < 56_000
    imported = load_judgments(tmp_path / "release.csv", mapping=parse_mapping(MAPPING))
    assert not imported.errors and imported.n_abstained == 40
    table = robustness_table(_rows(imported), n_boot=200, seed=1).table
    assert list(table.columns[: len(COLUMNS)]) == list(COLUMNS)

    # independent computation from the raw file: wide per (llm, rubric, question), drop rows missing either side
    wide = raw.pivot_table(index=["llm", "rubric", "question_id"], columns="perturbation", values="rating",
                           aggfunc="first", dropna=False)
    for level in ("subtle", "extreme"):
        pairs = wide[["original", level]].dropna()
        diff = pairs["original"] - pairs[level]
        expected = pd.DataFrame({"drop": diff.groupby("llm").mean(),
                                 "p_greater": (diff > 0).groupby("llm").mean(),
                                 "p_tie": (diff == 0).groupby("llm").mean(),
                                 "n_pairs": diff.groupby("llm").size()})
        got = table[(table["judge"] == "*") & (table["level"] == level)].set_index("model")
        for column in expected.columns:
            np.testing.assert_allclose(got.loc[expected.index, column].astype(float), expected[column], rtol=1e-12)
        # unpaired AUC, ties one half: scikit-learn on the pooled scores of each model
        for model, sub in pairs.groupby("llm"):
            x, y = sub["original"].to_numpy(), sub[level].to_numpy()
            auc = roc_auc_score(np.r_[np.ones(x.size), np.zeros(y.size)], np.r_[x, y])
            assert got.loc[model, "auc"] == pytest.approx(auc, rel=1e-12)
        # per judge: Mann-Whitney U / (n1 n2) from scipy
        sub = pairs.loc[("qwen-72b", "coherence")]
        u = mannwhitneyu(sub["original"], sub[level], alternative="two-sided").statistic
        row = table[(table["model"] == "qwen-72b") & (table["judge"] == "coherence") & (table["level"] == level)]
        assert row["auc"].item() == pytest.approx(u / (len(sub) ** 2), rel=1e-12)
        assert row["mean_original"].item() == pytest.approx(sub["original"].mean())
    pooled = table[table["judge"] == "*"]
    assert (pooled["drop_lo"] <= pooled["drop"]).all() and (pooled["drop"] <= pooled["drop_hi"]).all()
    assert table["n_abstained"][table["judge"] == "*"].sum() > 0  # missing variant ratings counted


def test_unchanged_variants_are_excluded_and_counted():
    rows = []
    for i in range(6):
        rows.append({"item_id": f"q{i}", "judge": "j", "model": "m", "score": 4.0, "result": None})
        rows.append({"item_id": f"q{i}::ex", "judge": "j", "model": "m", "score": 4.0 if i < 2 else 2.0,
                     "result": {"variant_of": f"q{i}", "level": "extreme", "changed": i >= 2}})
    frame = pd.DataFrame(rows).assign(part="", family="imported", spec_hash="imported", status="ok", verdict=None)
    result = robustness_table(frame, n_boot=0)
    (row,) = result.table[result.table["judge"] == "j"].to_dict("records")
    assert row["n_pairs"] == 4 and row["n_unchanged"] == 2 and row["drop"] == 2.0 and row["p_greater"] == 1.0
    assert result.excluded["unchanged"] == 2 and np.isnan(row["drop_lo"])


def test_rows_on_fewer_than_30_original_items_are_named_in_one_note():
    def frame(n_items: int) -> pd.DataFrame:
        rows = []
        for i in range(n_items):
            rows.append({"item_id": f"q{i}", "judge": "j", "model": "m", "score": 4.0, "result": None})
            rows.append({"item_id": f"q{i}::ex", "judge": "j", "model": "m", "score": 2.0 + i % 2,
                         "result": {"variant_of": f"q{i}", "level": "extreme", "changed": True}})
        return pd.DataFrame(rows).assign(part="", family="imported", spec_hash="imported", status="ok", verdict=None)

    (note,) = robustness_table(frame(12), n_boot=0).notes[1:]  # after the no-bootstrap note
    assert note.startswith("fewer than 30 original items: m / * / extreme (12), m / j / extreme (12);")
    assert robustness_table(frame(30), n_boot=0).notes == ["bootstrap disabled (n_boot=0): no intervals"]


def test_perturb_ids_count_only_for_their_rubric_and_injection_for_all():
    rows = [{"item_id": "a", "judge": "yescieval.qa.cohesion", "score": 5.0},
            {"item_id": "a", "judge": "yescieval.qa.correctness", "score": 4.0},
            {"item_id": "a::cohesion::extreme", "judge": "yescieval.qa.cohesion", "score": 2.0},
            {"item_id": "a::cohesion::extreme", "judge": "yescieval.qa.correctness", "score": 4.0},
            {"item_id": "a::injection::subtle", "judge": "yescieval.qa.correctness", "score": 5.0}]
    frame = pd.DataFrame(rows).assign(part="", family="likert", spec_hash="h", model="m", status="ok", verdict=None)
    table = robustness_table(frame, n_boot=0).table.set_index(["judge", "level"])
    assert table.loc[("yescieval.qa.cohesion", "extreme"), "drop"] == 3.0
    assert ("yescieval.qa.correctness", "extreme") not in table.index
    assert table.loc[("yescieval.qa.correctness", "injection_subtle"), "drop"] == -1.0


def test_no_variants_is_a_clear_error():
    frame = pd.DataFrame([{"item_id": "a", "judge": "j", "part": "", "family": "x", "spec_hash": "h", "model": "m",
                           "status": "ok", "score": 1.0, "verdict": None}])
    with pytest.raises(InputError, match="no perturbed answers"):
        robustness_table(frame)


@pytest.mark.slow
def test_cli_import_then_robustness_writes_csv_and_html(tmp_path):
    raw = _published_shape(tmp_path / "small.csv", n_items=25, missing=0)
    store = tmp_path / "release.sqlite"
    args = ["import-judgments", str(tmp_path / "small.csv"), "--run", str(store)]
    for pair in MAPPING:
        args += ["--map", pair]
    assert CliRunner().invoke(app, args).exit_code == 0
    result = CliRunner().invoke(app, ["robustness", str(store), "--out", str(tmp_path / "out"), "--n-boot", "100"])
    assert result.exit_code == 0, result.output
    csv = pd.read_csv(tmp_path / "out" / "robustness.csv")
    assert list(csv.columns[: len(COLUMNS)]) == list(COLUMNS)
    assert set(csv["judge"]) == set(RUBRICS) | {"*"} and len(csv) == 4 * 10 * 2
    html = (tmp_path / "out" / "robustness.html").read_text(encoding="utf-8")
    assert "data:image/png;base64," in html
    ext = raw[raw["perturbation"] == "extreme"].set_index(["llm", "rubric", "question_id"])["rating"]
    org = raw[raw["perturbation"] == "original"].set_index(["llm", "rubric", "question_id"])["rating"]
    expected = (org - ext).groupby("llm").mean()
    got = csv[(csv["judge"] == "*") & (csv["level"] == "extreme")].set_index("model")["drop"]
    np.testing.assert_allclose(got[expected.index], expected, rtol=1e-9)
    assert "model,judge,level,n_pairs" in result.output  # piped output is CSV with full values, not a cut table
