"""Prompt optimization of judges against human labels, with honest splits, hard budgets and a held-out report.

``optimize(judge, items, labels, lm, recipe)`` runs one recipe (``optimizers/*.toml``):

1. builds one DSPy example per labelled (item, part) of the judge, with the annotators' consensus, and
   splits the items into train/dev/test (by item, stratified by label, seeded) — ``prepare``, no LM call;
2. sends one preflight request per model (endpoint, key and model checked in seconds);
3. compiles the judge with the recipe's DSPy optimizer and metric, every LM call counted against the
   budget before it is sent, proposal calls retried on transient errors (each try counted);
4. judges the test split once with the base judge and once with the optimized one (from calls reserved
   for it) and compares both with the human labels (``scijudge.metrics.calibration.calibrate``);
5. returns the optimized spec (new instructions and demos, plus provenance) and, with ``out``, writes
   it as TOML (usable anywhere a judge name is), the DSPy program as JSON and a JSON report.

Anytime: a budget stop (or a provider that keeps failing) ends the search with the best candidate seen so
far, which is evaluated on test and written like any result, marked ``stopped_early``.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from scijudge.data import Item, load_items
from scijudge.spec.demos import demo_to_spec
from scijudge.errors import InputError, ModelError
from scijudge.judges.base import Judge
from scijudge.records import model_name
from scijudge.labels import HumanLabel, load_labels
from scijudge.optimization._budget import Budget, BudgetStop, Gate, StopRun, budgeted
from scijudge.optimization._data import Data, build_data, split_data
from scijudge.optimization._families import judge_for
from scijudge.optimization._evaluate import Baseline, judge_examples, summaries
from scijudge.optimization._guard import InstructionGuard
from scijudge.optimization._judge_metrics import VERDICT, JudgeMetric, Ledger, class_weights, example_key
from scijudge.optimization._opt_judge import OptJudge
from scijudge.optimization._recipes import Recipe, SplitSpec, recipe_line, resolve_recipe
from scijudge.optimization._registry import CompileInputs, entry_for
from scijudge.optimization._registry import names as registered_names
from scijudge.optimization._result import INTERRUPTED, OptimizationResult, write_outputs
from scijudge.optimization._retry import RetryPolicy, preflight
from scijudge.optimization._spec_io import optimized_spec
from scijudge.optimization._splits import ItemSplit
from scijudge.spec.signatures import render_instructions
from scijudge.spec.judge_spec import JudgeSpec, get_spec

MIN_TEST_UNITS = 30
"""Below this many held-out units an optimization's gain is reported with a warning beside its interval."""

RETRY_RESERVE = 1.25
"""Calls kept for the test evaluation per test example and judge: one call plus a quarter for the chain's retries."""


@dataclass
class Plan:
    """Everything about one optimization that is fixed before its first LM call."""

    spec: JudgeSpec
    items: list[Item]
    recipe: Recipe
    data: Data
    split: ItemSplit
    train: list[Any]
    dev: list[Any]
    test: list[Any]
    labels_source: str | None
    test_variants: list[Item] = field(default_factory=list)
    mode: str = "generate"  # or "decision": candidates and the test split judged from the level probabilities
    decision_score: str = "expected"

    def judge(self, spec: JudgeSpec, lm: Any) -> Judge:
        """A judge of ``spec`` on ``lm`` in this optimization's mode (the test split's, the baseline's)."""
        return judge_for(spec, lm=lm, mode=self.mode, decision_score=self.decision_score)

    def reserve(self, roles: int) -> int:
        """Calls kept for the test evaluation of ``roles`` judges (variants included), with room for retries."""
        return math.ceil(RETRY_RESERVE * roles * (len(self.test) + len(self.test_variants)))


def _resolve_inputs(judge_spec: JudgeSpec | str | Path, items: list[Item] | str | Path,
                    labels: list[HumanLabel] | str | Path
                    ) -> tuple[JudgeSpec, list[Item], list[HumanLabel], str | None]:
    spec = judge_spec if isinstance(judge_spec, JudgeSpec) else get_spec(judge_spec)
    if isinstance(items, (str, Path)):
        items, _ = load_items(items)
    labels_source = None
    if isinstance(labels, (str, Path)):
        labels_source = str(labels)
        labels = load_labels(labels)
    return spec, list(items), list(labels), labels_source


