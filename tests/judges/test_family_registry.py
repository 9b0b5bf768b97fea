"""Judge families and output types by registered name: a new family in a few lines, judged end to end;
outputs looked up by name and by their old import paths; unknown names fail with the registered ones listed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import pytest
from pydantic import Field

from scijudge.spec import families, output_types
from scijudge.data import Item
from scijudge.errors import SpecError
from scijudge.spec.families import Family, get_family, register_family
from scijudge.judges.base import Judge
from scijudge.judges.build import build_judge
from scijudge.spec.output_types import find_output, get_output, register_output
from scijudge.spec.outputs import JudgeOutput, LikertRating, RunFields
from scijudge.run.api import judge_items
from scijudge.run.store import Run
from scijudge.spec.judge_spec import get_spec, load_spec_file
from scijudge.testing.scripted import request_text, scripted_lm

PAPERS = [{"title": "A study", "abstract": "It found things."}]
TOY_SPEC = """\
name = "toy.clarity"
family = "toy"
description = "Is the abstract clear?"
instructions = "Read the abstract and say whether a reader outside the field could follow it."

[[inputs]]
name = "abstract"
description = "The abstract."
"""


class ClarityGrade(JudgeOutput):
    """A toy family's output: clear or not, with a reason."""

    reason: str = Field(description="Why.")
    grade: Literal["clear", "unclear"] = Field(description="'clear' or 'unclear'.")

    def run_fields(self) -> RunFields:
        return RunFields(score=1.0 if self.grade == "clear" else 0.0, verdict=self.grade, rationale=self.reason)


@pytest.fixture
def fresh_registries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Registrations made by a test are undone after it (the built-ins stay)."""
    monkeypatch.setattr(families, "_FAMILIES", dict(families._FAMILIES))
    monkeypatch.setattr(output_types, "_OUTPUTS", dict(output_types._OUTPUTS))
    monkeypatch.setattr(output_types, "_BY_PATH", dict(output_types._BY_PATH))


def _grade(request: object) -> str:
    """Scripted model: an abstract that says 'plainly' is clear."""
    text = request_text(request).rsplit("abstract", 1)[-1]
    grade = "clear" if "plainly" in text else "unclear"
    return json.dumps({"judgment": {"reason": f"it reads {grade}", "grade": grade}})


def test_a_new_family_in_a_few_lines_is_judged_end_to_end(tmp_path: Path, fresh_registries: None) -> None:
    built: list[str] = []
    register_output("toy.clarity", ClarityGrade)

    @families.family("toy", output="toy.clarity", track="verdict", score_scale=(0.0, 1.0, 1.0))
    def toy_judge(spec, *, lm=None, **_options):
        built.append(spec.name)
        return Judge(spec, lm=lm)

    (tmp_path / "toy.toml").write_text(TOY_SPEC, encoding="utf-8")
    spec = load_spec_file(tmp_path / "toy.toml")
    assert spec.output == "toy.clarity" and spec.output_type() is ClarityGrade  # the family's default output
    assert spec.scale is None  # the toy family does not ask for a scale
    judge = build_judge(spec, lm=scripted_lm(_grade))
    assert built == ["toy.clarity"] and judge.family is get_family("toy")  # build_judge asked the family
    items = [Item(id="a1", inputs={"abstract": "We say plainly what we measured."}),
             Item(id="a2", inputs={"abstract": "Ergodic sheaves."})]
    with Run(tmp_path / "toy.sqlite") as run:
        summary = judge_items(items, [judge], run=run, concurrency=2)
        frame = run.to_pandas().set_index("item_id")
    assert summary.ok == 2
    assert frame.loc["a1", "family"] == "toy" and frame.loc["a1", "verdict"] == "clear"
    assert frame.loc["a2", "verdict"] == "unclear" and frame.loc["a2", "score"] == 0.0
    assert frame.loc["a1", "spec_hash"] == spec.spec_hash()


def test_family_hooks_decide_parts_inputs_and_calibration_scale(fresh_registries: None) -> None:
    """A family's parts rule and default score scale reach the judge and calibration without other edits."""
    import pandas as pd

    from scijudge.metrics.calibration import FAMILY_SCALES, calibrate

    register_family(Family(name="twice", output="likert", needs_scale=True, track="continuous",
                           score_scale=(1.0, 5.0, 1.0), parts=lambda item: ["first", "second"]))
    spec = get_spec("yescieval.qa.correctness").model_copy(update={"family": "twice", "name": "twice.correctness"})
    judge = build_judge(spec)
    assert judge.parts(Item(id="x", question="q", answer="a", papers=[])) == ["first", "second"]
    assert FAMILY_SCALES["twice"] == (1.0, 5.0, 1.0) and FAMILY_SCALES["pairwise"] == (-4.0, 4.0, 1.0)

    # No spec with the stored hash is known: the family's scale is used, continuous because its track says so.
    rows = [{"item_id": f"i{k}", "judge": "twice.correctness", "part": "", "family": "twice", "spec_hash": "unknown",
             "model": "m", "status": "ok", "score": s, "verdict": None, "confidence": None, "probs": None}
            for k, s in enumerate([2.5, 4.0, 3.0, 1.5])]
    labels = pd.DataFrame({"item_id": [f"i{k}" for k in range(4)], "judge": "twice.correctness", "part": "",
                           "score": [2.0, 4.0, 4.0, 1.0], "annotator": "h"})
    result = calibrate(pd.DataFrame(rows), labels, n_boot=0)
    assert result.continuous == ["twice.correctness"]
    row = result.per_rubric.iloc[0]
    assert row["mae"] == pytest.approx((0.5 + 0 + 1 + 0.5) / 4)  # raw values, by hand


