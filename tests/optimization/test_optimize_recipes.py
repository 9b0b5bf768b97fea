"""Every shipped recipe end to end against a scripted judge whose bias depends on its prompt.

The toy judge rates true quality + 2 (clipped) unless its instructions carry calibration wording (which
the scripted proposer offers in half its proposals) or its demonstrations show calibrated ratings; see
scijudge.testing.toy_judge. Expected numbers come from the labels and sklearn, never from the code under test.
"""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sklearn.metrics import accuracy_score

from scijudge.optimization._guard import InstructionGuard
from scijudge.optimization._judge_metrics import FeedbackMetric, JudgeMetric, class_weights
from scijudge.testing.toy_judge import CALIBRATION_SENTENCE, ToyWorld, markers, toy_setup
from scijudge.optimization._recipes import load_recipe, recipe_from_dict
from scijudge.errors import InputError, ScijudgeError
from scijudge.judges.base import Judge
from scijudge.optimization import load_optimized_judge, load_program, optimize
from scijudge.spec.signatures import render_instructions
from scijudge.spec.judge_spec import get_spec
from scijudge.testing.scripted import request_text, scripted_lm

REPO = Path(__file__).resolve().parents[2]
RECIPES = sorted((REPO / "optimizers").glob("*.toml"))
TINY: dict[str, dict[str, Any]] = {  # small settings so that each recipe runs in a few seconds
    "bootstrap_rs": {"num_candidate_programs": 2, "max_bootstrapped_demos": 2, "max_labeled_demos": 2},
    "mipro": {"num_candidates": 3, "num_trials": 4, "max_bootstrapped_demos": 1, "max_labeled_demos": 1},
    "gepa": {"max_metric_calls": 60},
    "simba": {"bsize": 6, "num_candidates": 3, "max_steps": 2, "max_demos": 1},
    "copro": {"breadth": 3, "depth": 1},
}


def tiny(path: Path, **budget: Any) -> Any:
    """The shipped recipe at ``path`` with small settings, one thread, and a budget."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    data["settings"] = {**data.get("settings", {}), **TINY[data["optimizer"]], "num_threads": 1}
    data["budget"] = {"max_lm_calls": 400, **budget}
    data["split"] = {**data["split"], "seed": 3}
    return recipe_from_dict(data, source=path)


def exact_by_role(result: Any, labels: list[Any]) -> dict[str, float]:
    """Exact agreement of each role's test judgments with the labels (sklearn, abstentions count as misses)."""
    truth = {lab.item_id: lab.score for lab in labels}
    out = {}
    for role, rows in result.test_judgments.groupby("role"):
        judged = [r["score"] if r["status"] == "ok" else -1 for _, r in rows.iterrows()]
        out[role] = accuracy_score([truth[i] for i in rows["item_id"]], judged)
    return out


def prompts(judge: Judge, items: list[Any]) -> list[str]:
    """The full text (system, demos, question) and response format of every request the judge sends."""
    lm = judge.lm
    start = len(lm.engine.requests)
    for item in items:
        judge.judge_one(item)
    return [request_text(r) + json.dumps(r.config.response_format, sort_keys=True)
            for r in lm.engine.requests[start:]]


@pytest.mark.slow
@pytest.mark.parametrize("path", RECIPES, ids=[p.stem for p in RECIPES])
def test_recipe_end_to_end(path: Path, tmp_path: Path) -> None:
    spec, items, labels, world = toy_setup()
    lm = scripted_lm(world.respond)
    recipe = tiny(path)
    result = optimize(spec, items, labels, lm, recipe, out=tmp_path / "opt.toml", n_boot=50)

    # every call was counted: what the engine received is what the budget saw
    assert len(lm.engine.requests) == result.budget["lm_calls"] <= 400
    # held-out agreement improves (computed here from the test judgments and the labels)
    exact = exact_by_role(result, labels)
    assert exact["after"] > exact["before"]
    assert result.after["exact"] == pytest.approx(exact["after"])
    assert result.before["exact"] == pytest.approx(exact["before"])
    assert result.after["score"] > result.before["score"]

    # no test item is sent while optimizing; train/dev items are (so the check is not vacuous)
    by_id = {i.id: i for i in items}
    test_markers = set().union(*(markers(by_id[i].answer) for i in result.split.test))
    seen_markers = set().union(*(markers(by_id[i].answer) for i in result.split.train + result.split.dev))
    optimizing = [request_text(r) for r in lm.engine.requests[: result.budget["optimization_lm_calls"]]]
    sent = set().union(*(markers(t) for t in optimizing))
    assert not sent & test_markers
    assert sent & seen_markers
    for request in lm.engine.requests[result.budget["optimization_lm_calls"]:]:  # then only the test is judged
        last = "".join(getattr(p, "text", "") or "" for p in request.messages[-1].parts)
        assert markers(last) and markers(last) <= test_markers
    assert set(result.split.train).isdisjoint(result.split.test) and set(result.split.dev).isdisjoint(result.split.test)

    # the saved spec is a judge like any other, and sends the same prompts as the in-memory program
    reloaded = get_spec(result.spec_path)
    assert reloaded.spec_hash() == result.spec.spec_hash()
    assert reloaded.provenance["optimizer"] == recipe.optimizer
    assert reloaded.provenance["base_spec_hash"] == spec.spec_hash()
    sample = [by_id[i] for i in result.split.test[:3]]
    result.program.lm = scripted_lm(world.respond)
    in_memory = prompts(result.program, sample)
    from_spec = prompts(load_optimized_judge(result.spec_path, lm=scripted_lm(world.respond)), sample)
    from_json = prompts(load_program(result.program_path, result.spec, lm=scripted_lm(world.respond)), sample)
    assert in_memory == from_spec == from_json
    assert len(in_memory) == 3
    changed = (render_instructions(result.spec) != render_instructions(spec)) or bool(result.spec.demos)
    assert changed