def _check_mode(spec: JudgeSpec, recipe: Recipe, mode: str, decision_score: str) -> None:
    """Refuse decision mode for a family it cannot decide, and for optimizers that learn from answers' text."""
    from scijudge.judges.decision import check_mode

    check_mode(mode, decision_score, spec.family, name=spec.name, source=spec.source)
    if mode == "decision" and entry_for(recipe.optimizer).reads_answers:
        usable = ", ".join(n for n in registered_names() if not entry_for(n).reads_answers)
        raise InputError(f"the {recipe.optimizer} optimizer learns from the text of the judge's answers, which "
                         f"decision mode does not generate: with --mode decision use one of {usable}; or optimize in "
                         "generate mode", file=recipe.source, line=recipe_line(recipe, ("optimizer",)),
                         field="optimizer")


def prepare(judge_spec: JudgeSpec | str | Path, items: list[Item] | str | Path,
            labels: list[HumanLabel] | str | Path, recipe: Recipe | str | Path, *,
            split: SplitSpec | None = None, roles: int = 2, robustness: Any = None, mode: str = "generate",
            decision_score: str = "expected") -> Plan:
    """Check a recipe against the data and build its examples and split; raises InputError, sends nothing.
    ``mode="decision"``: candidates and the test split are judged from the level probabilities (no text)."""
    recipe = resolve_recipe(recipe)
    if split is not None:
        recipe = recipe.model_copy(update={"split": split})
    spec, items, labels, labels_source = _resolve_inputs(judge_spec, items, labels)
    _check_mode(spec, recipe, mode, decision_score)
    data = build_data(spec, items, labels, recipe, labels_source)
    item_split = split_data(data, recipe, labels_source)
    part_of = {name: [ex for i in getattr(item_split, name) for ex in data.by_item[i]]
               for name in ("train", "dev", "test")}
    plan = Plan(spec=spec, items=items, recipe=recipe, data=data, split=item_split, labels_source=labels_source,
                mode=mode, decision_score=decision_score, **part_of)
    if robustness is not None:  # variants of train/dev items join those sets; test variants are only reported
        robustness.check(spec, data.kind, set(data.by_item))
        judge, names = judge_for(spec), [i.name for i in spec.inputs]
        plan.train = plan.train + robustness.examples(judge, names, plan.train)
        plan.dev = plan.dev + robustness.examples(judge, names, plan.dev)
        plan.test_variants = robustness.test_variants(list(item_split.test))
    cap = recipe.budget.max_lm_calls
    reserve = plan.reserve(roles)
    if cap is not None and cap <= reserve + 1:
        raise InputError(f"max_lm_calls = {cap} leaves nothing for the optimizer: the preflight and the test "
                         f"evaluation alone take {reserve + 1} calls ({len(plan.test)} test examples × {roles} "
                         f"judge(s) × {RETRY_RESERVE:g} for retries, + 1)",
                         file=recipe.source, line=recipe_line(recipe, ("budget", "max_lm_calls")),
                         field="budget.max_lm_calls")
    return plan


def _data_hash(items: list[Item], labels: list[HumanLabel]) -> str:
    digest = hashlib.sha256()
    for item in sorted(items, key=lambda i: i.id):
        digest.update(item.model_dump_json().encode())
    for lab in sorted(labels, key=lambda x: (x.item_id, x.part, x.annotator or "")):
        digest.update(lab.model_dump_json().encode())
    return digest.hexdigest()[:16]


def _final_program(compiled: Any, ledger: Ledger, keys: set[str], spec: JudgeSpec,
                   notes: list[str]) -> tuple[str, list[dict[str, Any]]]:
    """(instructions, demos in spec form) of the result: the compiled program's, else the ledger's best so far."""
    if compiled is not None:
        return compiled.predict.signature.instructions.strip(), [demo_to_spec(d, spec) for d in compiled.predict.demos]
    best = ledger.best(keys)
    if best is None:
        best = ledger.best_partial(keys)
        if best is not None:
            notes.append("no candidate was scored on every validation example before the stop: the best one "
                         "scored on at least half of them was kept")
    if best is None:
        notes.append("no candidate was scored on enough validation examples before the stop: the base judge was kept")
        return render_instructions(spec), list(spec.demos)
    snap = ledger.candidates[best]
    return snap["instructions"].strip(), snap["demos"]


def _unchanged(base: JudgeSpec, new: JudgeSpec) -> bool:
    """Same prompt as the base judge: same rendered instructions and demos (provenance and flags aside)."""
    return render_instructions(base) == render_instructions(new) and list(base.demos) == list(new.demos)