def test_builtin_families_keep_their_behaviour() -> None:
    from scijudge.judges.checklist import ChecklistJudge

    assert get_family("likert").rating_probs and not get_family("checklist").one_call
    assert not get_family("pairwise").optimizable
    pair = get_spec("yescieval.qa.correctness.pairwise")
    judge = build_judge(pair)
    item = Item(id="p", question="q", papers=PAPERS, answer="first", answer_b="second")
    assert judge.parts(item) == ["AB", "BA"]
    assert judge.inputs_for(item, "BA")["answer_a"] == "second"
    assert judge.parts(Item(id="p1", question="q", papers=PAPERS, answer="only")) == []
    assert isinstance(build_judge(get_spec("researchrubrics.checklist")), ChecklistJudge)


@pytest.mark.parametrize(("name", "old_path"), [
    ("researchrubrics.verdict", "scijudge.judges.checklist:CriterionVerdict"),
    ("researchrubrics.verdict.ternary", "scijudge.judges.checklist:TernaryCriterionVerdict"),
    ("lematerial.synthesis", "scijudge.materials.outputs:SynthesisJudgment"),
    ("lematerial.linking", "scijudge.materials.outputs:LinkingJudgment"),
])
def test_outputs_by_name_and_by_old_path_are_one_type_with_one_hash(name: str, old_path: str) -> None:
    import importlib

    module, _, cls = old_path.partition(":")
    expected = getattr(importlib.import_module(module), cls)
    assert get_output(name) is expected and find_output(old_path) is find_output(name)
    shipped = next(s for s in (get_spec(n) for n in ("researchrubrics.checklist", "researchrubrics.checklist.ternary",
                                                     "lematerial.synthesis", "lematerial.linking"))
                   if s.output == name)
    old = shipped.model_copy(update={"output": old_path})
    assert old.output_type() is shipped.output_type() is expected
    assert old.spec_hash() == shipped.spec_hash()


def test_shipped_spec_hashes_did_not_move() -> None:
    """Hashes recorded before outputs had names (stored runs resume and calibrate by them)."""
    assert get_spec("researchrubrics.checklist").spec_hash() == "cdc7eb8143a9f7e2"
    assert get_spec("lematerial.synthesis").spec_hash() == "6e6b7eebda28c8c5"
    assert get_spec("lematerial.linking").spec_hash() == "b9e321f562118502"


def test_likert_by_import_path_stays_unscaled_as_before(tmp_path: Path) -> None:
    """'scijudge.spec.outputs:LikertRating' was never the scaled built-in: it still imports the class as written."""
    text = TOY_SPEC.replace('family = "toy"', 'family = "likert"\noutput = "scijudge.spec.outputs:LikertRating"')
    (tmp_path / "l.toml").write_text(text + "\n[scale]\nmin = 0\nmax = 10\n", encoding="utf-8")
    assert load_spec_file(tmp_path / "l.toml").output_type() is LikertRating


def test_unknown_family_names_the_file_line_and_the_registered_families(tmp_path: Path) -> None:
    (tmp_path / "bad.toml").write_text(TOY_SPEC.replace('"toy"', '"tally"'), encoding="utf-8")
    with pytest.raises(SpecError) as caught:
        load_spec_file(tmp_path / "bad.toml")
    message = str(caught.value)
    assert "bad.toml:2" in message and "field 'family'" in message
    assert "'tally'" in message and "checklist, likert, linking, pairwise, synthesis" in message


def test_unknown_output_name_lists_the_registered_outputs(tmp_path: Path) -> None:
    text = TOY_SPEC.replace('family = "toy"', 'family = "likert"\noutput = "likert.tenpoint"')
    (tmp_path / "out.toml").write_text(text, encoding="utf-8")
    spec = load_spec_file(tmp_path / "out.toml")
    with pytest.raises(SpecError) as caught:
        spec.output_type()
    message = str(caught.value)
    assert "out.toml" in message and "'likert.tenpoint'" in message and "field 'output'" in message
    assert "lematerial.synthesis" in message and "researchrubrics.verdict" in message


def test_a_name_cannot_be_registered_twice(fresh_registries: None) -> None:
    with pytest.raises(ValueError, match="already registered"):
        register_output("likert", ClarityGrade)
    with pytest.raises(ValueError, match="already registered"):
        register_family(Family(name="likert", output="toy.clarity"))
