"""Prompt optimization of judges against human labels, with honest splits, hard budgets and a held-out report.

``optimize(judge, items, labels, lm, recipe)`` runs one recipe (``optimizers/*.toml``):

1. builds one DSPy example per labelled (item, part) of the judge, with the annotators' consensus;
2. splits the items into train/dev/test (by item, stratified by label, seeded); the optimizer sees
   train and dev only;
3. compiles the judge with the recipe's DSPy optimizer and metric, every LM call counted against the
   budget before it is sent (the judge's calls and the proposal/reflection calls alike);
4. judges the test split once with the base judge and once with the optimized one and compares both
   with the human labels (``scijudge.metrics.calibration.calibrate``);
5. returns the optimized spec (new instructions and demos, plus provenance) and, with ``out``, writes
   it as TOML (usable anywhere a judge name is), the DSPy program as JSON and a JSON report.

Candidates whose instructions lose a required input or invent a field are never sent (see
``scijudge.optimization._guard``). A budget that runs out mid-optimization ends it with the best candidate that was
scored on the whole dev split (``result.stopped`` says why), or raises ``BudgetExceeded`` when none was.
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
import statistics
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from scijudge.optimization._budget import Budget, BudgetStop, Gate, StopRun, budgeted
from scijudge.demos import demo_to_spec, demos_from_spec
from scijudge.optimization._experiment import plot_experiment, run_experiment
from scijudge.optimization._guard import InstructionGuard
from scijudge.optimization._judge_metrics import (
    HUMAN,
    ITEM,
    PART,
    RATIONALES,
    SCORES,
    VERDICT,
    VERDICTS,
    JudgeMetric,
    Ledger,
    class_weights,
    example_key,
    norm_verdict,
)
from scijudge.optimization._optimizers import SEES_DEV, compile_with, metric_for, minimum_sizes
from scijudge.optimization._recipes import Recipe, _line_of, load_recipe, recipe_from_dict, resolve_recipe, shipped_recipes_dir
from scijudge.optimization._splits import ItemSplit, split_items
from scijudge.data import Item, load_items
from scijudge.errors import BudgetExceeded, InputError, ModelError
from scijudge.judges.base import Judge, JudgeResult, model_name
from scijudge.labels import HumanLabel, labels_to_frame, load_labels
from scijudge.signatures import OUTPUT_FIELD, render_instructions
from scijudge.specs import JudgeSpec, Scale, get_spec

__all__ = [
    "OptimizationResult",
    "Recipe",
    "load_optimized_judge",
    "load_program",
    "load_recipe",
    "optimize",
    "optimized_spec",
    "plot_experiment",
    "recipe_from_dict",
    "resolve_recipe",
    "run_experiment",
    "save_spec",
    "shipped_recipes_dir",
]


# --- the judge while it is being optimized ------------------------------------------------------------


class _OptJudge(Judge):
    """The judge as optimizers see it: refuses candidates with broken instructions (an abstention, no LM
    call) and tags every prediction with the candidate it came from, for the ledger."""

    def __init__(self, spec: JudgeSpec, *, lm: Any, guard: InstructionGuard, ledger: Ledger, gate: Gate) -> None:
        super().__init__(spec, lm=lm)
        self._sj_guard = guard
        self._sj_ledger = ledger
        self._sj_gate = gate
        # (id of signature, ids of demos) -> (the objects themselves, candidate id); holding the objects keeps
        # their ids from being reused by later candidates while the optimization runs
        self._sj_seen: dict[tuple[int, tuple[int, ...]], tuple[Any, list[Any], str]] = {}

    def __deepcopy__(self, memo: dict[int, Any]) -> _OptJudge:
        import copy

        shared = {"chain", "lm", "spec", "_sj_guard", "_sj_ledger", "_sj_gate", "_sj_seen"}
        new = self.__class__.__new__(self.__class__)
        memo[id(self)] = new
        for key, value in self.__dict__.items():
            new.__dict__[key] = value if key in shared else copy.deepcopy(value, memo)
        return new

    def _candidate(self) -> str:
        """Stable id of this program's instructions + demos (content hash, computed once per object set)."""
        signature, demos = self.predict.signature, list(self.predict.demos)
        key = (id(signature), tuple(id(d) for d in demos))
        seen = self._sj_seen.get(key)
        if seen is not None:
            return seen[2]
        snapshot = {"instructions": signature.instructions, "demos": [demo_to_spec(d, self.spec) for d in demos]}
        cid = hashlib.sha256(json.dumps(snapshot, sort_keys=True).encode()).hexdigest()[:12]
        self._sj_ledger.register(cid, snapshot, self._sj_gate.budget.calls)
        self._sj_seen[key] = (signature, demos, cid)
        return cid

    def forward(self, **inputs: Any) -> Any:
        import dspy

        cid = self._candidate()
        problems = self._sj_guard.problems(self.predict.signature.instructions)
        if problems:
            return dspy.Prediction(judgment=None, abstained=True, attempts=[], candidate=cid,
                                   reason="instructions rejected: " + "; ".join(problems))
        try:
            prediction = super().forward(**inputs)
        except ModelError as exc:  # auth, billing, configuration: no candidate can do better, so stop now
            self._sj_gate.close(wait=0)
            raise StopRun(str(exc), exc) from exc
        prediction.candidate = cid
        return prediction