def test_guard_keeps_rewrites_that_drop_inputs_from_being_sent() -> None:
    """A proposer whose calibrated rewrites drop the papers: those candidates must never reach the judge model."""
    spec, items, labels, world = toy_setup()
    bad = "Rate it. " + CALIBRATION_SENTENCE.replace("the papers", "the sources")
    proposed: list[str] = []

    class Careless(ToyWorld):
        def _proposal(self, text: str) -> str:
            good = super()._proposal(text)
            out = bad if self.proposer_calls % 2 == 0 else good
            proposed.append(out)
            return out

    careless = Careless(world.truth, base_instructions=world.base_instructions)
    lm = scripted_lm(careless.respond)
    result = optimize(spec, items, labels, lm, tiny(REPO / "optimizers" / "copro.toml"), n_boot=0)
    assert bad in proposed  # the optimizer did get the tempting rewrite (it would rate perfectly)...
    judge_systems = [r.system for r in lm.engine.requests if "`judgment`" in str(r.system)]
    assert judge_systems and not any("Rate it." in str(s) for s in judge_systems)  # ...but never sent it
    assert InstructionGuard.for_spec(spec).problems(render_instructions(result.spec)) == []
    assert "Rate it." not in render_instructions(result.spec)


def test_guard_rules() -> None:
    spec = get_spec("yescieval.qa.correctness")
    guard = InstructionGuard.for_spec(spec)
    assert guard.required == ("papers", "answer")  # the base text never names the question
    assert guard.problems(render_instructions(spec)) == []
    assert guard.problems("Rate the answer against each paper.") == []  # singular forms count
    assert guard.problems("Rate the answer.") == ["no longer mentions the input 'papers'"]
    assert guard.problems("Use {context} to rate the answer given the papers.") == [
        "refers to an unknown field 'context'"]
    assert guard.problems("Read [[ ## notes ## ]] and the papers, then the answer.") == [
        "refers to an unknown field 'notes'"]
    assert guard.problems("Read {papers} and {answer}; write the {judgment}.") == []


def test_metrics_by_hand() -> None:
    import dspy

    from scijudge.spec.outputs import LikertRating

    ex = dspy.Example(sj_item="a", sj_part="", sj_human=2.0, sj_scores=[2.0], sj_rationales=["two claims are wrong"])
    pred = dspy.Prediction(judgment=LikertRating(rating=4, rationale="x"), abstained=False)
    assert JudgeMetric("likert_abs")(ex, pred) == pytest.approx(1 - 2 / 4)
    assert JudgeMetric("likert_sq")(ex, pred) == pytest.approx(1 - (2 / 4) ** 2)
    assert JudgeMetric("likert_abs")(ex, dspy.Prediction(judgment=None, abstained=True, reason="x")) == 0.0
    assert JudgeMetric("likert_abs")(ex, pred, trace=[]) is False  # not a demonstration: 2 points off
    ok = dspy.Prediction(judgment=LikertRating(rating=2, rationale="x"), abstained=False)
    assert JudgeMetric("likert_abs")(ex, ok, trace=[]) is True
    two = dspy.Example(sj_item="b", sj_part="", sj_human=2.5, sj_scores=[2.0, 3.0], sj_rationales=[])
    assert JudgeMetric("likert_abs")(two, ok) == pytest.approx(1 - 0.5 / 4)
    fb = FeedbackMetric("likert_abs")(ex, pred, None, "predict", None)
    assert fb.score == pytest.approx(0.5)
    assert fb.feedback.startswith("You rated 4; the annotator rated 2 on the 1-5 scale.")
    assert "2 point(s) too high" in fb.feedback and "two claims are wrong" in fb.feedback
    gone = FeedbackMetric("likert_abs")(ex, dspy.Prediction(judgment=None, abstained=True, reason="parse_error"))
    assert gone.score == 0 and "no usable judgment (parse_error)" in gone.feedback


