"""`optimize(..., mode="decision")`: candidates and the test split are judged from the level probabilities.

The toy world's judge (``scijudge.testing.toy_judge``) answers decision requests with a distribution peaked at the
rating it would generate: its true quality + 2 with no demonstrations, the true quality once its demonstrations
show ratings equal to the human labels. So the base judge is biased, the labelled demonstrations of
``bootstrap_rs`` remove the bias, and what a decision-mode optimization keeps can be checked by hand.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.stats import bootstrap
from typer.testing import CliRunner

from scijudge.errors import InputError
from scijudge.lm import make_lm
from scijudge.optimization import optimize
from scijudge.optimization._recipes import recipe_from_dict
from scijudge.testing.toy_judge import toy_setup

REPO = Path(__file__).resolve().parents[2]


def _recipe(name: str, **settings: Any) -> Any:
    data = tomllib.loads((REPO / "optimizers" / f"{name}.toml").read_text(encoding="utf-8"))
    data["settings"] = {**data["settings"], **settings}
    data["budget"] = {}
    return recipe_from_dict(data, source=str(REPO / "optimizers" / f"{name}.toml"))


def _cap(body: dict[str, Any]) -> Any:
    return body.get("max_completion_tokens") or body.get("max_tokens")


def test_decision_mode_scores_candidates_from_level_probabilities_and_keeps_the_unbiased_one(loopback: Any) -> None:
    spec, items, labels, world = toy_setup()
    server = loopback(world.http_handler)
    lm = make_lm("openai/toy-judge", api_base=server.url, cache=False)
    result = optimize(spec, items, labels, lm, _recipe("bootstrap_rs", num_candidate_programs=2, num_threads=2),
                      n_boot=20000, mode="decision", decision_score="mode")

    judging = [b for b in server.requests[1:]]  # after the preflight, every request asks for the rating alone
    assert judging and all(b.get("logprobs") and _cap(b) == 3 and "response_format" not in b for b in judging)
    assert server.count == result.budget["lm_calls"]  # each decision counted once against the budget
    assert result.spec.provenance["mode"] == "decision" and result.spec.provenance["decision_score"] == "mode"
    assert result.spec.demos and not result.unchanged

    # by hand: the toy judge's decision is the true quality + 2 (clipped) without demonstrations, the true quality
    # with demonstrations rated like the humans; the stored decisions and the reported agreement must say so
    rows = result.test_judgments
    assert set(rows["role"]) == {"before", "after"} and all(r["mode"] == "decision" for r in rows["result"])
    truth = {lab.item_id: lab.score for lab in labels}
    quality = {item.id: world.quality(item.answer or "") for item in items}
    for role, shift in (("before", 2), ("after", 0)):
        mine = rows[rows["role"] == role]
        assert list(mine["score"]) == [float(min(5, quality[i] + shift)) for i in mine["item_id"]]
        exact = sum(float(s) == truth[i] for s, i in zip(mine["score"], mine["item_id"])) / len(mine)
        values = result.before if role == "before" else result.after
        assert values["n_units"] == len(mine) == len(result.split.test)
        assert values["exact"] == pytest.approx(exact, abs=1e-12)
    assert result.after["exact"] > result.before["exact"]
    assert any("fewer than 30" in note for note in result.notes)  # a toy test split: its intervals come first

    # the paired gain of the recipe metric (likert_abs = 1 - |score - human| / 4), by hand, and its interval
    # against scipy's percentile bootstrap (one unit per item here, so the cluster bootstrap is the plain one)
    before = rows[rows["role"] == "before"].set_index("item_id")["score"]
    after = rows[rows["role"] == "after"].set_index("item_id")["score"]
    diffs = np.array([abs(before[i] - truth[i]) / 4 - abs(after[i] - truth[i]) / 4 for i in before.index])
    assert result.after["n_paired"] == len(diffs) == len(result.split.test)
    assert result.after["gain"] == pytest.approx(diffs.mean(), abs=1e-12) and result.after["gain"] > 0
    reference = bootstrap((diffs,), np.mean, n_resamples=20000, method="percentile", random_state=0)
    assert result.after["gain_lo"] == pytest.approx(reference.confidence_interval.low, abs=0.03)
    assert result.after["gain_hi"] == pytest.approx(reference.confidence_interval.high, abs=0.03)


def test_decision_mode_keeps_the_call_budget(loopback: Any) -> None:
    spec, items, labels, world = toy_setup()
    server = loopback(world.http_handler)
    lm = make_lm("openai/toy-judge", api_base=server.url, cache=False)
    recipe = _recipe("bootstrap_rs", num_candidate_programs=4, num_threads=4)
    recipe = recipe.model_copy(update={"budget": recipe.budget.model_copy(update={"max_lm_calls": 40})})
    result = optimize(spec, items, labels, lm, recipe, n_boot=0, mode="decision")
    assert server.count <= 40 and server.count == result.budget["lm_calls"]
    assert result.stopped and "budget" in result.stopped
    assert result.after["n_units"] == len(result.split.test)  # the reserve paid for the whole test evaluation


@pytest.mark.parametrize("name", ["gepa", "simba"])
def test_optimizers_that_read_answers_are_refused_in_decision_mode_before_any_call(loopback: Any, name: str) -> None:
    spec, items, labels, world = toy_setup()
    server = loopback(world.http_handler)
    lm = make_lm("openai/toy-judge", api_base=server.url, cache=False)
    with pytest.raises(InputError) as caught:
        optimize(spec, items, labels, lm, _recipe(name), mode="decision")
    text = str(caught.value)
    source = (REPO / "optimizers" / f"{name}.toml").read_text(encoding="utf-8").splitlines()
    line = next(n for n, row in enumerate(source, 1) if row.startswith("optimizer"))
    assert f"{name}.toml:{line}, field 'optimizer'" in text
    assert "bootstrap_rs" in text and "\n" not in text
    assert server.count == 0


def test_cli_optimize_mode_decision(loopback: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from scijudge.cli import app

    spec, items, labels, world = toy_setup()
    server = loopback(world.http_handler)
    items_path, labels_path = tmp_path / "items.jsonl", tmp_path / "labels.jsonl"
    items_path.write_text("".join(i.model_dump_json() + "\n" for i in items), encoding="utf-8")
    labels_path.write_text("".join(json.dumps({"item_id": lab.item_id, "judge": lab.judge, "score": lab.score,
                                               "annotator": lab.annotator}) + "\n" for lab in labels),
                           encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["optimize", "-j", spec.name, "-i", str(items_path), "-l", str(labels_path),
                                   "-m", "openai/toy", "--api-base", server.url, "--recipe", "bootstrap_rs",
                                   "--mode", "decision", "--no-cache", "--out", "tuned.toml"])
    assert res.exit_code == 0, res.output
    from scijudge.spec.judge_spec import get_spec

    assert get_spec(tmp_path / "tuned.toml").provenance["mode"] == "decision"
    assert (tmp_path / "tuned.report.json").exists()
    assert all(b.get("logprobs") and _cap(b) == 3 for b in server.requests[1:])
    bad = CliRunner().invoke(app, ["optimize", "-j", spec.name, "-i", str(items_path), "-l", str(labels_path),
                                   "-m", "openai/toy", "--api-base", server.url, "--recipe", "gepa",
                                   "--mode", "decision", "--no-cache"])
    assert bad.exit_code == 2 and "decision mode does not generate" in bad.output and "Traceback" not in bad.output


def test_labelled_demonstrations_carry_the_experts_level_on_a_scale_other_than_1_to_5() -> None:
    """A 1-3 judge's labelled examples hold the consensus as the judge's own output type (the scaled LikertRating
    subclass); they held nothing before, so bootstrap_rs had no labelled demonstration to offer such a judge."""
    from scijudge import Item
    from scijudge.labels import HumanLabel
    from scijudge.optimization import prepare
    from scijudge.spec.judge_spec import get_spec
    from scijudge.spec.signatures import OUTPUT_FIELD

    spec = get_spec("expertqa.claim_support")  # levels 1, 2, 3
    items = [Item(id=f"c{i}", question="Q?", answer=f"Claim {i}.", inputs={"evidence": f"Evidence {i}."})
             for i in range(12)]
    labels = [HumanLabel(item_id=f"c{i}", judge=spec.name, score=float(1 + i % 3), annotator="expert")
              for i in range(12)]
    plan = prepare(spec, items, labels, "bootstrap_rs")
    for example in plan.data.examples:
        output = example[OUTPUT_FIELD]
        assert type(output) is spec.output_type() and output.rating == 1 + int(example["sj_item"][1:]) % 3


@pytest.mark.slow
def test_a_local_engines_decisions_are_counted_against_the_budget(tmp_path: Path) -> None:
    """The local engine answers decisions without DSPy's LM call: each one still takes a slot from the budget."""
    from importlib.util import find_spec

    missing = [name for name in ("torch", "transformers", "peft") if find_spec(name) is None]
    if missing:
        pytest.skip(f"not installed: {missing} (pip install -e '.[local]')")
    from scijudge.lm.tiny import build_tiny_model

    spec, items, labels, _ = toy_setup(12)
    lm = make_lm(f"hf:{build_tiny_model(tmp_path, seed=3)['adapter']}", cache=False, max_tokens=8)
    sent: list[Any] = []
    engine = lm.engine
    original = type(engine).submit_levels

    def counted(request: Any, levels: Any) -> Any:
        sent.append(request)
        return original(engine, request, levels)

    engine.submit_levels = counted
    try:
        recipe = _recipe("bootstrap_rs", num_candidate_programs=1, num_threads=2)
        result = optimize(spec, items, labels, lm, recipe, n_boot=0, mode="decision")
    finally:
        del engine.submit_levels
        engine.close()
    assert sent and result.budget["lm_calls"] == len(sent) + result.budget["preflight_lm_calls"]
    assert result.budget["evaluation_lm_calls"] == (1 if result.unchanged else 2) * len(result.split.test)