# --- data: labelled examples -------------------------------------------------------------------------


@dataclass
class _Data:
    examples: list[Any]
    by_item: dict[str, list[Any]]
    kind: str  # "score" | "verdict"
    labels: list[HumanLabel]
    scale: tuple[float, float, float]
    notes: list[str]


def _scale_of(spec: JudgeSpec) -> tuple[float, float, float]:
    scale = spec.scale or Scale()
    return float(scale.min), float(scale.max), float(scale.step)


def _label_where(label: HumanLabel, fallback: str | None) -> dict[str, Any]:
    origin = label.origin
    return {"file": origin[0] if origin else fallback, "line": origin[1] if origin else None}


def _snap(value: float, lo: float, hi: float, step: float) -> float:
    return min(hi, max(lo, lo + round((value - lo) / step) * step))


def _label_output(spec: JudgeSpec, consensus: float, rationales: list[str]) -> Any:
    """The human label as the judge's typed output (for labelled demonstrations), when that is well defined."""
    from pydantic import ValidationError

    from scijudge.outputs import LikertRating

    if spec.output_type() is not LikertRating:
        return None
    try:
        return LikertRating(rating=int(consensus), rationale=" ".join(rationales) or "Human label.")
    except ValidationError:
        return None


def _build_data(spec: JudgeSpec, items: list[Item], labels: list[HumanLabel], recipe: Recipe,
                labels_source: str | None) -> _Data:
    import dspy

    mine = [lab for lab in labels if lab.judge == spec.name]
    if not mine:
        named = sorted({lab.judge for lab in labels})[:8]
        raise InputError(f"no label is for judge {spec.name!r} (the labels name {', '.join(named)})",
                         file=labels_source, field="judge")
    if spec.family == "pairwise":
        raise InputError(f"judge {spec.name!r} is pairwise; optimize supports judges with one judgment per item "
                         "and part (optimize the Likert rubric and derive its pairwise variant)", field="judge")
    kind = "score" if mine[0].score is not None else "verdict"
    for lab in mine:
        if (lab.score is not None) != (kind == "score"):
            raise InputError(f"labels for judge {spec.name!r} mix scores and verdicts", field="score",
                             **_label_where(lab, labels_source))
    wants = "verdict" if recipe.metric == "verdict_balanced" else "score"
    if wants != kind:
        text = Path(recipe.source).read_text(encoding="utf-8") if recipe.source and Path(recipe.source).exists() else ""
        raise InputError(f"metric {recipe.metric!r} needs {wants} labels, but the labels for judge {spec.name!r} "
                         f"are {kind}s", file=recipe.source, line=_line_of(text, ("metric",)), field="metric")
    lo, hi, step = _scale_of(spec)
    by_id = {item.id: item for item in items}
    groups: dict[tuple[str, str], list[HumanLabel]] = {}
    for lab in mine:
        if lab.item_id not in by_id:
            raise InputError(f"label for item {lab.item_id!r}, which is not among the items", field="item_id",
                             **_label_where(lab, labels_source))
        if kind == "score" and not (lo - 1e-9 <= float(lab.score) <= hi + 1e-9):
            raise InputError(f"score {lab.score:g} is outside judge {spec.name!r}'s scale {lo:g}..{hi:g}",
                             field="score", **_label_where(lab, labels_source))
        groups.setdefault((lab.item_id, lab.part), []).append(lab)

    judge = Judge(spec)
    names = [i.name for i in spec.inputs]
    examples, notes, ties = [], [], 0
    for (item_id, part), group in sorted(groups.items()):
        rationales = [lab.rationale for lab in group if lab.rationale]
        values: dict[str, Any] = dict(judge.inputs_for(by_id[item_id], part))
        values.update({ITEM: item_id, PART: part, RATIONALES: rationales})
        if kind == "score":
            scores = [float(lab.score) for lab in group]
            mean = statistics.fmean(scores)
            consensus = _snap(statistics.median(scores), lo, hi, step)
            values.update({HUMAN: mean, SCORES: scores, "sj_stratum": consensus})
            label_output = _label_output(spec, consensus, rationales)
            if label_output is not None:
                values[OUTPUT_FIELD] = label_output
        else:
            votes = [norm_verdict(lab.verdict) for lab in group]
            counts = Counter(votes).most_common()
            if len(counts) > 1 and counts[0][1] == counts[1][1]:
                ties += 1
                continue
            values.update({VERDICT: counts[0][0], VERDICTS: votes, "sj_stratum": counts[0][0]})
        examples.append(dspy.Example(**values).with_inputs(*names))
    if ties:
        notes.append(f"{ties} labelled unit(s) with tied verdicts have no consensus and were left out")
    by_item: dict[str, list[Any]] = {}
    for ex in examples:
        by_item.setdefault(ex[ITEM], []).append(ex)
    return _Data(examples=examples, by_item=by_item, kind=kind, labels=mine, scale=(lo, hi, step), notes=notes)


