"""Every judge family optimizes: the ResearchRubrics checklist judge against human verdicts (tasks + reports),
a materials judge per criterion against per-criterion labels. Expected numbers come from the labels and sklearn."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from sklearn.metrics import accuracy_score, balanced_accuracy_score

from scijudge.errors import InputError
from scijudge.labels import HumanLabel
from scijudge.optimization import optimize, recipe_from_dict
from scijudge.testing.toy_judge import TRIGGER, ToyWorld, _split_messages, output_fields
from scijudge.testing.scripted import scripted_lm

COPRO = {"optimizer": "copro", "settings": {"breadth": 3, "depth": 1, "num_threads": 1},
         "split": {"train": 0.5, "dev": 0.2, "test": 0.3, "seed": 2}, "budget": {"max_lm_calls": 600}}


class _World(ToyWorld):
    """The toy proposer, with a judge answer of another output type (``answer(system, final)``)."""

    def __init__(self, answer: Any, base_instructions: str) -> None:
        super().__init__({}, base_instructions=base_instructions)
        self.answer = answer

    def reply(self, messages: list[tuple[str, str]], temperature: float | None) -> str:
        system = "\n".join(t for r, t in messages if r == "system")
        if output_fields(system) == ["judgment"]:
            _, _, final = _split_messages(messages)
            return json.dumps({"judgment": self.answer(system, final)})
        return self.proposer_reply(messages)


# --- checklist ------------------------------------------------------------------------------------------


def _checklist_files(tmp_path: Path, n_tasks: int = 14) -> tuple[Path, Path, Path, dict[tuple[str, str], str]]:
    from scijudge.importers.researchrubrics import criterion_id

    tasks, verdicts, truth = [], [], {}
    reports = tmp_path / "reports"
    reports.mkdir()
    for t in range(n_tasks):
        sid = f"task{t:02d}"
        rubrics, lines = [], [f"# Report {sid}", "An overview of the question."]
        for c in range(3):
            text = f"The report discusses factor F{t}x{c} and its consequences."
            rubrics.append({"criterion": text, "weight": 2.0, "axis": "Explicit Criteria"})
            met = (t + c) % 3 != 0
            if met:
                lines.append(f"Factor F{t}x{c} is covered here, with its consequences.")
            verdict = "Satisfied" if met else "Not Satisfied"
            verdicts.append({"sample_id": sid, "criterion": text, "verdict": verdict, "annotator": "ann1"})
            truth[(sid, criterion_id(text))] = "satisfied" if met else "not_satisfied"
        tasks.append({"sample_id": sid, "prompt": f"Research question {sid}?", "rubrics": rubrics})
        (reports / f"{sid}.md").write_text("\n\n".join(lines), encoding="utf-8")
    tasks_path, verdicts_path = tmp_path / "tasks.jsonl", tmp_path / "verdicts.jsonl"
    tasks_path.write_text("".join(json.dumps(t) + "\n" for t in tasks), encoding="utf-8")
    verdicts_path.write_text("".join(json.dumps(v) + "\n" for v in verdicts), encoding="utf-8")
    return tasks_path, reports, verdicts_path, truth


def _checklist_answer(system: str, final: str) -> dict[str, Any]:
    """Says 'satisfied' to everything until its instructions carry the calibration wording; then it checks."""
    factor = re.search(r"discusses factor (F\d+x\d)", final)
    met = bool(factor) and f"Factor {factor.group(1)} is covered" in final
    verdict = ("satisfied" if met else "not_satisfied") if TRIGGER in system.lower() else "satisfied"
    return {"reasoning": "Looked for the factor.", "evidence_quotes": [], "missing_elements": [],
            "verdict": verdict, "confidence": 0.8}


@pytest.mark.slow
def test_checklist_judge_optimizes_against_human_verdicts(tmp_path: Path) -> None:
    from scijudge.importers.researchrubrics import load_checklist_items, load_human_verdicts, read_tasks
    from scijudge.spec.signatures import render_instructions
    from scijudge.spec.judge_spec import get_spec

    tasks_path, reports, verdicts_path, truth = _checklist_files(tmp_path)
    items, skipped = load_checklist_items(tasks_path, reports)
    tasks, _ = read_tasks(tasks_path)
    labels = load_human_verdicts(verdicts_path, tasks=tasks)
    spec = get_spec("researchrubrics.checklist")
    world = _World(_checklist_answer, render_instructions(spec))
    recipe = recipe_from_dict({**COPRO, "metric": "verdict_balanced"})
    result = optimize(spec, items, labels, scripted_lm(world.respond), recipe, out=tmp_path / "opt", n_boot=0)

    rows = result.test_judgments
    assert set(rows["part"]) <= {cid for _, cid in truth}  # one judgment per (report, criterion)
    for role in ("before", "after"):
        mine = rows[rows["role"] == role]
        human = [truth[(i, p)] for i, p in zip(mine["item_id"], mine["part"])]
        assert result.__dict__[role]["balanced_accuracy"] == pytest.approx(balanced_accuracy_score(human, mine["verdict"]))
    assert result.before["balanced_accuracy"] == pytest.approx(0.5)  # "satisfied" to everything
    assert result.after["balanced_accuracy"] == pytest.approx(1.0)
    assert result.spec_path.exists() and result.spec.family == "checklist"


# --- materials ------------------------------------------------------------------------------------------


CRITERIA = ("structural_completeness", "process_steps")


def _materials_setup(n: int = 14) -> tuple[list[Any], list[HumanLabel], dict[tuple[str, str], float]]:
    from scijudge.data import Item

    items, labels, truth = [], [], {}
    for i in range(n):
        marker = f"M-{i:03d}"
        items.append(Item(id=f"m{i:03d}", inputs={"source_text": f"Procedure {marker}: " + "the powders were ball-milled, dried and annealed at 700 C under argon for ten hours. " * 2,  # noqa: E501 - a data record, kept on one line
                                                  "extracted_synthesis": json.dumps({
                                                      "target_compound": "LiFePO4", "synthesis_method": "solid-state",
                                                      "starting_materials": [{"name": "Li2CO3"}], "steps": [],
                                                      "equipment": [], "notes": None})}))
        for k, name in enumerate(CRITERIA):
            value = float(1 + (i + 2 * k) % 4)  # 1..4: an optimistic +1 never leaves the scale
            truth[(f"m{i:03d}", name)] = value
            labels.append(HumanLabel(item_id=f"m{i:03d}", judge="lematerial.synthesis", part=name, score=value,
                                     annotator="ann1"))
    return items, labels, truth


@pytest.mark.slow
def test_materials_judge_optimizes_per_criterion() -> None:
    from scijudge.materials.outputs import SynthesisJudgment
    from scijudge.spec.signatures import render_instructions
    from scijudge.spec.judge_spec import get_spec

    items, labels, truth = _materials_setup()
    by_marker = {f"M-{int(i[1:]):03d}": i for i, _ in truth}

    def answer(system: str, final: str) -> dict[str, Any]:
        item = by_marker[re.search(r"M-\d{3}", final).group(0)]
        bias = 0.0 if TRIGGER in system.lower() else 1.0
        out: dict[str, Any] = {}
        for name in SynthesisJudgment.CRITERIA:  # unlabelled criteria at 5: the overall differs from every label
            out[name] = {"reasoning": name, "score": truth[(item, name)] + bias if name in CRITERIA else 5.0}
        out.update(reasoning="r", confidence="medium", missing_information=[], extraction_errors=[],
                   improvement_suggestions=[])
        return out

    spec = get_spec("lematerial.synthesis")
    world = _World(answer, render_instructions(spec))
    result = optimize(spec, items, labels, scripted_lm(world.respond), recipe_from_dict(COPRO), n_boot=0)
    rows = result.test_judgments
    for role, bias in (("before", 1.0), ("after", 0.0)):
        mine = rows[rows["role"] == role]
        human = [truth[(i, p)] for i, p in zip(mine["item_id"], mine["part"])]
        assert list(mine["score"]) == [h + bias for h in human]  # each criterion's own score, not the overall
        assert result.__dict__[role]["exact"] == pytest.approx(accuracy_score(human, mine["score"]))
    assert result.before["exact"] == 0.0 and result.after["exact"] == 1.0


def test_labels_for_unknown_parts_are_refused() -> None:
    items, labels, _ = _materials_setup()
    labels[3] = labels[3].model_copy(update={"part": "yield"})
    with pytest.raises(InputError, match="label part 'yield' is not something judge 'lematerial.synthesis'"):
        optimize("lematerial.synthesis", items, labels, scripted_lm(lambda r: ""), recipe_from_dict(COPRO))


# --- robustness term --------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gepa"])  # COPRO does the same (slower: breadth 6 to meet the rule)
def test_robustness_term_prefers_instructions_that_rate_perturbed_answers_lower(name: str) -> None:
    """The toy proposer offers calibration with and without a 'penalise unsupported claims' rule; both agree
    equally with the humans on the originals, so only the robustness term tells them apart."""
    from scijudge.optimization import Robustness
    from scijudge.testing.toy_judge import ROBUST_TRIGGER, toy_setup, toy_variants

    settings = {"gepa": {"max_metric_calls": 80}, "copro": {"breadth": 6, "depth": 1}}[name]
    recipe = recipe_from_dict({"optimizer": name, "settings": settings, "split": {"seed": 3},
                               "budget": {"max_lm_calls": 800}})
    found = {}
    for with_term in (False, True):
        spec, items, labels, world = toy_setup()
        world.robust_proposals = True
        result = optimize(spec, items, labels, scripted_lm(world.respond), recipe, n_boot=0,
                          robustness=Robustness(toy_variants(items)) if with_term else None)
        found[with_term] = result
    assert ROBUST_TRIGGER not in found[False].spec.instructions.lower()
    tuned = found[True]
    assert ROBUST_TRIGGER in tuned.spec.instructions.lower()
    assert tuned.after["exact"] == found[False].after["exact"] == 1.0  # agreement is not traded away

    # robustness recomputed here: share of test variants rated below the same judge's rating of the original
    rows, variants = tuned.test_judgments, tuned.variant_judgments
    assert set(variants["item_id"].str.split("::").str[0]) == set(tuned.split.test)  # test variants only
    for role in ("before", "after"):
        own = dict(zip(rows[rows["role"] == role]["item_id"], rows[rows["role"] == role]["score"]))
        mine = variants[variants["role"] == role]
        below = [s < own[i.split("::")[0]] for i, s in zip(mine["item_id"], mine["score"])]
        assert tuned.__dict__[role]["robustness"] == pytest.approx(sum(below) / len(below))
        assert tuned.__dict__[role]["n_variants"] == len(below) == len(tuned.split.test)
    assert tuned.before["robustness"] == 0.0 and tuned.after["robustness"] > 0.8
