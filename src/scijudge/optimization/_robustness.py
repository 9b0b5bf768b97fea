"""An optional robustness term: perturbed variants (``scijudge perturb``) should be rated below their originals.

Given variants of the labelled items (ids ``<id>::<rubric>::<level>``, ``meta.perturbation.base_id``), those
aimed at the judge's rubric (``yescieval.qa.correctness`` → ``correctness``) become extra examples:

- variants of train/dev items join the optimizer's train/dev sets; the metric scores one 1 when the judge
  rates the variant strictly below its original's human consensus, else 0 (an abstention is 0). The
  optimizer maximises the mean over all examples, so agreement and robustness weigh by their example counts;
  prompt-injection variants (rubric ``injection``) score 1 when the rating does not rise above the consensus;
- variants of test items are judged once by each judge after the search; the report's ``robustness`` is
  the share of them rated strictly below (injection: not above) that same judge's rating of the original.

Test variants never reach the optimizer, so the split stays honest. Verdict judges are not supported (a
"lower" verdict is not defined for every verdict scale).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from scijudge.data import Item
from scijudge.errors import InputError
from scijudge.optimization._judge_metrics import BELOW, HUMAN, ITEM, PART, RATIONALES
from scijudge.vocab import INJECTION, rubric_of_judge


@dataclass
class Robustness:
    """Perturbed variants of the labelled items, used as a metric term and as a held-out report."""

    variants: list[Item]
    include_injection: bool = True
    _by_base: dict[str, list[Item]] = field(default_factory=dict, init=False, repr=False)

    @classmethod
    def from_file(cls, path: Any, **kwargs: Any) -> Robustness:
        """Variants from a JSONL file written by ``scijudge perturb``."""
        from scijudge.data import load_items

        items, _ = load_items(path)
        return cls(variants=list(items), **kwargs)

    def _for_judge(self, judge: str) -> dict[str, list[Item]]:
        rubric = rubric_of_judge(judge)
        out: dict[str, list[Item]] = {}
        for variant in self.variants:
            info = (variant.meta or {}).get("perturbation") or {}
            kind = info.get("rubric")
            if kind == rubric or (kind == INJECTION and self.include_injection):
                if info.get("changed", True):
                    out.setdefault(str(info.get("base_id")), []).append(variant)
        return out

    def describe(self) -> dict[str, Any]:
        """What the term used (for provenance)."""
        return {"variants": len(self.variants), "include_injection": self.include_injection}

    def check(self, spec: Any, kind: str, labelled: set[str]) -> dict[str, list[Item]]:
        """The variants that apply to ``spec``, by original item id; raises InputError when none does."""
        if kind != "score":
            raise InputError(f"the robustness term needs score labels; judge {spec.name!r} has verdicts",
                             field="perturbed")
        by_base = {b: vs for b, vs in self._for_judge(spec.name).items() if b in labelled}
        if not by_base:
            raise InputError(f"none of the perturbed variants targets judge {spec.name!r} (rubric "
                             f"{rubric_of_judge(spec.name)!r}) for a labelled item", field="perturbed")
        self._by_base = by_base
        return by_base

    def examples(self, judge: Any, names: list[str], originals: list[Any]) -> list[Any]:
        """Variant examples for the originals' items (train/dev), each with its original's consensus."""
        import dspy

        out = []
        for ex in originals:
            if ex.get(PART) or ex.get(HUMAN) is None:
                continue
            for variant in self._by_base.get(ex[ITEM], []):
                values = dict(judge.inputs_for(variant, ""))
                kind = (variant.meta or {}).get("perturbation", {}).get("rubric")
                values.update({ITEM: variant.id, PART: "", RATIONALES: [], BELOW: float(ex[HUMAN]),
                               "sj_injection": kind == INJECTION})
                out.append(dspy.Example(**values).with_inputs(*names))
        return out

    def test_variants(self, test_ids: list[str]) -> list[Item]:
        """Variants of the test items (judged after the search, never shown to the optimizer)."""
        return [v for i in test_ids for v in self._by_base.get(i, [])]

    @staticmethod
    def score(example: Any, score: float | None) -> float:
        """The metric value of a variant example."""
        if score is None:
            return 0.0
        if example.get("sj_injection"):
            return 1.0 if score <= example[BELOW] + 1e-9 else 0.0
        return 1.0 if score < example[BELOW] - 1e-9 else 0.0

    @staticmethod
    def report(original_rows: list[dict[str, Any]], variant_rows: list[dict[str, Any]]) -> dict[str, Any]:
        """Share of variants rated below (injection: not above) the same judge's rating of their original."""
        originals = {r["item_id"]: r.get("score") for r in original_rows if r.get("status") == "ok"}
        hits = []
        for row in variant_rows:
            info = ((row.get("_meta") or {}).get("perturbation")) or {}
            base = originals.get(str(info.get("base_id")))
            score = row.get("score") if row.get("status") == "ok" else None
            if base is None or score is None or (isinstance(score, float) and math.isnan(score)):
                continue
            hits.append(score <= base if info.get("rubric") == INJECTION else score < base)
        return {"robustness": sum(hits) / len(hits) if hits else float("nan"), "n_variants": len(hits)}


def judge_variants(judge: Any, variants: list[Item], threads: int, role: str) -> tuple[list[dict[str, Any]], int]:
    """Judge each variant once with ``judge``: rows (with the variant's ``_meta``) and how many the budget skipped."""
    import dspy

    from scijudge.optimization._evaluate import judge_examples

    examples = [dspy.Example(**{ITEM: v.id, PART: ""}) for v in variants]
    rows, skipped = judge_examples({role: judge}, examples, {v.id: v for v in variants}, threads)
    meta = {v.id: v.meta for v in variants}
    for row in rows:
        row["_meta"] = meta.get(row["item_id"])
    return rows, len(skipped)