def _strata(data: _Data) -> dict[str, Any]:
    """One stratum per item: its (mean) consensus score, or its most common verdict."""
    out: dict[str, Any] = {}
    for item_id, exs in data.by_item.items():
        values = [ex["sj_stratum"] for ex in exs]
        if data.kind == "score":
            out[item_id] = _snap(statistics.fmean(values), *data.scale)
        else:
            out[item_id] = Counter(values).most_common(1)[0][0]
    return out


def _split(data: _Data, recipe: Recipe, labels_source: str | None) -> ItemSplit:
    r = recipe.split
    n = len(data.by_item)
    needed = sum(1 for x in r.ratios if x > 0)
    where = f"split {r.train:g}/{r.dev:g}/{r.test:g} of recipe {recipe.source or recipe.name}"
    if n < needed:
        raise InputError(f"the labels cover {n} item(s) for this judge; the {where} needs at least {needed} "
                         "labelled items (one per split)", file=labels_source, field="item_id")
    split = split_items(_strata(data), r.ratios, r.seed)
    sizes = {name: sum(len(data.by_item[i]) for i in getattr(split, name)) for name in ("train", "dev", "test")}
    problems = minimum_sizes(recipe, sizes)
    if problems:
        raise InputError(f"the labels cover {n} item(s) ({sizes['train']} train / {sizes['dev']} dev / "
                         f"{sizes['test']} test examples under the {where}): " + "; ".join(problems),
                         file=labels_source, field="item_id")
    return split