def _compile(plan: Plan, lm: Any, prompt_lm: Any, budget: Budget, reserve: int, retry: RetryPolicy,
             metric: JudgeMetric, guard: InstructionGuard, ledger: Ledger) -> tuple[Any, str | None]:
    """Run the optimizer; (compiled program or None, why it stopped early or None)."""
    import dspy

    from scijudge.optimization._retry import FatalModelError

    cap = plan.recipe.budget.max_lm_calls
    gate = Gate(budget, "optimization", reserve_calls=reserve, limit=cap - reserve if cap is not None else None)
    task_lm = budgeted(lm, gate)
    proposal_lm = budgeted(prompt_lm or lm, gate, retry=retry)
    student = OptJudge(plan.spec, lm=task_lm, guard=guard, ledger=ledger, gate=gate)
    if plan.mode != "generate":
        student.use_mode(plan.mode, plan.decision_score)
    entry = entry_for(plan.recipe.optimizer)
    inputs = CompileInputs(student=student, trainset=plan.train, devset=plan.dev, metric=metric,
                           prompt_lm=proposal_lm, seed=plan.recipe.split.seed)
    try:
        with dspy.context(lm=task_lm):
            return entry.compile(plan.recipe.typed_settings(), inputs), None
    except BudgetStop as stop:
        return None, stop.reason
    except KeyboardInterrupt:  # Ctrl-C: like a budget stop, the best candidate so far is kept, tested and written
        gate.close(wait=0)
        return None, INTERRUPTED
    except StopRun as stop:
        gate.close(wait=0)
        raise stop.error or ModelError(stop.reason) from None
    except FatalModelError:
        raise
    except Exception as exc:
        from scijudge.lm.dspy_compat import lm_error_class

        if not isinstance(exc, lm_error_class()):
            raise
        from scijudge.optimization._retry import short_error

        return None, f"the {plan.recipe.optimizer} optimizer stopped on a model error after retries: {short_error(exc)}"
    finally:
        gate.close()


def optimize(judge_spec: JudgeSpec | str | Path, items: list[Item] | str | Path,
             labels: list[HumanLabel] | str | Path, lm: Any, recipe: Recipe | str | Path, *,
             prompt_lm: Any = None, out: str | Path | None = None, track: str | None = None,
             tracking_uri: str | None = None, n_boot: int = 200, split: SplitSpec | None = None,
             baseline: Baseline | None = None, check_model: bool = True, retry: RetryPolicy | None = None,
             robustness: Any = None, mode: str = "generate", decision_score: str = "expected") -> OptimizationResult:
    """Optimize a judge's instructions and demos against human labels (see the module docstring).

    Args:
        judge_spec: a JudgeSpec, a shipped judge name, or a spec path.
        items: items (or a JSONL path); labels: human labels (or a JSONL/CSV path).
        lm: the DSPy LM the judge runs on (``scijudge.lm.make_lm(...)``).
        recipe: a Recipe, a recipe path, or a shipped recipe name (``mipro``).
        prompt_lm: LM for the optimizer's proposal/reflection calls (default: ``lm``).
        out: where to write the optimized spec (``.toml`` path, or a folder); also writes
            ``<stem>.program.json`` and ``<stem>.report.json`` beside it.
        track: ``"mlflow"`` to log parameters, per-candidate scores and artifacts (needs the ``track`` extra).
        n_boot: bootstrap resamples for the intervals of the before/after report.
        split: split ratios and seed overriding the recipe's (experiments use one split for every recipe).
        baseline: the base judge's test judgments, already made (experiments judge the baseline once per model).
        check_model: send the preflight request first (off when the caller already did).
        retry: retry policy for proposal/reflection calls (default ``RetryPolicy()``).
        robustness: a ``Robustness`` term (perturbed variants) added to the metric; see ``_robustness``.
        mode: ``"decision"`` scores every candidate and the test split from the model's probabilities over the
            levels (``load_judge(mode="decision")``: no text generated, a fraction of the time of a generated
            answer); for optimizers that only score candidates (not GEPA or SIMBA, which read answers' text).
        decision_score: with decision mode, ``"expected"`` (the distribution's expected level) or ``"mode"``.
    """
    plan = prepare(judge_spec, items, labels, recipe, split=split, roles=1 if baseline is not None else 2,
                   robustness=robustness, mode=mode, decision_score=decision_score)
    return run_plan(plan, lm, prompt_lm=prompt_lm, out=out, track=track, tracking_uri=tracking_uri, n_boot=n_boot,
                    baseline=baseline, check_model=check_model, retry=retry, robustness=robustness)