def test_verdict_metric_ranks_like_balanced_accuracy() -> None:
    """mean(metric) = balanced accuracy × K·n_rarest/N, checked against sklearn on random verdicts."""
    import dspy
    from sklearn.metrics import balanced_accuracy_score

    class V:
        def __init__(self, verdict: str) -> None:
            self.verdict = verdict

        def run_fields(self) -> Any:
            from scijudge.spec.outputs import RunFields

            return RunFields(verdict=self.verdict)

    rng = np.random.default_rng(0)
    human = list(rng.choice(["yes", "no", "partial"], size=40, p=[0.6, 0.3, 0.1]))
    weights = class_weights(human)
    metric = JudgeMetric("verdict_balanced", class_weights=weights)
    counts = {c: human.count(c) for c in set(human)}
    for _ in range(5):
        judged = list(rng.choice(["yes", "no", "partial"], size=40))
        scores = [metric(dspy.Example(sj_verdict=h), dspy.Prediction(judgment=V(j), abstained=False))
                  for h, j in zip(human, judged)]
        factor = len(counts) * min(counts.values()) / len(human)
        assert np.mean(scores) == pytest.approx(balanced_accuracy_score(human, judged) * factor)


# --- bad input: clear errors before any LM call -----------------------------------------------------


def _never(request: Any) -> str:
    raise AssertionError("no LM call may happen")


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_unknown_optimizer_and_wrong_field_fail_before_any_call(tmp_path: Path) -> None:
    spec, items, labels, _ = toy_setup()
    lm = scripted_lm(_never)
    bad = _write(tmp_path / "bad.toml", 'metric = "likert_abs"\noptimizer = "mipro3"\n')
    with pytest.raises(InputError) as err:
        optimize(spec, items, labels, lm, bad)
    assert (err.value.file, err.value.line, err.value.field) == (str(bad), 2, "optimizer")
    assert "mipro3" in str(err.value) and "copro" in str(err.value)
    typo = _write(tmp_path / "typo.toml", 'optimizer = "copro"\n\n[settings]\nbreadth = 3\ndeepth = 2\n')
    with pytest.raises(InputError) as err:
        optimize(spec, items, labels, lm, typo)
    assert (err.value.line, err.value.field) == (5, "settings.deepth")
    split = _write(tmp_path / "split.toml", 'optimizer = "copro"\n[split]\ntrian = 0.5\n')
    with pytest.raises(InputError) as err:
        load_recipe(split)
    assert (err.value.line, err.value.field) == (3, "split.trian")
    assert lm.engine.requests == []


def test_too_few_labelled_items_fail_before_any_call(tmp_path: Path) -> None:
    spec, items, labels, _ = toy_setup(n_items=30)
    lm = scripted_lm(_never)
    labels_path = tmp_path / "labels.jsonl"
    labels_path.write_text("".join(lab.model_dump_json() + "\n" for lab in labels[:2]), encoding="utf-8")
    with pytest.raises(InputError) as err:
        optimize(spec, items, labels_path, lm, tiny(REPO / "optimizers" / "mipro.toml"))
    assert err.value.file == str(labels_path) and err.value.field == "item_id"
    assert "2 item(s)" in str(err.value) and "needs at least 3" in str(err.value)
    # enough items for three splits, but fewer training examples than SIMBA's mini-batch
    few = tmp_path / "few.jsonl"
    few.write_text("".join(lab.model_dump_json() + "\n" for lab in labels[:6]), encoding="utf-8")
    with pytest.raises(InputError) as err:
        optimize(spec, items, few, lm, tiny(REPO / "optimizers" / "simba.toml"))
    assert "bsize = 6" in str(err.value) and err.value.file == str(few)
    assert lm.engine.requests == []


