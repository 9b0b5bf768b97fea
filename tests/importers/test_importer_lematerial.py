"""LeMaterial annotation folders -> run-store rows and human labels (test folder written for this project)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from scijudge.errors import InputError
from scijudge.importers.lematerial import (
    expand_criteria,
    load_lematerial_annotations,
    match_materials,
    material_similarity,
)
from scijudge.materials.outputs import SynthesisJudgment
from scijudge.records import RUN_COLUMNS
from scijudge.run.store import Run

DATA = Path(__file__).resolve().parents[1] / "data" / "lematerial_annotations"


@pytest.fixture(scope="module")
def imported():  # type: ignore[no-untyped-def]
    return load_lematerial_annotations(DATA)


def test_papers_found_at_any_depth_and_old_copies_ignored(imported) -> None:  # type: ignore[no-untyped-def]
    assert imported.papers == ["1610.04348/2306.14755", "2101.00001", "multi_paper"]
    assert not any("ignored" in r["item_id"] for r in imported.rows)


def test_rows_follow_the_run_store_contract(imported) -> None:  # type: ignore[no-untyped-def]
    frame = imported.to_pandas()
    assert list(frame.columns) == list(RUN_COLUMNS)
    criteria = {f"lematerial.synthesis.{c}" for c in SynthesisJudgment.CRITERIA}
    assert set(frame["family"]) == {"synthesis"} and set(frame["judge"]) == {"lematerial.synthesis"} | criteria
    assert frame["key"].is_unique
    # each criterion is its own judge row, with the criterion's score and reasoning
    crit = frame[(frame["item_id"] == "2101.00001::Cu3Nb2O8") & (frame["judge"] == "lematerial.synthesis.process_steps")]
    assert crit["score"].tolist() == [4.0] and crit["result"].iloc[0]["criterion"] == "process_steps"
    frame = frame[frame["judge"] == "lematerial.synthesis"]
    by_id = {(r["item_id"], r["model"]): r for r in imported.rows if r["judge"] == "lematerial.synthesis"}
    cu = by_id[("2101.00001::Cu3Nb2O8", "lematerial-judge")]
    assert cu["status"] == "ok"
    assert cu["score"] == pytest.approx(28.5 / 7)  # recomputed; the file says 4.1
    assert cu["confidence"] == 1.0 and cu["result"]["structural_completeness"]["score"] == 4.0
    multi = frame[frame["item_id"] == "multi_paper::extractor-a::NiCo2O4 nanosheets"]
    assert sorted(multi["model"]) == ["judge-x", "judge-y"]  # two judge LLMs, one item
    assert sorted(multi["score"]) == pytest.approx([4.0, 32.0 / 7])  # 5+4.5+4.5+4+4+5+5 = 32


def test_off_scale_judge_score_becomes_an_abstention_with_reason(imported) -> None:  # type: ignore[no-untyped-def]
    rows = [r for r in imported.rows if r["item_id"] == "1610.04348/2306.14755::BaTiO3"]
    assert len(rows) == 8 and {r["status"] for r in rows} == {"abstained"}  # the overall and its 7 criteria
    (row,) = [r for r in rows if r["judge"] == "lematerial.synthesis"]
    assert row["status"] == "abstained" and row["score"] is None
    assert "structural_completeness.score" in row["reason"] and "4.2" in row["reason"]
    assert "result.json" in row["reason"]


def test_extraction_failures_and_unannotated_are_skipped_and_counted(imported) -> None:  # type: ignore[no-untyped-def]
    assert imported.skipped_failed == 1  # LiFePO4 in 2101.00001, failed on both sides
    assert imported.skipped_unannotated == 1  # extractor-b's human evaluation is still empty
    assert not any("LiFePO4" in r["item_id"] for r in imported.rows)
    assert not any("LiFePO4" in label.item_id for label in imported.labels)


def test_human_labels_keyed_by_paper_and_matched_material(imported) -> None:  # type: ignore[no-untyped-def]
    overall = {label.item_id: label for label in imported.labels if label.judge == "lematerial.synthesis"}
    # "cu3nb2o8" (human file) pairs with "Cu3Nb2O8" (judge file); the label takes the judge's item id
    cu = overall["2101.00001::Cu3Nb2O8"]
    assert cu.score == pytest.approx(4.0)  # mean of 4, 3.5, 3, 5, 3.5, 5, 4 = 28 / 7
    assert cu.judge == "lematerial.synthesis" and cu.annotator == "human" and cu.rationale == "human summary"
    # "NiCo2O4 nanosheet" pairs with "NiCo2O4 nanosheets" for the extractor the evaluation belongs to
    ni = overall["multi_paper::extractor-a::NiCo2O4 nanosheets"]
    assert ni.score == pytest.approx(30.5 / 7)  # 4.5+4.5+4+4+4+4.5+5
    # 10CeGd must not pair with 5CeGd: digits differ
    assert "2101.00001::10CeGd" in overall
    assert imported.unmatched_human == ["2101.00001::10CeGd"]
    assert "2101.00001::5CeGd" in imported.unmatched_judge


def test_stated_overall_and_per_criterion_labels() -> None:
    stated = load_lematerial_annotations(DATA, human_overall="stated", criteria=True)
    cu = [label for label in stated.labels if label.item_id == "2101.00001::Cu3Nb2O8"]
    assert {label.judge.removeprefix("lematerial.synthesis"): label.score for label in cu} == {
        "": 3.5, ".structural_completeness": 4.0, ".material_extraction": 3.5, ".process_steps": 3.0,
        ".equipment_extraction": 5.0, ".conditions_extraction": 3.5, ".semantic_accuracy": 5.0,
        ".format_compliance": 4.0,
    }
    assert all(label.part == "" for label in cu)
    overall_only = load_lematerial_annotations(DATA, criteria=False)
    assert {label.judge for label in overall_only.labels} == {"lematerial.synthesis"}


def test_expand_criteria_gives_per_criterion_judge_rows(imported) -> None:  # type: ignore[no-untyped-def]
    frame = imported.to_pandas()
    parts = expand_criteria(frame[frame["judge"] == "lematerial.synthesis"])
    cu = parts[(parts["item_id"] == "2101.00001::Cu3Nb2O8")]
    assert dict(zip(cu["part"], cu["score"])) == {
        "structural_completeness": 4.0, "material_extraction": 4.5, "process_steps": 4.0,
        "equipment_extraction": 2.0, "conditions_extraction": 4.5, "semantic_accuracy": 4.5,
        "format_compliance": 5.0,
    }
    assert parts["key"].is_unique
    assert "1610.04348/2306.14755::BaTiO3" not in set(parts["item_id"])  # abstentions carry no criteria


def test_rows_write_to_a_run_store(imported, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from scijudge.commands._store import write_records

    path = tmp_path / "imported.sqlite"
    assert write_records(path, imported.results) == len(imported.rows)
    with Run(path, create=False) as run:
        stored = run.to_pandas()
    assert sorted(stored["key"]) == sorted(r["key"] for r in imported.rows)


def test_threshold_controls_fuzzy_matching() -> None:
    assert material_similarity("LiFePO4", "LiFePO3") == 0.0
    assert material_similarity("Sulfur-doped graphene", "sulphur doped graphene") == pytest.approx(0.93, abs=0.01)
    assert match_materials(["NiCo2O4 nanosheet", "x"], ["zzz", "NiCo2O4 nanosheets"]) == {0: 1}
    assert match_materials(["Cu3Nb2O8 ceramic powder"], ["Cu3Nb2O8"]) == {}
    assert match_materials(["Cu3Nb2O8 ceramic powder"], ["Cu3Nb2O8"], threshold=0.5) == {0: 0}
    strict = load_lematerial_annotations(DATA, match_threshold=1.0)
    assert "multi_paper::extractor-a::NiCo2O4 nanosheet" in strict.unmatched_human


def test_bad_folders_and_files_name_the_problem(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not a folder"):
        load_lematerial_annotations(tmp_path / "missing")
    with pytest.raises(InputError) as err:
        load_lematerial_annotations(DATA, match_threshold=0)
    assert err.value.field == "match_threshold"
    broken = tmp_path / "ann" / "p1"
    broken.mkdir(parents=True)
    (broken / "result.json").write_text('[{"material": "x",\n "evaluation": }]')
    with pytest.raises(InputError) as err:
        load_lematerial_annotations(tmp_path / "ann")
    assert err.value.file is not None and err.value.file.endswith("result.json") and err.value.line == 2
    (broken / "result.json").write_text(json.dumps({"not": "a list"}))
    with pytest.raises(InputError, match="expected a JSON list"):
        load_lematerial_annotations(tmp_path / "ann")


def test_paper_with_only_a_human_file(tmp_path: Path) -> None:
    shutil.copytree(DATA / "2101.00001", tmp_path / "p")
    (tmp_path / "p" / "result.json").unlink()
    only = load_lematerial_annotations(tmp_path)
    assert only.rows == [] and {label.item_id for label in only.labels} == {"p::cu3nb2o8", "p::10CeGd"}
    assert only.skipped_failed == 1


@pytest.mark.slow
def test_import_lematerial_cli_writes_a_run_and_labels(tmp_path):
    import json
    import subprocess
    import sys

    from scijudge import Run
    from scijudge.labels import HumanLabel

    folder = Path(__file__).resolve().parents[1] / "data" / "lematerial_annotations"
    done = subprocess.run([sys.executable, "-m", "scijudge", "import-lematerial", str(folder), "--run",
                           str(tmp_path / "r.sqlite"), "--labels", str(tmp_path / "l.jsonl")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    frame = Run(tmp_path / "r.sqlite").to_pandas()
    labels = [HumanLabel.model_validate(json.loads(line)) for line in (tmp_path / "l.jsonl").read_text().splitlines()]
    assert len(frame) > 0 and len(labels) > 0
    assert set(label.item_id for label in labels) <= set(frame.item_id) | set(done.stdout.split())