# --- results -------------------------------------------------------------------------------------------


@dataclass
class OptimizationResult:
    """What one optimization produced: the optimized spec and program, and the held-out comparison."""

    spec: JudgeSpec
    base_spec: JudgeSpec
    program: Judge
    recipe: Recipe
    split: ItemSplit
    before: dict[str, Any]
    after: dict[str, Any]
    test_judgments: Any  # pandas DataFrame of run-store rows, column "role" = before | after
    calibration: Any  # scijudge.metrics.calibration.CalibrationResult
    trials: list[dict[str, Any]]
    budget: dict[str, Any]
    stopped: str | None = None
    notes: list[str] = field(default_factory=list)
    spec_path: Path | None = None
    program_path: Path | None = None
    report_path: Path | None = None

    @property
    def improvement(self) -> float:
        """Test metric score after minus before."""
        return float(self.after["score"] - self.before["score"])

    def summary(self) -> dict[str, Any]:
        """One flat row (used by experiment tables)."""
        row: dict[str, Any] = {"judge": self.spec.name, "recipe": self.recipe.name, "optimizer": self.recipe.optimizer,
                               "metric": self.recipe.metric, "model": self.spec.provenance.get("model"),
                               **{k: self.budget.get(k) for k in ("lm_calls", "optimization_lm_calls",
                                                                  "evaluation_lm_calls", "cost_usd")},
                               "stopped": self.stopped or "", "n_test": self.before.get("n_units")}
        for role, values in (("before", self.before), ("after", self.after)):
            for key in ("score", "exact", "within1", "mae", "kappa_w", "accuracy", "balanced_accuracy", "coverage"):
                if key in values:
                    row[f"{key}_{role}"] = values[key]
        row["spec_path"] = str(self.spec_path) if self.spec_path else ""
        return row


# --- the optimized spec --------------------------------------------------------------------------------


def _split_instructions(base: JudgeSpec, text: str) -> tuple[JudgeSpec, bool]:
    """A spec whose rendered instructions equal ``text``: keep the anchors when the text still ends with them."""
    text = text.strip()
    suffix = render_instructions(base)[len(base.instructions.strip()):]
    if suffix and text.endswith(suffix):
        head = text[: -len(suffix)]
        candidate = base.model_copy(update={"instructions": head})
        if render_instructions(candidate) == text:
            return candidate, False
    scale = base.scale.model_copy(update={"anchors": {}}) if base.scale else None
    blocks = {k: b.model_copy(update={"text": ""}) for k, b in base.blocks.items()}
    candidate = base.model_copy(update={"instructions": text, "scale": scale, "blocks": blocks})
    if render_instructions(candidate) != text:  # pragma: no cover - render only strips and joins
        raise AssertionError("optimized instructions do not survive rendering")
    return candidate, True


def optimized_spec(base: JudgeSpec, instructions: str, demos: list[dict[str, Any]],
                   provenance: dict[str, Any]) -> JudgeSpec:
    """A copy of ``base`` that renders exactly ``instructions``, with ``demos`` and ``provenance``."""
    spec, inlined = _split_instructions(base, instructions)
    if inlined:
        provenance = {**provenance, "anchors_inlined": True}
    spec = spec.model_copy(update={"demos": demos, "provenance": provenance, "pairwise": False})
    spec.source = None
    return spec


def _toml_ready(value: Any) -> Any:
    """Drop None and non-finite floats (TOML has neither null nor NaN in our files)."""
    if isinstance(value, dict):
        return {str(k): _toml_ready(v) for k, v in value.items() if v is not None and _toml_ready(v) is not None}
    if isinstance(value, (list, tuple)):
        return [_toml_ready(v) for v in value if v is not None]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Path):
        return str(value)
    return value


