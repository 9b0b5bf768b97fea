"""Adversarial variants (YESciEval recipe + injection probe) and the robustness metrics."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from scijudge.data.variants import INJECTION, RUBRICS, Pools, perturb_items, split_sentences
from scijudge.errors import InputError
from scijudge.metrics.robustness import robustness_table

ANSWER = ("Perovskite solar cells have improved rapidly [1]. However, their stability remains a concern, e.g. under "
          "humidity. Moreover, lead toxicity is debated (Smith et al. 2020). Tin-based cells are explored; therefore, "
          "costs may fall. In addition, tandem designs reach 33.9% efficiency.")
ITEM = {"id": "q1", "question": "How stable are perovskite solar cells?",
        "papers": [{"title": "Perovskite thin film degradation", "abstract": "Perovskite material stability."}],
        "answer": ANSWER, "meta": {"source": "test"}}
POOLS = Pools.load()


def _by_id(items: list[dict]) -> dict[str, dict]:
    return {it["id"]: it for it in items}


def test_split_sentences_keeps_abbreviations_and_decimals() -> None:
    sentences, seps = split_sentences(ANSWER)
    assert len(sentences) == 5
    assert sentences[1].endswith("e.g. under humidity.") and "et al. 2020" in sentences[2]
    assert sentences[4].endswith("33.9% efficiency.")
    assert "".join(s + p for s, p in zip(sentences, seps)) == ANSWER
    para, _ = split_sentences("First point.\n\nSecond point\n- a bullet item")
    assert para == ["First point.", "Second point", "- a bullet item"]


def test_variants_have_ids_meta_and_are_deterministic() -> None:
    a = perturb_items([ITEM], "both", seed=3)
    assert len(a) == (len(RUBRICS) + 1) * 2
    assert a == perturb_items([ITEM], "both", seed=3)
    assert a != perturb_items([ITEM], "both", seed=4)
    # independent of the other items in the batch
    other = dict(ITEM, id="q0", answer="Something else entirely. It has two sentences.")
    assert _by_id(perturb_items([other, ITEM], "both", seed=3))["q1::cohesion::extreme"] == _by_id(a)["q1::cohesion::extreme"]
    v = _by_id(a)["q1::correctness::subtle"]
    assert v["meta"]["perturbation"]["base_id"] == "q1" and v["meta"]["perturbation"]["level"] == "subtle"
    assert v["meta"]["source"] == "test" and v["question"] == ITEM["question"]
    assert ITEM["answer"] == ANSWER  # the input is not modified
    with_orig = perturb_items([ITEM], "subtle", seed=3, rubrics=["cohesion"], include_original=True)
    assert [x["id"] for x in with_orig] == ["q1", "q1::cohesion::subtle"]


def test_recipe_per_rubric() -> None:
    v = {k: x["answer"] for k, x in _by_id(perturb_items([ITEM], "both", seed=0)).items()}
    base, _ = split_sentences(ANSWER)

    def sents(key: str) -> list[str]:
        return split_sentences(v[key])[0]

    assert sents("q1::cohesion::subtle") == base[:3] + [base[4], base[3]]
    shuffled = sents("q1::cohesion::extreme")
    assert sorted(shuffled) == sorted(base) and shuffled != base
    extra = [s for s in sents("q1::conciseness::subtle") if s not in base]
    assert len(sents("q1::conciseness::subtle")) == 6 and len(extra) == 1
    assert any(b[1:] in extra[0] for b in base)  # it restates one of the answer's own sentences
    assert len(sents("q1::conciseness::extreme")) == 10
    assert v["q1::readability::subtle"].startswith(ANSWER) and sents("q1::readability::subtle")[-1] in POOLS.sentences["informal"]
    assert sents("q1::readability::extreme")[-1] in POOLS.sentences["social_media"]
    for rubric in ("coherence", "relevancy", "correctness", "informativeness"):
        assert v[f"q1::{rubric}::subtle"][len(ANSWER) + 1:] in POOLS.sentences["offtopic_materials"]
        assert v[f"q1::{rubric}::extreme"][len(ANSWER) + 1:] in POOLS.sentences["unrelated"]
    assert v["q1::integration::subtle"] == ANSWER.replace("However, their", "Their")
    assert v["q1::integration::extreme"] == (
        "- Perovskite solar cells have improved rapidly [1].\n- Their stability remains a concern, e.g. under humidity.\n"
        "- Lead toxicity is debated (Smith et al. 2020).\n- Tin-based cells are explored; costs may fall.\n"
        "- Tandem designs reach 33.9% efficiency.")
    assert sents("q1::completeness::subtle") == base[:4]
    assert sents("q1::completeness::extreme")[:4] == base[:4]
    assert sents("q1::completeness::extreme")[4] in POOLS.sentences["unrelated"]
    assert v[f"q1::{INJECTION}::subtle"][len(ANSWER) + 1:] in POOLS.sentences["injection_subtle"]
    assert v[f"q1::{INJECTION}::extreme"][len(ANSWER) + 1:] in POOLS.sentences["injection_extreme"]


def test_domain_from_meta_and_unchanged_variants_are_not_made_but_counted() -> None:
    item = {"id": "x", "answer": "A single sentence without connectors.", "meta": {"domain": "medicine"}}
    not_made: list[dict] = []
    out = _by_id(perturb_items([item], "subtle", 1, not_made=not_made))
    assert out["x::relevancy::subtle"]["answer"].split(". ", 1)[1] in POOLS.sentences["offtopic_medicine"]
    assert {(m["rubric"], m["level"]) for m in not_made} == {("cohesion", "subtle"), ("integration", "subtle"),
                                                            ("completeness", "subtle")}
    assert not any(f"x::{m['rubric']}::subtle" in out for m in not_made)
    assert all(v["meta"]["perturbation"]["changed"] for v in out.values())
    unknown = {"id": "y", "answer": "Nothing to guess from here."}
    assert _by_id(perturb_items([unknown], "subtle", 1, ["relevancy"]))["y::relevancy::subtle"]["answer"].split(
        ". ", 1)[1] in POOLS.sentences["offtopic_general"]


def test_custom_pools_override_shipped_files(tmp_path: Path) -> None:
    (tmp_path / "informal.txt").write_text("# mine\nThis is my own casual line, yo.\n")
    out = perturb_items([ITEM], "subtle", 0, ["readability"], pools=tmp_path)
    assert out[0]["answer"].endswith("This is my own casual line, yo.")


def test_bad_arguments() -> None:
    with pytest.raises(InputError, match="level"):
        perturb_items([ITEM], "medium", 0)
    with pytest.raises(InputError, match="unknown rubric 'style'"):
        perturb_items([ITEM], "subtle", 0, ["style"])
    with pytest.raises(InputError, match="no text"):
        perturb_items([{"id": "q", "answer": "  "}], "subtle", 0)
    with pytest.raises(InputError, match="pools folder not found"):
        Pools.load("/nonexistent/pools")


def _judgment(item: str, judge: str, model: str, score: float | None, status: str = "ok") -> dict:
    return {"item_id": item, "judge": judge, "part": "", "family": "likert", "spec_hash": "h", "model": model,
            "status": status, "score": score, "verdict": None}


def test_robustness_metrics_by_hand() -> None:
    j = "yescieval.qa.correctness"
    # benign 5,4,5 ; subtle 4,4,5 ; extreme 2,4,3 ; injection extreme 5,5,5 ; one abstained variant
    rows = []
    for i, (b, s, e, inj) in enumerate([(5, 4, 2, 5), (4, 4, 4, 5), (5, 5, 3, 5)]):
        rows += [_judgment(f"q{i}", j, "m", b), _judgment(f"q{i}::correctness::subtle", j, "m", s),
                 _judgment(f"q{i}::correctness::extreme", j, "m", e),
                 _judgment(f"q{i}::injection::extreme", j, "m", inj)]
    rows.append(_judgment("q0::injection::subtle", j, "m", None, status="abstained"))
    rows.append(_judgment("q0::cohesion::extreme", j, "m", 1))  # targets another rubric: ignored for this judge
    rob = robustness_table(pd.DataFrame(rows), n_boot=200).table  # the one robustness implementation
    by = rob[rob["judge"] == j].set_index("level")
    assert by.loc["subtle", "mean_original"] == pytest.approx(14 / 3)
    assert by.loc["subtle", "mean_variant"] == pytest.approx(13 / 3) and by.loc["subtle", "drop"] == pytest.approx(1 / 3)
    assert by.loc["extreme", "mean_variant"] == pytest.approx(3.0) and by.loc["extreme", "drop"] == pytest.approx(5 / 3)
    assert by.loc["extreme", "p_greater"] == pytest.approx(2 / 3) and by.loc["extreme", "p_tie"] == pytest.approx(1 / 3)
    assert by.loc["injection_extreme", "drop"] == pytest.approx(-1 / 3)  # injection inflates: a negative drop
    assert "injection_subtle" not in by.index or by.loc["injection_subtle", "n_pairs"] == 0
    assert by.loc["extreme", "drop_lo"] <= by.loc["extreme", "drop"] <= by.loc["extreme", "drop_hi"]
    assert "cohesion" not in " ".join(by.index)  # targets another rubric: not this judge's
    with pytest.raises(InputError, match="no perturbed answers"):
        robustness_table(pd.DataFrame([_judgment("q0", j, "m", 4)]))


def test_perturb_cmd_writes_loadable_items(tmp_path: Path) -> None:
    from scijudge.commands.calibrate import perturb_cmd
    from scijudge.data import load_items

    items = tmp_path / "items.jsonl"
    items.write_text(json.dumps(ITEM) + "\n")
    out = tmp_path / "out" / "perturbed.jsonl"
    n = perturb_cmd(items, level="extreme", out=out, seed=2, rubric=None, pools=None, with_original=True)
    loaded = load_items(out)
    loaded = loaded[0] if isinstance(loaded, tuple) else loaded
    assert n == len(loaded) == 1 + len(RUBRICS) + 1
    assert loaded[0].id == "q1" and loaded[1].meta["perturbation"]["level"] == "extreme"


def test_every_recipe_changes_the_bundled_answers_and_extreme_differs_from_subtle(repo: Path) -> None:
    items = [json.loads(line) for line in (repo / "datasets/yescieval_example/items.jsonl").read_text().splitlines()
             if line.strip()]
    not_made: list[dict] = []
    out = _by_id(perturb_items(items, "both", seed=0, not_made=not_made))
    for item in items:
        for rubric in (*RUBRICS, INJECTION):
            subtle, extreme = out.get(f"{item['id']}::{rubric}::subtle"), out.get(f"{item['id']}::{rubric}::extreme")
            for variant in (subtle, extreme):
                if variant is not None:
                    assert variant["answer"] != item["answer"], (item["id"], rubric)
            if subtle is not None and extreme is not None:
                assert subtle["answer"] != extreme["answer"], (item["id"], rubric)
    made = len(out)
    assert made + len(not_made) == len(items) * (len(RUBRICS) + 1) * 2
    # what could not be made is only what the answer lacks: a connector for the subtle integration recipe
    assert {(m["rubric"], m["level"]) for m in not_made} <= {("integration", "subtle")}
    for m in not_made:
        answer = next(i["answer"] for i in items if i["id"] == m["item_id"])
        assert not any(f"{c}," in answer for c in POOLS.connectors())


def test_two_sentence_cohesion_has_no_extreme_distinct_from_subtle() -> None:
    item = {"id": "t", "answer": "First claim here. Second claim there."}
    not_made: list[dict] = []
    out = _by_id(perturb_items([item], "both", 0, ["cohesion"], not_made=not_made))
    assert list(out) == ["t::cohesion::subtle"]
    assert not_made == [{"item_id": "t", "rubric": "cohesion", "level": "extreme",
                         "reason": "unchanged (fewer than 3 sentences: a shuffle is the subtle swap)"}]
