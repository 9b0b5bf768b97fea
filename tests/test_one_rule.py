"""Rules that used to exist in several copies now have one each: these tests pin the places that share them."""

from __future__ import annotations

import json
import math
import statistics

import numpy as np
import pandas as pd
import pytest
from pydantic import BaseModel, field_validator

from scijudge.errors import InputError, from_validation_error, validation_problem
from scijudge.records import RUN_COLUMNS, Attempt, JudgeResult, attempt_totals, result_row
from scijudge.vocab import (
    VERDICT_SYNONYMS,
    ScaleTuple,
    consensus_score,
    criterion_verdict,
    majority_verdict,
    norm_verdict,
)


# --- verdicts ----------------------------------------------------------------------------------------------
HAND = {  # written out here, not read from the table
    "Satisfied": "satisfied", "yes.": "satisfied", "MET": "satisfied",
    "Partially Satisfied": "partially", "partly satisfied": "partially", "partial": "partially",
    "not_satisfied": "not_satisfied", "Not-Met": "not_satisfied", "  no ": "not_satisfied", "Unsatisfied": "not_satisfied",
}


def test_judge_and_importer_read_criterion_verdicts_the_same():
    from scijudge.importers.researchrubrics import canonical_verdict
    from scijudge.judges.checklist import CriterionVerdict, TernaryCriterionVerdict

    spellings = {**HAND, **{w.upper().replace(" ", "_"): v for w, v in VERDICT_SYNONYMS.items()}}
    for written, canonical in spellings.items():
        assert criterion_verdict(written) == canonical, written
        assert canonical_verdict(written) == canonical, written
        answer = {"reasoning": "r", "verdict": written, "confidence": 0.5}
        assert TernaryCriterionVerdict.model_validate(answer).verdict == canonical
        if canonical == "partially":  # a binary checklist has no partial verdict
            with pytest.raises(ValueError, match="verdict must be one of satisfied, not_satisfied"):
                CriterionVerdict.model_validate(answer)
        else:
            assert CriterionVerdict.model_validate(answer).verdict == canonical
    for unknown in ("maybe", "", 1):
        assert criterion_verdict(unknown) is None
        with pytest.raises(ValueError):
            canonical_verdict(unknown)
        with pytest.raises(ValueError):
            TernaryCriterionVerdict.model_validate({"reasoning": "r", "verdict": unknown, "confidence": 0.5})


def test_optimization_and_calibration_compare_verdicts_with_the_one_rule():
    from scijudge.optimization import _judge_metrics

    assert _judge_metrics.norm_verdict is norm_verdict
    assert norm_verdict(" Not \t Satisfied ") == "not_satisfied"  # any spelling of a criterion verdict: one class


# --- human consensus ---------------------------------------------------------------------------------------
def _random_labels(seed: int) -> tuple[pd.DataFrame, dict[str, ScaleTuple]]:
    rng = np.random.default_rng(seed)
    scales = {"j.int": ScaleTuple(1.0, 5.0, 1.0), "j.half": ScaleTuple(0.0, 4.0, 0.5), "j.cont": ScaleTuple(1.0, 5.0, 0.5)}
    rows = []
    for judge, sc in scales.items():
        for item in range(60):
            for part in ("", "c1"):
                for _ in range(rng.integers(1, 5)):
                    levels = sc.levels()
                    score = levels[rng.integers(len(levels))]
                    if judge == "j.cont":
                        score = float(rng.uniform(sc.lo, sc.hi))
                    rows.append({"item_id": f"i{item}", "judge": judge, "part": part, "score": score, "verdict": None})
    for item in range(80):
        for _ in range(rng.integers(1, 5)):
            rows.append({"item_id": f"i{item}", "judge": "j.verdict", "part": "", "score": float("nan"),
                         "verdict": ["yes", "no", "maybe"][rng.integers(3)]})
    return pd.DataFrame(rows), scales


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_vectorised_calibration_consensus_is_the_scalar_rule(seed):
    from scijudge.metrics.calibration.scales import _consensus

    lab, scales = _random_labels(seed)
    scores, verdicts, ties = _consensus(lab, scales, {"j.cont"})
    groups = lab[lab["score"].notna()].groupby(["item_id", "judge", "part"])
    assert len(scores) == groups.ngroups
    for row in scores.itertuples():
        values = groups.get_group((row.item_id, row.judge, row.part))["score"].tolist()
        expected = statistics.median(values) if row.judge == "j.cont" else consensus_score(values, scales[row.judge])
        assert math.isclose(row.h_score, expected, abs_tol=1e-12), (row, values)
        assert row.n_annotators == len(values)
    by_unit = lab[lab["verdict"].notna()].groupby(["item_id", "judge", "part"])["verdict"]
    expected_verdicts = {key: majority_verdict(v) for key, v in by_unit}
    assert ties == sum(v is None for v in expected_verdicts.values()) > 0
    got = {(r.item_id, r.judge, r.part): r.h_verdict for r in verdicts.itertuples()}
    assert got == {k: v for k, v in expected_verdicts.items() if v is not None}