def _has_cr(value: Any) -> bool:
    if isinstance(value, str):
        return "\r" in value
    if isinstance(value, dict):
        return any(_has_cr(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_cr(v) for v in value)
    return False


def save_spec(spec: JudgeSpec, path: str | Path) -> Path:
    """Write a spec as TOML that ``get_spec(path)`` reads back identically (same hash, same prompts)."""
    import tomli_w

    path = Path(path)
    data = _toml_ready(spec.model_dump(mode="json"))
    # Multi-line TOML strings are easier to review, but a reader may turn "\r\n" in them into "\n": text
    # with carriage returns is written with escapes instead, so that it reads back byte for byte.
    multiline = not _has_cr(data)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(tomli_w.dumps(data, multiline_strings=multiline), encoding="utf-8")
    return path


def load_optimized_judge(path: str | Path, *, lm: Any = None, model: str | None = None) -> Judge:
    """A judge from a spec file, with the spec's demos applied (what the CLI's ``--judge x.toml`` should do)."""
    from scijudge.demos import apply_spec_demos
    from scijudge.judges.base import load_judge

    return apply_spec_demos(load_judge(Path(path), lm=lm, model=model))


def load_program(path: str | Path, spec: JudgeSpec | str | Path, *, lm: Any = None) -> Judge:
    """A judge from a DSPy program JSON (``judge.save``) and the spec it was optimized from."""
    spec = spec if isinstance(spec, JudgeSpec) else get_spec(spec)
    judge = Judge(spec)
    judge.load(str(path))  # (loading deep-copies the module: bind the LM afterwards)
    judge.lm = lm
    typed = spec.model_copy(update={"demos": [demo_to_spec(d, spec) for d in judge.predict.demos]})
    judge.predict.demos = demos_from_spec(typed)
    judge.predict.lm = None
    return judge


# --- test evaluation -----------------------------------------------------------------------------------


def _judge_examples(judges: dict[str, Judge], examples: list[Any], items: dict[str, Item],
                    threads: int) -> tuple[list[dict[str, Any]], int]:
    """Judge each test example with every judge (interleaved, so a budget stop costs both alike)."""
    tasks = [(role, ex) for ex in examples for role in judges]

    def run(task: tuple[str, Any]) -> tuple[str, Any, JudgeResult | None]:
        role, ex = task
        try:
            return role, ex, judges[role].judge_item(items[ex[ITEM]], ex[PART])
        except BudgetStop:
            return role, ex, None

    with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        done = list(pool.map(run, tasks))
    skipped = {example_key(ex) for _, ex, res in done if res is None}
    rows = []
    for role, ex, res in done:
        if res is None or example_key(ex) in skipped:
            continue
        row = res.model_dump(mode="json")
        row.update(key=res.key, role=role, source=role)
        rows.append(row)
    return rows, len(skipped)


def _summaries(rows: list[dict[str, Any]], test_examples: list[Any], test_labels: list[HumanLabel],
               metric: JudgeMetric, kind: str, seed: int, n_boot: int) -> tuple[dict[str, Any], dict[str, Any], Any]:
    """Before/after statistics on the test split: the calibration report plus the recipe metric."""
    import dspy
    import pandas as pd

    from scijudge.metrics.calibration import calibrate

    frame = pd.DataFrame(rows)
    out: dict[str, dict[str, Any]] = {}
    calibration = None
    if len(frame):
        labels = labels_to_frame(test_labels)
        keep = set(frame["item_id"])
        labels = labels[labels["item_id"].isin(keep)]
        calibration = calibrate(frame.drop(columns=["role"]), labels, n_boot=n_boot, seed=seed)
    by_key = {example_key(ex): ex for ex in test_examples}
    for role in ("before", "after"):
        mine = frame[frame["role"] == role] if len(frame) else frame
        values: dict[str, Any] = {"n_units": len(mine)}
        scores = []
        for _, row in mine.iterrows():
            ex = by_key[f"{row['item_id']}\x1f{row['part'] or ''}"]
            if row["status"] != "ok":
                judgment = None
            else:
                judgment = _RowJudgment(row["score"], row["verdict"])
            scores.append(metric.score(ex, dspy.Prediction(judgment=judgment, abstained=judgment is None)))
        values["score"] = float(statistics.fmean(scores)) if scores else float("nan")
        if calibration is not None and len(mine):
            table = calibration.per_rubric if kind == "score" else calibration.verdict_per_rubric
            sel = table[table["contender"].astype(str).str.endswith(f"@{role}")] if len(table) else table
            if len(sel):
                rec = sel.iloc[0].to_dict()
                for key in ("n", "coverage", "exact", "within1", "mae", "kappa_w", "spearman", "bias", "accuracy",
                            "balanced_accuracy", "kappa", "macro_f1"):
                    value = rec.get(key)
                    if isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value):
                        values[key] = float(value)
        out[role] = values
    return out["before"], out["after"], calibration