def _provenance(plan: Plan, lm: Any, prompt_lm: Any, started: datetime, *, check: str, stopped: str | None,
                robustness: Any) -> dict[str, Any]:
    """What an optimized spec records about how it was made (before its test figures are known)."""
    spec, recipe, data = plan.spec, plan.recipe, plan.data
    provenance: dict[str, Any] = {
        "display_name": f"{spec.name}@{recipe.name}-{started:%Y%m%d-%H%M%S}", "base_spec": spec.name,
        "base_spec_hash": spec.spec_hash(),
        "optimizer": recipe.optimizer, "recipe": recipe.name, "settings": recipe.settings, "metric": recipe.metric,
        "split": {"train": recipe.split.train, "dev": recipe.split.dev, "test": recipe.split.test,
                  "seed": recipe.split.seed, **{f"n_{k}_items": v for k, v in plan.split.sizes().items()}},
        "model": model_name(lm), "prompt_model": model_name(prompt_lm or lm),
        "data_hash": _data_hash([i for i in plan.items if i.id in data.by_item], data.labels),
        "seed": recipe.split.seed, "date": started.isoformat(timespec="seconds"),
        "instructions_check": check, "stopped_early": bool(stopped), "mode": plan.mode,
        **({"decision_score": plan.decision_score} if plan.mode == "decision" else {}),
    }
    if robustness is not None:
        provenance["robustness"] = {**robustness.describe(), "train_dev_variants": sum(
            1 for ex in plan.train + plan.dev if ex.get("sj_below") is not None), "test_variants": len(plan.test_variants)}
    return provenance