def test_budget_too_small_for_the_test_evaluation(tmp_path: Path) -> None:
    spec, items, labels, _ = toy_setup()
    lm = scripted_lm(_never)
    recipe = tiny(REPO / "optimizers" / "copro.toml", max_lm_calls=10)
    with pytest.raises(InputError) as err:
        optimize(spec, items, labels, lm, recipe)
    # 7 test items (0.25 of 30, rounded) x 2 judges x 1.25 for retries = 17.5 -> 18, + 1 preflight call
    assert err.value.field == "budget.max_lm_calls" and "test evaluation alone take 19 calls" in str(err.value)
    assert lm.engine.requests == []


def test_label_problems_name_the_labels_line(tmp_path: Path) -> None:
    spec, items, labels, _ = toy_setup()
    lm = scripted_lm(_never)
    path = tmp_path / "labels.jsonl"
    rows = [lab.model_dump(exclude_none=True) for lab in labels]
    rows[4]["item_id"] = "nope"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with pytest.raises(InputError) as err:
        optimize(spec, items, path, lm, tiny(REPO / "optimizers" / "copro.toml"))
    assert (err.value.file, err.value.line, err.value.field) == (str(path), 5, "item_id")
    rows[4]["item_id"], rows[6]["score"] = labels[4].item_id, 7
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with pytest.raises(InputError) as err:
        optimize(spec, items, path, lm, tiny(REPO / "optimizers" / "copro.toml"))
    assert (err.value.line, err.value.field) == (7, "score") and "outside" in str(err.value)
    verdict_recipe = recipe_from_dict({"optimizer": "copro", "metric": "verdict_balanced"}, source="v.toml")
    with pytest.raises(InputError) as err:
        optimize(spec, items, labels, lm, verdict_recipe)
    assert err.value.field == "metric" and "needs verdict labels" in str(err.value)
    assert lm.engine.requests == []


# --- tracking and the command -----------------------------------------------------------------------


def test_mlflow_missing_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    spec, items, labels, _ = toy_setup()
    monkeypatch.setitem(sys.modules, "mlflow", None)  # import mlflow -> ImportError
    lm = scripted_lm(_never)
    with pytest.raises(ScijudgeError, match=r"pip install 'scijudge\[track\]'"):
        optimize(spec, items, labels, lm, tiny(REPO / "optimizers" / "copro.toml"), track="mlflow")
    assert lm.engine.requests == []