class _RowJudgment:
    """A stored judgment seen through ``run_fields`` (so the recipe metric can score run-store rows)."""

    def __init__(self, score: Any, verdict: Any) -> None:
        self._score = None if score is None or (isinstance(score, float) and math.isnan(score)) else float(score)
        self._verdict = verdict

    def run_fields(self) -> Any:
        from scijudge.outputs import RunFields

        return RunFields(score=self._score, verdict=self._verdict)


# --- the whole run -------------------------------------------------------------------------------------


def _data_hash(items: list[Item], labels: list[HumanLabel]) -> str:
    digest = hashlib.sha256()
    for item in sorted(items, key=lambda i: i.id):
        digest.update(item.model_dump_json().encode())
    for lab in sorted(labels, key=lambda x: (x.item_id, x.part, x.annotator or "")):
        digest.update(lab.model_dump_json().encode())
    return digest.hexdigest()[:16]


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


def _final_program(compiled: Any, ledger: Ledger, keys: set[str], stopped: str | None,
                   spec: JudgeSpec) -> tuple[str, list[dict[str, Any]]]:
    """(instructions, demos in spec form) of the result: the compiled program's, or the ledger's best."""
    if compiled is not None:
        return compiled.predict.signature.instructions.strip(), [demo_to_spec(d, spec) for d in compiled.predict.demos]
    best = ledger.best(keys)
    if best is None:
        raise BudgetExceeded(f"{stopped}, before any candidate was scored on all of its validation examples; "
                             "raise budget.max_lm_calls or lower the optimizer's settings")
    snap = ledger.candidates[best]
    return snap["instructions"].strip(), snap["demos"]


