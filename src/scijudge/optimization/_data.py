"""Labelled examples for an optimization: one DSPy example per labelled (item, part), with the consensus, split by item."""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass
from typing import Any, cast

from scijudge.data import Item
from scijudge.errors import InputError
from scijudge.spec.families import get_family
from scijudge.labels import HumanLabel
from scijudge.optimization._families import criteria_of, is_checklist, judge_for
from scijudge.optimization._judge_metrics import CRITERION, HUMAN, ITEM, PART, RATIONALES, SCORES, VERDICT, VERDICTS
from scijudge.optimization._recipes import Recipe, recipe_line
from scijudge.optimization._registry import minimum_sizes
from scijudge.optimization._splits import ItemSplit, split_items
from scijudge.spec.signatures import OUTPUT_FIELD
from scijudge.spec.judge_spec import JudgeSpec
from scijudge.vocab import ScaleTuple, consensus_score, majority_verdict, norm_verdict, scale_of, snap


@dataclass
class Data:
    """The labelled examples of one judge, grouped by item, with their kind and scale."""

    examples: list[Any]
    by_item: dict[str, list[Any]]
    kind: str  # "score" | "verdict"
    labels: list[HumanLabel]
    scale: tuple[float, float, float]
    notes: list[str]


def _label_where(label: HumanLabel, fallback: str | None) -> dict[str, Any]:
    origin = label.origin
    return {"file": origin[0] if origin else fallback, "line": origin[1] if origin else None}


def _label_output(spec: JudgeSpec, consensus: float | None, rationales: list[str]) -> Any:
    """The human label as the judge's typed output (for labelled demonstrations), when that is well defined."""
    from pydantic import ValidationError

    from scijudge.spec.outputs import LikertRating

    output = spec.output_type()  # LikertRating on the spec's own scale (a subclass when the scale is not 1-5)
    if not (isinstance(output, type) and issubclass(output, LikertRating)) or consensus is None:
        return None
    try:
        return output(rating=int(consensus), rationale=" ".join(rationales) or "Human label.")
    except ValidationError:
        return None


def build_data(spec: JudgeSpec, items: list[Item], labels: list[HumanLabel], recipe: Recipe,
                labels_source: str | None) -> Data:
    import dspy

    mine = [lab for lab in labels if lab.judge == spec.name]
    if not mine:
        named = sorted({lab.judge for lab in labels})[:8]
        raise InputError(f"no label is for judge {spec.name!r} (the labels name {', '.join(named)})",
                         file=labels_source, field="judge")
    if not get_family(spec.family, source=spec.source).optimizable:
        raise InputError(f"judge {spec.name!r} is {spec.family}; optimize supports judges with one judgment per item "
                         "and part (optimize the Likert rubric and derive its pairwise variant)", field="judge")
    kind = "score" if mine[0].score is not None else "verdict"
    for lab in mine:
        if (lab.score is not None) != (kind == "score"):
            raise InputError(f"labels for judge {spec.name!r} mix scores and verdicts", field="score",
                             **_label_where(lab, labels_source))
    wants = "verdict" if recipe.metric == "verdict_balanced" else "score"
    if wants != kind:
        raise InputError(f"metric {recipe.metric!r} needs {wants} labels, but the labels for judge {spec.name!r} "
                         f"are {kind}s", file=recipe.source, line=recipe_line(recipe, ("metric",)), field="metric")
    scale = scale_of(spec)
    lo, hi, step = scale
    by_id = {item.id: item for item in items}
    groups: dict[tuple[str, str], list[HumanLabel]] = {}
    for lab in mine:
        if lab.item_id not in by_id:
            raise InputError(f"label for item {lab.item_id!r}, which is not among the items", field="item_id",
                             **_label_where(lab, labels_source))
        if kind == "score" and not (lo - 1e-9 <= float(cast(float, lab.score)) <= hi + 1e-9):
            raise InputError(f"score {lab.score:g} is outside judge {spec.name!r}'s scale {lo:g}..{hi:g}",
                             field="score", **_label_where(lab, labels_source))
        groups.setdefault((lab.item_id, lab.part), []).append(lab)

    judge = judge_for(spec)
    criteria = criteria_of(spec)
    checklist = is_checklist(spec)
    for (_item_id, part), group in groups.items():
        if part and not checklist and part not in criteria:
            known = f"its criteria are {', '.join(criteria)}" if criteria else "it gives one overall judgment per item"
            raise InputError(f"label part {part!r} is not something judge {spec.name!r} judges separately ({known}); "
                             "labels must be overall (no part) or per criterion", field="part",
                             **_label_where(group[0], labels_source))
    names = [i.name for i in spec.inputs]
    examples, notes, ties = [], [], 0
    for (item_id, part), group in sorted(groups.items()):
        rationales = [lab.rationale for lab in group if lab.rationale]
        values: dict[str, Any] = dict(judge.inputs_for(by_id[item_id], part))
        values.update({ITEM: item_id, PART: part, RATIONALES: rationales})
        if part and part in criteria:
            values[CRITERION] = part
        if kind == "score":
            scores = [float(cast(float, lab.score)) for lab in group]
            mean = statistics.fmean(scores)
            consensus = consensus_score(scores, scale)
            values.update({HUMAN: mean, SCORES: scores, "sj_stratum": consensus})
            label_output = _label_output(spec, consensus, rationales)
            if label_output is not None:
                values[OUTPUT_FIELD] = label_output
        else:
            votes = [norm_verdict(lab.verdict) for lab in group]
            majority = majority_verdict(votes)
            if majority is None:
                ties += 1
                continue
            values.update({VERDICT: majority, VERDICTS: votes, "sj_stratum": majority})
        examples.append(dspy.Example(**values).with_inputs(*names))
    if ties:
        notes.append(f"{ties} labelled unit(s) with tied verdicts have no consensus and were left out")
    by_item: dict[str, list[Any]] = {}
    for ex in examples:
        by_item.setdefault(ex[ITEM], []).append(ex)
    return Data(examples=examples, by_item=by_item, kind=kind, labels=mine, scale=scale, notes=notes)


def _strata(data: Data) -> dict[str, Any]:
    """One stratum per item (not a consensus rule: it balances the split): the mean of its parts' consensus
    scores snapped to the scale, or its most common verdict."""
    out: dict[str, Any] = {}
    for item_id, exs in data.by_item.items():
        values = [ex["sj_stratum"] for ex in exs]
        if data.kind == "score":
            out[item_id] = snap(statistics.fmean(values), ScaleTuple(*data.scale))
        else:
            out[item_id] = Counter(values).most_common(1)[0][0]
    return out


def split_data(data: Data, recipe: Recipe, labels_source: str | None) -> ItemSplit:
    """The recipe's split of the labelled items, checked against what its optimizer needs."""
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