def run_plan(plan: Plan, lm: Any, *, prompt_lm: Any = None, out: str | Path | None = None, track: str | None = None,
             tracking_uri: str | None = None, n_boot: int = 200, baseline: Baseline | None = None,
             check_model: bool = True, retry: RetryPolicy | None = None, robustness: Any = None) -> OptimizationResult:
    """Run a prepared optimization (``prepare``): preflight, search, test evaluation, result."""
    spec, recipe, data = plan.spec, plan.recipe, plan.data
    tracker = None
    if track is not None:
        from scijudge.optimization._tracking import make_tracker

        tracker = make_tracker(track, tracking_uri=tracking_uri, out=out)
    budget = Budget(max_calls=recipe.budget.max_lm_calls, max_cost=recipe.budget.max_cost_usd)
    started = datetime.now(UTC)
    preflight_calls = 0
    if check_model:
        gate = Gate(budget, "preflight")
        for model_lm in [lm] + ([prompt_lm] if prompt_lm is not None and prompt_lm is not lm else []):
            preflight(model_lm, wrap=lambda probe: budgeted(probe, gate))
            preflight_calls += 1

    guard = InstructionGuard.for_spec(spec)
    ledger = Ledger()
    seen_dev = plan.dev if entry_for(recipe.optimizer).sees_dev and plan.dev else plan.train + plan.dev
    weights = class_weights([ex[VERDICT] for ex in plan.train + plan.dev]) if data.kind == "verdict" else {}
    lo, hi, step = data.scale
    cls = entry_for(recipe.optimizer)
    from scijudge.optimization._judge_metrics import FeedbackMetric

    metric = (FeedbackMetric if cls.feedback_metric else JudgeMetric)(name=recipe.metric, lo=lo, hi=hi, step=step,
                                                                       class_weights=weights, ledger=ledger)
    roles = 1 if baseline is not None else 2
    compiled, stopped = _compile(plan, lm, prompt_lm, budget, plan.reserve(roles), retry or RetryPolicy(), metric,
                                 guard, ledger)
    opt_calls = budget.calls
    notes = list(data.notes)
    if stopped:
        notes.append(f"optimization stopped early: {stopped}; the best candidate so far was kept and tested")
    instructions, demos = _final_program(compiled, ledger, {example_key(e) for e in seen_dev}, spec, notes)
    problems = guard.problems(instructions)
    check = "ok"
    if problems:
        notes.append("the optimized instructions were rejected (" + "; ".join(problems) + "): the base instructions "
                     "were kept")
        instructions, check = render_instructions(spec), "reverted"

    provenance = _provenance(plan, lm, prompt_lm, started, check=check, stopped=stopped, robustness=robustness)
    new_spec = optimized_spec(spec, instructions, demos, provenance)
    same = _unchanged(spec, new_spec)
    if same:
        notes.append("the optimizer returned the base judge unchanged")

    # --- the one look at the test split ---
    eval_gate = Gate(budget, "evaluation")
    judges: dict[str, Judge] = {}
    if baseline is None:
        judges["before"] = plan.judge(spec, budgeted(lm, eval_gate))  # a Judge applies its spec's demos itself
    if not same:
        judges["after"] = plan.judge(new_spec, budgeted(lm, eval_gate))
    threads = int(recipe.settings.get("num_threads", 1))
    items_by_id = {i.id: i for i in plan.items}
    rows, skipped = judge_examples(judges, plan.test, items_by_id, threads) if judges else ([], set())
    if baseline is not None:
        rows = baseline.rows_for(plan.test, exclude=skipped) + rows
    if same:
        rows += [{**r, "role": "after", "source": "after"} for r in rows if r["role"] == "before"]
    eval_calls = budget.calls - opt_calls
    if skipped:
        notes.append(f"{len(skipped)} test example(s) were left out of the comparison: the budget ran out during "
                     "the test evaluation")
    test_ids = set(plan.split.test)
    test_labels = [lab for lab in data.labels if lab.item_id in test_ids]
    before, after, calibration = summaries(rows, plan.test, test_labels, metric, data.kind, recipe.split.seed, n_boot)
    if 0 < int(after.get("n_units") or 0) < MIN_TEST_UNITS:
        notes.append(f"only {after['n_units']} test unit(s), fewer than {MIN_TEST_UNITS}: the before/after numbers "
                     "are noisy; read their 95% intervals (<stat>_after_lo, <stat>_after_hi) first")
    variant_rows: list[dict[str, Any]] = []
    if robustness is not None:
        from scijudge.optimization._robustness import Robustness, judge_variants

        for role, judge in judges.items():
            mine, lost = judge_variants(judge, plan.test_variants, threads, role)
            variant_rows += mine
            if lost:
                notes.append(f"{lost} perturbed test variant(s) of the {role} judge were not judged: the budget ran out")
        if baseline is not None:
            variant_rows += baseline.variant_rows
        for role, values in (("before", before), ("after", after)):
            source = "before" if same else role
            values.update(Robustness.report([r for r in rows if r["role"] == source],
                                            [r for r in variant_rows if r["role"] == source]))

    snapshot = budget.snapshot()
    cost = snapshot["cost_usd"] if snapshot["unpriced_calls"] == 0 or snapshot["cost_usd"] > 0 else None
    if recipe.budget.max_cost_usd is not None and snapshot["unpriced_calls"]:
        notes.append(f"{snapshot['unpriced_calls']} LM call(s) had no known price: the cost budget could not "
                     "count them")
    budget_info = {"lm_calls": budget.calls, "preflight_lm_calls": preflight_calls,
                   "optimization_lm_calls": opt_calls, "evaluation_lm_calls": eval_calls,
                   "baseline_lm_calls": baseline.lm_calls if baseline is not None else None,
                   "cached_calls": snapshot["cached_calls"], "cost_usd": cost,
                   "max_lm_calls": recipe.budget.max_lm_calls, "max_cost_usd": recipe.budget.max_cost_usd}
    final_prov = {**new_spec.provenance, **{k: v for k, v in budget_info.items() if k in (
        "lm_calls", "optimization_lm_calls", "evaluation_lm_calls", "cost_usd")},
        "stopped": stopped or "", "calibration": {"test_items": len(plan.split.test), "before": before, "after": after},
        "notes": notes}
    new_spec = new_spec.model_copy(update={"provenance": final_prov})

    program = Judge(new_spec, lm=lm)
    if compiled is not None:  # the optimizer's own program (not rebuilt from the spec): what save/load must match
        program.predict.signature = compiled.predict.signature.with_instructions(instructions)
        program.predict.demos = list(compiled.predict.demos)
    program.predict.lm = None
    import pandas as pd

    result = OptimizationResult(
        spec=new_spec, base_spec=spec, program=program, recipe=recipe, split=plan.split, before=before, after=after,
        test_judgments=pd.DataFrame(rows), calibration=calibration,
        variant_judgments=pd.DataFrame(variant_rows),
        trials=ledger.trials({example_key(e) for e in seen_dev}), budget=budget_info, stopped=stopped, notes=notes,
    )
    result.unchanged = same
    if out is not None and not (same and result.interrupted):  # nothing new to keep: the base judge is on disk
        write_outputs(result, Path(out))
    if tracker is not None:
        tracker.log_result(result)
    return result
