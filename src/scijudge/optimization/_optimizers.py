"""The built-in optimizers (MIPROv2, GEPA, SIMBA, COPRO, BootstrapFewShotWithRandomSearch): settings, builders,
and their registration (see ``scijudge.optimization._registry``).

Which data each optimizer sees (never the test split):

- MIPROv2, GEPA, BootstrapFewShotWithRandomSearch: ``trainset=train``, ``valset=dev`` (dev picks the winner);
- SIMBA and COPRO take a single training set: they get ``train + dev``.

Proposal and reflection calls go to ``prompt_lm`` (MIPROv2's prompt_model, GEPA's reflection_lm,
SIMBA's and COPRO's prompt_model); BootstrapFewShot makes no proposal calls.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from scijudge.optimization._registry import CompileInputs, OptimizerEntry, OptimizerSettings, register


class MiproSettings(OptimizerSettings):
    """MIPROv2: bootstrapped demo sets + proposed instructions, searched with Optuna (TPE)."""

    auto: Literal["off", "light", "medium", "heavy"] = "off"
    num_candidates: int | None = Field(default=None, ge=1)
    num_trials: int | None = Field(default=None, ge=1)
    max_bootstrapped_demos: int = Field(default=2, ge=0)
    max_labeled_demos: int = Field(default=2, ge=0)
    init_temperature: float = Field(default=1.0, ge=0)
    minibatch: bool = False
    minibatch_size: int = Field(default=35, ge=1)
    minibatch_full_eval_steps: int = Field(default=5, ge=1)
    view_data_batch_size: int = Field(default=10, ge=1)
    program_aware_proposer: bool = True
    data_aware_proposer: bool = True
    tip_aware_proposer: bool = True
    fewshot_aware_proposer: bool = True
    metric_threshold: float | None = None

    @model_validator(mode="after")
    def _check(self) -> MiproSettings:
        if self.auto == "off" and (self.num_candidates is None or self.num_trials is None):
            missing = "num_candidates" if self.num_candidates is None else "num_trials"
            raise ValueError(f"{missing}: with auto = \"off\" both num_candidates and num_trials are required")
        if self.auto != "off" and (self.num_candidates is not None or self.num_trials is not None):
            raise ValueError("num_candidates: set either auto or num_candidates/num_trials, not both")
        return self


class GepaSettings(OptimizerSettings):
    """GEPA: reflective prompt evolution from textual feedback, with a Pareto front over dev examples."""

    auto: Literal["light", "medium", "heavy"] | None = None
    max_full_evals: int | None = Field(default=None, ge=1)
    max_metric_calls: int | None = Field(default=None, ge=1)
    reflection_minibatch_size: int = Field(default=3, ge=1)
    candidate_selection_strategy: Literal["pareto", "current_best"] = "pareto"
    skip_perfect_score: bool = True
    use_merge: bool = False
    max_merge_invocations: int = Field(default=5, ge=0)
    add_format_failure_as_feedback: bool = False

    @model_validator(mode="after")
    def _check(self) -> GepaSettings:
        chosen = [n for n in ("auto", "max_full_evals", "max_metric_calls") if getattr(self, n) is not None]
        if len(chosen) != 1:
            raise ValueError("max_metric_calls: set exactly one of auto, max_full_evals, max_metric_calls"
                             + (f" (found {', '.join(chosen)})" if chosen else ""))
        return self


class SimbaSettings(OptimizerSettings):
    """SIMBA: mini-batch ascent; self-reflective rules and demos from high-variance examples."""

    bsize: int = Field(default=8, ge=1)
    num_candidates: int = Field(default=4, ge=1)
    max_steps: int = Field(default=4, ge=1)
    max_demos: int = Field(default=2, ge=0)
    demo_input_field_maxlen: int = Field(default=100_000, ge=1)
    temperature_for_sampling: float = Field(default=0.2, gt=0)
    temperature_for_candidates: float = Field(default=0.2, gt=0)


class CoproSettings(OptimizerSettings):
    """COPRO: coordinate ascent over proposed instructions, breadth × depth."""

    breadth: int = Field(default=4, ge=2)
    depth: int = Field(default=2, ge=1)
    init_temperature: float = Field(default=1.0, ge=0)


class BootstrapRSSettings(OptimizerSettings):
    """BootstrapFewShotWithRandomSearch: bootstrapped + labelled demo sets, the best on dev kept."""

    # At least 1: DSPy draws each random candidate's demo count from 1..max (randint(1, 0) fails mid-run).
    max_bootstrapped_demos: int = Field(default=2, ge=1)
    max_labeled_demos: int = Field(default=2, ge=0)
    max_rounds: int = Field(default=1, ge=1)
    num_candidate_programs: int = Field(default=4, ge=1)
    max_errors: int | None = Field(default=None, ge=1)
    stop_at_score: float | None = None
    metric_threshold: float | None = None


# --- builders --------------------------------------------------------------------------------------------


def _compile_mipro(s: MiproSettings, x: CompileInputs) -> Any:
    import dspy

    optimizer = dspy.MIPROv2(
        metric=x.metric, prompt_model=x.prompt_lm, task_model=x.student.lm,
        auto=None if s.auto == "off" else s.auto, num_candidates=s.num_candidates,
        max_bootstrapped_demos=s.max_bootstrapped_demos, max_labeled_demos=s.max_labeled_demos,
        num_threads=s.num_threads, seed=x.seed, init_temperature=s.init_temperature, verbose=False,
        metric_threshold=s.metric_threshold,
    )
    return optimizer.compile(
        x.student, trainset=x.trainset, valset=x.devset or None, num_trials=s.num_trials, seed=x.seed,
        minibatch=s.minibatch, minibatch_size=s.minibatch_size,
        minibatch_full_eval_steps=s.minibatch_full_eval_steps, view_data_batch_size=s.view_data_batch_size,
        program_aware_proposer=s.program_aware_proposer, data_aware_proposer=s.data_aware_proposer,
        tip_aware_proposer=s.tip_aware_proposer, fewshot_aware_proposer=s.fewshot_aware_proposer,
    )


def _sizes_mipro(s: MiproSettings, sizes: dict[str, int]) -> list[str]:
    problems = []
    if sizes["dev"] == 0 and sizes["train"] < 2:
        problems.append("MIPROv2 without a dev split needs at least 2 training examples")
    if s.minibatch and sizes["dev"] and s.minibatch_size > sizes["dev"]:
        problems.append(f"MIPROv2 settings.minibatch_size = {s.minibatch_size} exceeds the dev split "
                        f"({sizes['dev']} examples)")
    return problems


def _compile_gepa(s: GepaSettings, x: CompileInputs) -> Any:
    import dspy

    optimizer = dspy.GEPA(
        metric=x.metric, auto=s.auto, max_full_evals=s.max_full_evals, max_metric_calls=s.max_metric_calls,
        reflection_minibatch_size=s.reflection_minibatch_size,
        candidate_selection_strategy=s.candidate_selection_strategy, reflection_lm=x.prompt_lm,
        skip_perfect_score=s.skip_perfect_score, add_format_failure_as_feedback=s.add_format_failure_as_feedback,
        use_merge=s.use_merge, max_merge_invocations=s.max_merge_invocations, num_threads=s.num_threads,
        failure_score=0.0, perfect_score=1.0, seed=x.seed, warn_on_score_mismatch=False,
    )
    return optimizer.compile(x.student, trainset=x.trainset, valset=x.devset or None)


def _compile_simba(s: SimbaSettings, x: CompileInputs) -> Any:
    import dspy

    optimizer = dspy.SIMBA(
        metric=x.metric, bsize=s.bsize, num_candidates=s.num_candidates, max_steps=s.max_steps,
        max_demos=s.max_demos, prompt_model=x.prompt_lm, num_threads=s.num_threads,
        demo_input_field_maxlen=s.demo_input_field_maxlen, temperature_for_sampling=s.temperature_for_sampling,
        temperature_for_candidates=s.temperature_for_candidates,
    )
    return optimizer.compile(x.student, trainset=[*x.trainset, *x.devset], seed=x.seed)


def _sizes_simba(s: SimbaSettings, sizes: dict[str, int]) -> list[str]:
    if sizes["train"] < s.bsize:
        return [f"SIMBA needs at least settings.bsize = {s.bsize} training examples, the split gives "
                f"{sizes['train']} (train + dev)"]
    return []


def _compile_copro(s: CoproSettings, x: CompileInputs) -> Any:
    import dspy

    optimizer = dspy.COPRO(prompt_model=x.prompt_lm, metric=x.metric, breadth=s.breadth, depth=s.depth,
                           init_temperature=s.init_temperature)
    return optimizer.compile(x.student, trainset=[*x.trainset, *x.devset],
                             eval_kwargs={"num_threads": s.num_threads, "display_progress": False})


def _compile_bootstrap_rs(s: BootstrapRSSettings, x: CompileInputs) -> Any:
    import dspy

    optimizer = dspy.BootstrapFewShotWithRandomSearch(
        metric=x.metric, max_bootstrapped_demos=s.max_bootstrapped_demos, max_labeled_demos=s.max_labeled_demos,
        max_rounds=s.max_rounds, num_candidate_programs=s.num_candidate_programs, num_threads=s.num_threads,
        max_errors=s.max_errors, stop_at_score=s.stop_at_score, metric_threshold=s.metric_threshold,
    )
    return optimizer.compile(x.student, trainset=x.trainset, valset=x.devset or None)


register(OptimizerEntry("mipro", MiproSettings, _compile_mipro, sees_dev=True, check_sizes=_sizes_mipro))
register(OptimizerEntry("gepa", GepaSettings, _compile_gepa, sees_dev=True, feedback_metric=True, reads_answers=True))
register(OptimizerEntry("simba", SimbaSettings, _compile_simba, sees_dev=False, check_sizes=_sizes_simba,
                        reads_answers=True))
register(OptimizerEntry("copro", CoproSettings, _compile_copro, sees_dev=False))
register(OptimizerEntry("bootstrap_rs", BootstrapRSSettings, _compile_bootstrap_rs, sees_dev=True, proposes=False))
