"""What differs between judge families when optimizing: which Judge class judges, and what a label's part means.

- Checklist judges (output ``CriterionVerdict``): one judgment per (report, criterion id); inputs come from
  ``ChecklistJudge.inputs_for`` (report, task, criterion, axis), the test split is judged by the
  ``ChecklistJudge`` itself (chunking long reports); the optimizer tunes its single-call predictor.
- Multi-criterion judges (materials: an output with ``CRITERIA``): a label with ``part`` = a criterion name
  is compared with the judge's score on that criterion, a label without part with the overall score.
- Every other judge: one judgment per item (and order, for pairwise; not optimizable).
"""

from __future__ import annotations

from typing import Any

from scijudge.judges.base import Judge
from scijudge.judges.build import build_optimizer_judge
from scijudge.spec.judge_spec import JudgeSpec


def is_checklist(spec: JudgeSpec) -> bool:
    """True for specs whose optimizer judge (``scijudge.spec.families``) is the ChecklistJudge: parts are criterion ids."""
    from scijudge.judges.checklist import ChecklistJudge

    return isinstance(judge_for(spec), ChecklistJudge)


def judge_for(spec: JudgeSpec, lm: Any = None, mode: str = "generate", decision_score: str = "expected") -> Judge:
    """The Judge that runs ``spec`` on items in an optimization, as its family declares (checklist verdict
    specs: the ChecklistJudge; other verdict specs and every other family: the plain Judge), in ``mode``."""
    judge: Judge = build_optimizer_judge(spec, lm=lm)
    if mode != "generate":
        judge.use_mode(mode, decision_score)
    return judge


def criteria_of(spec: JudgeSpec) -> tuple[str, ...]:
    """Criterion names a multi-criterion judge scores separately (empty for the others)."""
    return tuple(getattr(spec.output_type(), "CRITERIA", ()) or ())


def criterion_score(output: Any, criterion: str) -> float | None:
    """A multi-criterion judgment's score on one criterion (from the typed output or its stored dict)."""
    if isinstance(output, dict):
        value = output.get(criterion)
        return float(value["score"]) if isinstance(value, dict) and value.get("score") is not None else None
    scores = getattr(output, "criterion_scores", None)
    return scores().get(criterion) if callable(scores) else None