def test_optimization_examples_take_the_one_consensus(tmp_path):
    from scijudge.data import Item
    from scijudge.labels import HumanLabel
    from scijudge.optimization._data import build_data
    from scijudge.optimization._judge_metrics import HUMAN, VERDICT
    from scijudge.optimization._recipes import recipe_from_dict
    from scijudge.spec.judge_spec import get_spec

    spec = get_spec("yescieval.qa.correctness")
    items = [Item(id=f"i{k}", question="q", answer="a", papers=[{"title": "t", "abstract": "x"}]) for k in range(3)]
    scores = {"i0": [1, 2], "i1": [2, 3, 5], "i2": [4]}  # medians 1.5 (half-way: to the even step index 0, so 1), 3, 4
    labels = [HumanLabel(item_id=i, judge=spec.name, score=s, annotator=f"a{n}")
              for i, ss in scores.items() for n, s in enumerate(ss)]
    data = build_data(spec, items, labels, recipe_from_dict({"optimizer": "bootstrap_rs", "metric": "likert_abs"}), None)
    strata = {ex["sj_item"]: ex["sj_stratum"] for ex in data.examples}
    assert strata == {"i0": 1.0, "i1": 3.0, "i2": 4.0}
    assert {ex["sj_item"]: ex[HUMAN] for ex in data.examples} == {"i0": 1.5, "i1": 10 / 3, "i2": 4.0}  # means

    votes = {"i0": ["Yes", " yes"], "i1": ["yes", "no"], "i2": ["NO"]}  # i1 is a tie: no consensus, left out
    labels = [HumanLabel(item_id=i, judge=spec.name, verdict=v, annotator=f"a{n}")
              for i, vs in votes.items() for n, v in enumerate(vs)]
    data = build_data(spec, items, labels, recipe_from_dict({"optimizer": "bootstrap_rs", "metric": "verdict_balanced"}),
                      None)
    assert {ex["sj_item"]: ex[VERDICT] for ex in data.examples} == {"i0": "yes", "i2": "no"}
    assert any("1 labelled unit(s) with tied verdicts" in note for note in data.notes)


# --- pydantic errors ---------------------------------------------------------------------------------------
class _Thing(BaseModel):
    name: str
    size: int

    @field_validator("size")
    @classmethod
    def _positive(cls, value: int) -> int:
        if value <= 0:
            raise ValueError("size must be positive")
        return value


def test_validation_errors_are_worded_once():
    with pytest.raises(Exception) as missing:
        _Thing.model_validate({"size": 1})
    assert validation_problem(missing.value) == ("missing", ("name",), "required field is missing")
    with pytest.raises(Exception) as bad:
        _Thing.model_validate({"name": "x", "size": 0})
    error = from_validation_error(bad.value, file="f.jsonl", line=3, field_prefix="things.2")
    assert str(error) == "f.jsonl:3, field 'things.2.size': size must be positive"