def optimize(judge_spec: JudgeSpec | str | Path, items: list[Item] | str | Path,
             labels: list[HumanLabel] | str | Path, lm: Any, recipe: Recipe | str | Path, *,
             prompt_lm: Any = None, out: str | Path | None = None, track: str | None = None,
             tracking_uri: str | None = None, n_boot: int = 200) -> OptimizationResult:
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
    """
    import dspy

    recipe = resolve_recipe(recipe)
    spec, items, labels, labels_source = _resolve_inputs(judge_spec, items, labels)
    tracker = None
    if track is not None:
        from scijudge.optimization._tracking import make_tracker

        tracker = make_tracker(track, tracking_uri=tracking_uri, out=out)

    # --- everything that can be wrong with the input is found here, before any LM call ---
    data = _build_data(spec, items, labels, recipe, labels_source)
    split = _split(data, recipe, labels_source)
    part_of = {name: [ex for i in getattr(split, name) for ex in data.by_item[i]] for name in ("train", "dev", "test")}
    train, dev, test = part_of["train"], part_of["dev"], part_of["test"]
    reserve = 2 * len(test)
    budget_spec = recipe.budget
    if budget_spec.max_lm_calls is not None and budget_spec.max_lm_calls <= reserve:
        text = Path(recipe.source).read_text(encoding="utf-8") if recipe.source and Path(recipe.source).exists() else ""
        raise InputError(f"max_lm_calls = {budget_spec.max_lm_calls} leaves nothing for the optimizer: the "
                         f"before/after test evaluation alone takes {reserve} calls (2 per test example)",
                         file=recipe.source, line=_line_of(text, ("budget", "max_lm_calls")),
                         field="budget.max_lm_calls")

    budget = Budget(max_calls=budget_spec.max_lm_calls, max_cost=budget_spec.max_cost_usd)
    gate = Gate(budget, "optimization", reserve_calls=reserve,
                limit=budget_spec.max_lm_calls - reserve if budget_spec.max_lm_calls is not None else None)
    task_lm = budgeted(lm, gate)
    proposal_lm = budgeted(prompt_lm or lm, gate)
    guard = InstructionGuard.for_spec(spec)
    ledger = Ledger()
    student = _OptJudge(spec, lm=task_lm, guard=guard, ledger=ledger, gate=gate)
    student.predict.demos = demos_from_spec(spec)
    seen_dev = dev if SEES_DEV[recipe.optimizer] and dev else train + dev
    weights = class_weights([ex[VERDICT] for ex in train + dev]) if data.kind == "verdict" else {}
    lo, hi, step = data.scale
    metric = metric_for(recipe, lo=lo, hi=hi, step=step, class_weights=weights, ledger=ledger)

    stopped = None
    compiled = None
    started = datetime.now(UTC)
    try:
        with dspy.context(lm=task_lm):
            compiled = compile_with(recipe, student, trainset=train, devset=dev, metric=metric,
                                    prompt_lm=proposal_lm, seed=recipe.split.seed)
    except BudgetStop as stop:
        stopped = stop.reason
    except StopRun as stop:
        gate.close()
        raise stop.error or ModelError(stop.reason) from None
    finally:
        gate.close()
    opt_calls = budget.calls
    notes = list(data.notes)
    if stopped:
        notes.append(f"optimization stopped early: {stopped}; the best candidate scored on every validation "
                     "example so far was kept")

    instructions, demos = _final_program(compiled, ledger, {example_key(e) for e in seen_dev}, stopped, spec)
    problems = guard.problems(instructions)
    check = "ok"
    if problems:
        notes.append("the optimized instructions were rejected (" + "; ".join(problems) + "): the base instructions "
                     "were kept")
        instructions, check = render_instructions(spec), "reverted"

    provenance: dict[str, Any] = {
        "base_spec": spec.name, "base_spec_hash": spec.spec_hash(),
        "optimizer": recipe.optimizer, "recipe": recipe.name, "settings": recipe.settings, "metric": recipe.metric,
        "split": {"train": recipe.split.train, "dev": recipe.split.dev, "test": recipe.split.test,
                  "seed": recipe.split.seed, **{f"n_{k}_items": v for k, v in split.sizes().items()}},
        "model": model_name(lm), "prompt_model": model_name(prompt_lm or lm),
        "data_hash": _data_hash([i for i in items if i.id in data.by_item], data.labels),
        "seed": recipe.split.seed, "date": started.isoformat(timespec="seconds"),
        "instructions_check": check,
    }
    new_spec = optimized_spec(spec, instructions, demos, provenance)

    # --- the one look at the test split ---
    eval_gate = Gate(budget, "evaluation")
    base_judge = Judge(spec, lm=budgeted(lm, eval_gate))
    base_judge.predict.demos = demos_from_spec(spec)
    judges = {"before": base_judge}
    same = new_spec.spec_hash() == spec.spec_hash()
    if not same:
        after_judge = Judge(new_spec, lm=budgeted(lm, eval_gate))
        after_judge.predict.demos = demos_from_spec(new_spec)
        judges["after"] = after_judge
    else:
        notes.append("the optimizer returned the base judge unchanged")
    threads = int(recipe.settings.get("num_threads", 1))
    rows, skipped = _judge_examples(judges, test, {i.id: i for i in items}, threads)
    if same:
        rows += [{**r, "role": "after", "source": "after"} for r in rows]
    eval_calls = budget.calls - opt_calls
    if skipped:
        notes.append(f"{skipped} test example(s) were left out of the comparison: the budget ran out during "
                     "the test evaluation")
    test_labels = [lab for lab in data.labels if lab.item_id in set(split.test)]
    before, after, calibration = _summaries(rows, test, test_labels, metric, data.kind, recipe.split.seed, n_boot)

    snapshot = budget.snapshot()
    cost = snapshot["cost_usd"] if snapshot["unpriced_calls"] == 0 or snapshot["cost_usd"] > 0 else None
    if budget_spec.max_cost_usd is not None and snapshot["unpriced_calls"]:
        notes.append(f"{snapshot['unpriced_calls']} LM call(s) had no known price: the cost budget could not "
                     "count them")
    budget_info = {"lm_calls": budget.calls, "optimization_lm_calls": opt_calls, "evaluation_lm_calls": eval_calls,
                   "cached_calls": snapshot["cached_calls"], "cost_usd": cost,
                   "max_lm_calls": budget_spec.max_lm_calls, "max_cost_usd": budget_spec.max_cost_usd}
    final_prov = {**new_spec.provenance, **{k: v for k, v in budget_info.items() if k in (
        "lm_calls", "optimization_lm_calls", "evaluation_lm_calls", "cost_usd")},
        "stopped": stopped or "", "calibration": {"test_items": len(split.test), "before": before, "after": after},
        "notes": notes}
    new_spec = new_spec.model_copy(update={"provenance": final_prov})

    program = Judge(new_spec, lm=lm)
    if compiled is not None:  # the optimizer's own program (not rebuilt from the spec): what save/load must match
        program.predict.signature = compiled.predict.signature.with_instructions(instructions)
        program.predict.demos = list(compiled.predict.demos)
    else:
        program.predict.demos = demos_from_spec(new_spec)
    program.predict.lm = None
    import pandas as pd

    result = OptimizationResult(
        spec=new_spec, base_spec=spec, program=program, recipe=recipe, split=split, before=before, after=after,
        test_judgments=pd.DataFrame(rows), calibration=calibration,
        trials=ledger.trials({example_key(e) for e in seen_dev}), budget=budget_info, stopped=stopped, notes=notes,
    )
    if out is not None:
        _write_outputs(result, Path(out))
    if tracker is not None:
        tracker.log_result(result)
    return result


def _write_outputs(result: OptimizationResult, out: Path) -> None:
    """Spec TOML, program JSON and a JSON report (calibration frames, trials, notes)."""
    from scijudge.metrics.calibration import frame_records

    spec_path = out if out.suffix == ".toml" else out / f"{result.spec.name}.{result.recipe.name}.toml"
    spec_path.parent.mkdir(parents=True, exist_ok=True)
    save_spec(result.spec, spec_path)
    program_path = spec_path.with_name(spec_path.stem + ".program.json")
    result.program.save(str(program_path))
    report_path = spec_path.with_name(spec_path.stem + ".report.json")
    report = {"summary": result.summary(), "before": result.before, "after": result.after,
              "budget": result.budget, "stopped": result.stopped, "notes": result.notes, "trials": result.trials,
              "split": {k: list(getattr(result.split, k)) for k in ("train", "dev", "test")},
              "test_judgments": frame_records(result.test_judgments.drop(columns=["attempts"], errors="ignore")),
              "calibration": result.calibration.to_dict() if result.calibration is not None else None}
    report_path.write_text(json.dumps(report, indent=2, default=str), encoding="utf-8")
    result.spec_path, result.program_path, result.report_path = spec_path, program_path, report_path