@pytest.mark.slow
def test_mlflow_tracking_logs_params_trials_and_artifacts(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Against a stand-in module with MLflow's API: what would be logged, and where."""
    import contextlib
    import types

    calls: list[tuple[str, Any]] = []
    fake = types.ModuleType("mlflow")
    fake.set_tracking_uri = lambda uri: calls.append(("uri", uri))
    fake.set_experiment = lambda name: calls.append(("experiment", name))
    fake.start_run = lambda run_name=None: (calls.append(("run", run_name)), contextlib.nullcontext())[1]
    fake.log_params = lambda params: calls.append(("params", params))
    fake.set_tags = lambda tags: calls.append(("tags", tags))
    fake.log_metric = lambda key, value, step=None: calls.append(("metric", (key, value, step)))
    fake.log_metrics = lambda metrics: calls.append(("metrics", metrics))
    fake.log_artifact = lambda path: calls.append(("artifact", path))
    monkeypatch.setitem(sys.modules, "mlflow", fake)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    spec, items, labels, world = toy_setup()
    result = optimize(spec, items, labels, scripted_lm(world.respond), tiny(REPO / "optimizers" / "copro.toml"),
                      out=tmp_path / "o.toml", track="mlflow", n_boot=0)
    kinds = [k for k, _ in calls]
    assert ("uri", (tmp_path / "mlruns").resolve().as_uri()) in calls
    params = dict(calls)["params"]
    assert params["optimizer"] == "copro" and params["settings.breadth"] == "3"
    steps = [v for k, v in calls if k == "metric"]
    assert len(steps) == sum(1 for t in result.trials if t["score"] is not None) > 1
    metrics = dict(calls)["metrics"]
    assert metrics["test_exact_after"] == result.after["exact"]
    assert {p for k, p in calls if k == "artifact"} == {str(result.spec_path), str(result.program_path),
                                                           str(result.report_path)}
    assert kinds.index("run") < kinds.index("params")


@pytest.mark.slow
def test_cli_command_writes_a_usable_judge(tmp_path: Path, loopback: Any) -> None:
    import typer
    from typer.testing import CliRunner

    from scijudge.commands.optimize import optimize_cmd

    spec, items, labels, world = toy_setup()
    server = loopback(world.http_handler)
    items_path, labels_path = tmp_path / "items.jsonl", tmp_path / "labels.jsonl"
    items_path.write_text("".join(i.model_dump_json() + "\n" for i in items), encoding="utf-8")
    labels_path.write_text("".join(lab.model_dump_json() + "\n" for lab in labels), encoding="utf-8")
    recipe = tmp_path / "copro.toml"
    recipe.write_text('optimizer = "copro"\n[split]\nseed = 3\n[settings]\nbreadth = 3\ndepth = 1\n', encoding="utf-8")
    app = typer.Typer()
    app.command("optimize")(optimize_cmd)
    app.command("other")(lambda: None)
    out = tmp_path / "opt.toml"
    run = CliRunner().invoke(app, ["optimize", "--judge", spec.name, "--items", str(items_path), "--labels",
                                   str(labels_path), "--model", "openai/toy", "--api-base", server.url,
                                   "--recipe", str(recipe), "--out", str(out), "--no-cache"])
    assert run.exit_code == 0, run.output
    assert "optimized judge:" in run.output and out.exists()
    assert get_spec(out).provenance["lm_calls"] == server.count
    helped = CliRunner().invoke(app, ["optimize", "--help"])
    assert "Example: scijudge optimize" in helped.output


@pytest.mark.slow
def test_verdict_labels_end_to_end(tmp_path: Path) -> None:
    """A verdict judge that says 'yes' to everything until calibrated; 60% of the labels are 'no'."""
    from sklearn.metrics import balanced_accuracy_score

    spec, items, labels, world = toy_setup(judge="toy.good_enough")
    assert spec.family == "checklist"
    recipe = recipe_from_dict({"optimizer": "copro", "metric": "verdict_balanced",
                               "split": {"train": 0.6, "dev": 0.15, "test": 0.25, "seed": 3},
                               "settings": {"breadth": 3, "depth": 1}}, source="verdicts.toml")
    result = optimize(spec, items, labels, scripted_lm(world.respond), recipe, out=tmp_path / "v.toml", n_boot=0)
    truth = {lab.item_id: lab.verdict for lab in labels}
    balanced = {role: balanced_accuracy_score([truth[i] for i in rows["item_id"]], list(rows["verdict"]))
                for role, rows in result.test_judgments.groupby("role")}
    assert balanced["before"] == pytest.approx(0.5)  # always "yes"
    assert balanced["after"] == pytest.approx(1.0)
    assert result.after["balanced_accuracy"] == pytest.approx(balanced["after"])
    assert result.before["balanced_accuracy"] == pytest.approx(balanced["before"])
    assert get_spec(result.spec_path).spec_hash() == result.spec.spec_hash()


def test_spec_round_trip_is_exact(tmp_path: Path) -> None:
    """Quotes, backslashes, tabs and carriage returns in instructions and demos survive TOML byte for byte."""
    from scijudge.optimization import optimized_spec, save_spec

    base = get_spec("yescieval.qa.correctness")
    anchors = render_instructions(base)[len(base.instructions.strip()):]
    text = 'Judge the papers and the answer. """quoted""" \\ back\tslash\r\nCRLF {braces} \\n' + anchors
    demo = {"question": "q\r\nx", "papers": "p", "answer": 'a"""b', "judgment": {"rationale": "r\\", "rating": 3}}
    spec = optimized_spec(base, text, [demo], {"optimizer": "copro"})
    assert spec.scale.anchors == base.scale.anchors  # the text still ends with the anchors: kept as anchors
    again = get_spec(save_spec(spec, tmp_path / "s.toml"))
    assert render_instructions(again) == text.strip()
    assert again.demos == [demo] and again.spec_hash() == spec.spec_hash()
    inline = optimized_spec(base, text.replace(anchors, "") + "\n\nExtra advice.", [], {})
    assert inline.scale.anchors == {} and inline.provenance["anchors_inlined"] is True
    assert render_instructions(get_spec(save_spec(inline, tmp_path / "i.toml"))) == render_instructions(inline)


def test_bootstrap_rs_without_bootstrapped_demos_is_refused_before_any_call() -> None:
    """DSPy's random search draws each candidate's demo count from 1..max_bootstrapped_demos: 0 would fail mid-run
    (randint(1, 0)) after the paid zero-shot and labelled candidates; the recipe is refused first, in one line."""
    with pytest.raises(InputError, match="max_bootstrapped_demos"):
        recipe_from_dict({"optimizer": "bootstrap_rs", "settings": {"max_bootstrapped_demos": 0}}, source="r.toml")
    recipe_from_dict({"optimizer": "bootstrap_rs", "settings": {"max_bootstrapped_demos": 1}}, source="r.toml")