def test_importers_and_checklist_name_the_field_the_same_way(tmp_path):
    from scijudge.data import Item, load_items
    from scijudge.importers.researchrubrics import load_human_verdicts
    from scijudge.judges.checklist._rubric import rubric_entries

    items = tmp_path / "items.jsonl"
    items.write_text(json.dumps({"question": "q"}) + "\n")
    with pytest.raises(InputError) as caught:
        load_items(items)
    assert (caught.value.line, caught.value.field, caught.value.reason) == (1, "id", "required field is missing")

    verdicts = tmp_path / "verdicts.jsonl"
    verdicts.write_text(json.dumps({"sample_id": "s", "verdict": "Satisfied"}) + "\n")
    with pytest.raises(InputError) as caught:
        load_human_verdicts(verdicts)
    assert (caught.value.line, caught.value.field, caught.value.reason) == (1, "criterion", "required field is missing")

    item = Item(id="t", answer="a", meta={"rubrics": [{"criterion": "c", "weight": 1, "axis": "Explicit Criteria"},
                                                       {"weight": 2, "axis": "Explicit Criteria"}]})
    with pytest.raises(InputError) as caught:
        rubric_entries(item)
    assert (caught.value.field, caught.value.reason) == ("meta.rubrics.1.criterion", "required field is missing")


# --- records -----------------------------------------------------------------------------------------------
def test_attempt_totals_hand_computed():
    attempts = [Attempt(strategy="s", temperature=0, outcome="parse_error", tokens_in=10, tokens_out=3, cost=0.1),
                Attempt(strategy="s", temperature=0, outcome="ok", tokens_in=12, cost=0.2),
                Attempt(strategy="s", temperature=0, outcome="timeout")]
    assert attempt_totals(attempts) == {"tokens_in": 22, "tokens_out": 3, "cost": pytest.approx(0.3)}
    assert attempt_totals([Attempt(strategy="s", temperature=0, outcome="timeout")])["cost"] is None


def test_result_row_is_what_the_store_reads_back(tmp_path):
    from scijudge.run.store import Run

    result = JudgeResult(item_id="i", judge="j", family="likert", spec_hash="h", model="m", status="ok", score=3.0,
                         probs={"3": 1.0}, result={"rating": 3}, attempts=[Attempt(strategy="s", temperature=0,
                                                                                   outcome="ok")])
    with Run(tmp_path / "r.sqlite") as run:
        run.record(result)
        stored = list(run.rows())
    assert stored == [result_row(result)]
    assert list(result_row(result)) == list(RUN_COLUMNS)
    import sqlite3

    from scijudge.metrics.groups import REQUIRED_JUDGMENT_COLUMNS

    with sqlite3.connect(tmp_path / "r.sqlite") as db:  # the table is made from the one column list
        assert [row[1] for row in db.execute("PRAGMA table_info(judgments)")] == list(RUN_COLUMNS)
    assert set(REQUIRED_JUDGMENT_COLUMNS) <= set(RUN_COLUMNS)


# --- rating probabilities on the spec's scale ----------------------------------------------------------------
def _spec_file(tmp_path, step: float):
    from scijudge.spec.judge_spec import load_spec_file

    path = tmp_path / f"s{step}.toml"
    path.write_text('name = "t.s"\nfamily = "likert"\ndescription = "d"\ninstructions = "Rate it."\n'
                    f'[scale]\nmin = 1\nmax = 5\nstep = {step}\n[[inputs]]\nname = "answer"\n')
    return load_spec_file(path)


def _logprobs(value_tokens: list[str]) -> list[dict]:
    tokens = ['{"', "rationale", '":', ' "', "ok", '",', ' "', "rating", '":', " ", *value_tokens, "}"]
    out = [{"token": t, "logprob": 0.0, "top_logprobs": [{"token": t, "logprob": 0.0}]} for t in tokens]
    out[10] = {"token": value_tokens[0], "logprob": math.log(0.6),
               "top_logprobs": [{"token": "3", "logprob": math.log(0.6)}, {"token": "4", "logprob": math.log(0.4)}]}
    return out


@pytest.mark.parametrize(("step", "rating", "value_tokens", "probs"), [
    (1, 3, ["3"], {"1": 0.0, "2": 0.0, "3": 0.6, "4": 0.4, "5": 0.0}),
    (0.5, 3.5, ["3", ".5"], None),  # "3" then ".5": the alternatives of "3" are no half-step ratings
])
def test_rating_probabilities_follow_the_spec_scale(tmp_path, step, rating, value_tokens, probs):
    import dspy

    from scijudge.judges.base import Judge
    from scijudge.chain.chain import CallRecord

    spec = _spec_file(tmp_path, step)
    judge = Judge(spec)
    output = spec.output_type().model_validate({"rationale": "ok", "rating": rating})
    record = CallRecord(logprobs=_logprobs(value_tokens))
    prediction = dspy.Prediction(judgment=output, abstained=False, reason=None)
    result = judge.build_result("i", "", prediction, record, 0.0, "h")
    assert result.score == rating
    assert result.probs == (pytest.approx(probs) if probs else None)


