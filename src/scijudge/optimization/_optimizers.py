"""Recipe → DSPy optimizer: build the optimizer from validated settings and compile the judge.

Which data each optimizer sees (never the test split):

- MIPROv2, GEPA, BootstrapFewShotWithRandomSearch: ``trainset=train``, ``valset=dev`` (dev picks the winner);
- SIMBA and COPRO take a single training set: they get ``train + dev``.

Proposal and reflection calls go to ``prompt_lm`` (MIPROv2's prompt_model, GEPA's reflection_lm,
SIMBA's and COPRO's prompt_model); BootstrapFewShot makes no proposal calls.
"""

from __future__ import annotations

from typing import Any

from scijudge.optimization._judge_metrics import FeedbackMetric, JudgeMetric
from scijudge.optimization._recipes import (
    BootstrapRSSettings,
    CoproSettings,
    GepaSettings,
    MiproSettings,
    Recipe,
    SimbaSettings,
)

SEES_DEV = {"mipro": True, "gepa": True, "bootstrap_rs": True, "simba": False, "copro": False}


def metric_for(recipe: Recipe, **kwargs: Any) -> JudgeMetric:
    """GEPA gets the feedback metric; every other optimizer the plain one."""
    cls = FeedbackMetric if recipe.optimizer == "gepa" else JudgeMetric
    return cls(name=recipe.metric, **kwargs)


def minimum_sizes(recipe: Recipe, sizes: dict[str, int]) -> list[str]:
    """Problems with split sizes that this optimizer cannot work with (checked before any LM call)."""
    s = recipe.typed_settings()
    problems = []
    seen = sizes["train"] + (0 if SEES_DEV[recipe.optimizer] else sizes["dev"])
    if isinstance(s, SimbaSettings) and seen < s.bsize:
        problems.append(f"SIMBA needs at least settings.bsize = {s.bsize} training examples, the split gives {seen}")
    if isinstance(s, MiproSettings):
        if sizes["dev"] == 0 and sizes["train"] < 2:
            problems.append("MIPROv2 without a dev split needs at least 2 training examples")
        if s.minibatch and sizes["dev"] and s.minibatch_size > sizes["dev"]:
            problems.append(f"MIPROv2 settings.minibatch_size = {s.minibatch_size} exceeds the dev split "
                            f"({sizes['dev']} examples)")
    return problems


def compile_with(recipe: Recipe, student: Any, *, trainset: list[Any], devset: list[Any], metric: JudgeMetric,
                 prompt_lm: Any, seed: int) -> Any:
    """Run the recipe's optimizer on ``student`` and return the compiled program."""
    import dspy

    s = recipe.typed_settings()
    valset = devset or None
    if isinstance(s, MiproSettings):
        optimizer = dspy.MIPROv2(
            metric=metric, prompt_model=prompt_lm, task_model=student.lm,
            auto=None if s.auto == "off" else s.auto, num_candidates=s.num_candidates,
            max_bootstrapped_demos=s.max_bootstrapped_demos, max_labeled_demos=s.max_labeled_demos,
            num_threads=s.num_threads, seed=seed, init_temperature=s.init_temperature, verbose=False,
            metric_threshold=s.metric_threshold,
        )
        return optimizer.compile(
            student, trainset=trainset, valset=valset, num_trials=s.num_trials, seed=seed,
            minibatch=s.minibatch, minibatch_size=s.minibatch_size,
            minibatch_full_eval_steps=s.minibatch_full_eval_steps, view_data_batch_size=s.view_data_batch_size,
            program_aware_proposer=s.program_aware_proposer, data_aware_proposer=s.data_aware_proposer,
            tip_aware_proposer=s.tip_aware_proposer, fewshot_aware_proposer=s.fewshot_aware_proposer,
        )
    if isinstance(s, GepaSettings):
        optimizer = dspy.GEPA(
            metric=metric, auto=s.auto, max_full_evals=s.max_full_evals, max_metric_calls=s.max_metric_calls,
            reflection_minibatch_size=s.reflection_minibatch_size,
            candidate_selection_strategy=s.candidate_selection_strategy, reflection_lm=prompt_lm,
            skip_perfect_score=s.skip_perfect_score, add_format_failure_as_feedback=s.add_format_failure_as_feedback,
            use_merge=s.use_merge, max_merge_invocations=s.max_merge_invocations, num_threads=s.num_threads,
            failure_score=0.0, perfect_score=1.0, seed=seed, warn_on_score_mismatch=False,
        )
        return optimizer.compile(student, trainset=trainset, valset=valset)
    if isinstance(s, SimbaSettings):
        optimizer = dspy.SIMBA(
            metric=metric, bsize=s.bsize, num_candidates=s.num_candidates, max_steps=s.max_steps,
            max_demos=s.max_demos, prompt_model=prompt_lm, num_threads=s.num_threads,
            demo_input_field_maxlen=s.demo_input_field_maxlen, temperature_for_sampling=s.temperature_for_sampling,
            temperature_for_candidates=s.temperature_for_candidates,
        )
        return optimizer.compile(student, trainset=[*trainset, *devset], seed=seed)
    if isinstance(s, CoproSettings):
        optimizer = dspy.COPRO(prompt_model=prompt_lm, metric=metric, breadth=s.breadth, depth=s.depth,
                               init_temperature=s.init_temperature)
        return optimizer.compile(student, trainset=[*trainset, *devset],
                                 eval_kwargs={"num_threads": s.num_threads, "display_progress": False})
    if isinstance(s, BootstrapRSSettings):
        optimizer = dspy.BootstrapFewShotWithRandomSearch(
            metric=metric, max_bootstrapped_demos=s.max_bootstrapped_demos, max_labeled_demos=s.max_labeled_demos,
            max_rounds=s.max_rounds, num_candidate_programs=s.num_candidate_programs, num_threads=s.num_threads,
            max_errors=s.max_errors, stop_at_score=s.stop_at_score, metric_threshold=s.metric_threshold,
        )
        return optimizer.compile(student, trainset=trainset, valset=valset)
    raise AssertionError(f"no runner for optimizer {recipe.optimizer!r}")  # pragma: no cover - recipes are validated