def test_cost_map_setting_keeps_a_users_choice(monkeypatch):
    import os

    from scijudge.lm.dspy_compat import LOCAL_COST_MAP, use_local_cost_map

    monkeypatch.delenv(LOCAL_COST_MAP, raising=False)
    use_local_cost_map()
    assert os.environ[LOCAL_COST_MAP] == "true"
    monkeypatch.setenv(LOCAL_COST_MAP, "false")
    use_local_cost_map()
    assert os.environ[LOCAL_COST_MAP] == "false"


# --- perturbed variants, scales and error classes: one definition each ---------------------------------------
def test_variant_rules_have_one_copy():
    from scijudge import vocab
    from scijudge.data import variants as perturb
    from scijudge.metrics import robustness as metric
    from scijudge.optimization import _robustness as term

    for module in (perturb, metric, term):
        assert module.INJECTION is vocab.INJECTION == "injection"
    for module in (metric, term):  # perturb only makes variants: the robustness metric is metrics.robustness's
        assert module.rubric_of_judge is vocab.rubric_of_judge
    assert metric.VARIANT_ID is vocab.VARIANT_ID and not hasattr(perturb, "VARIANT_ID")  # ids: vocab's only
    hand = {"yescieval.qa.correctness": "correctness", "yescieval.pairwise.cohesion": "cohesion",
            "cohesion.pairwise": "cohesion", "likert": "likert", "pairwise": "pairwise"}
    for judge, rubric in hand.items():
        assert vocab.rubric_of_judge(judge) == rubric, judge
    found = vocab.VARIANT_ID.match("a::b::c::injection::extreme")
    assert found is not None and found.groupdict() == {"base": "a::b::c", "rubric": "injection", "level": "extreme"}
    assert vocab.VARIANT_ID.match("a::cohesion::medium") is None


def test_calibration_scales_are_the_vocab_scale():
    from scijudge.estimation import _units
    from scijudge.metrics import calibration
    from scijudge.metrics.calibration.scales import FAMILY_SCALES, parse_scale

    assert calibration.ScaleTuple is ScaleTuple and _units.ScaleTuple is ScaleTuple
    scale, continuous = parse_scale("0,4,0.5")
    assert isinstance(scale, ScaleTuple) and scale == (0.0, 4.0, 0.5) and not continuous
    assert isinstance(FAMILY_SCALES["pairwise"], ScaleTuple) and FAMILY_SCALES["pairwise"] == (-4.0, 4.0, 1.0)


@pytest.mark.slow  # seconds: the fast subset stays under a minute
def test_every_scijudge_error_class_is_defined_in_errors_py(source_trees):
    import ast
    from pathlib import Path

    import scijudge
    from scijudge import errors

    src = Path(scijudge.__file__).parent
    sources = source_trees(src)
    public = set(dir(errors))
    outside = []
    for path in sources.paths:
        if path.name == "errors.py" and path.parent == src:
            continue
        for node in sources.nodes(path):
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                bases = {getattr(b, "id", getattr(b, "attr", "")) for b in node.bases}
                if bases & public and any(isinstance(getattr(errors, b, None), type)
                                          and issubclass(getattr(errors, b), Exception) for b in bases):
                    outside.append(f"{path.relative_to(src)}:{node.name}")
    assert outside == []
    from scijudge.judges.presets._yescieval_source import YESciEvalMissing
    from scijudge.optimization._retry import FatalModelError
    from scijudge.run.batch.openai import BatchFault, ResultsUnavailable
    from scijudge.run.store import StoreWriteError

    assert (FatalModelError, BatchFault, ResultsUnavailable, YESciEvalMissing, StoreWriteError) == (
        errors.FatalModelError, errors.BatchFault, errors.ResultsUnavailable, errors.YESciEvalMissing,
        errors.StoreWriteError)
    assert [c.exit_code for c in (FatalModelError, BatchFault, StoreWriteError)] == [3, 3, 3]
    assert YESciEvalMissing.exit_code == 2
