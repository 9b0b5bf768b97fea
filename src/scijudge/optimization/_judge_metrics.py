"""Optimization metrics for judges: how close a judgment is to the human labels, per example.

- ``likert_abs``: 1 − |judge − human| ÷ (max − min), ``human`` being the annotators' mean score.
- ``likert_sq``: 1 − ((judge − human) ÷ (max − min))², which punishes large misses more.
- ``verdict_balanced``: 1 for a correct verdict, weighted by class so that every human class counts
  equally: a correct verdict of class c scores n_rarest / n_c (n from the optimization data), so the
  mean over that data ranks candidates exactly as balanced accuracy does.

An abstention (or a judgment without a score/verdict) scores 0: it is a failure of the candidate prompt.
Called with a trace (DSPy's bootstrapping asks "may this run become a demonstration?"), the metric
answers True only for a judgment within half a scale step of the human mean (or the right verdict).
``FeedbackMetric`` adds GEPA's per-example textual feedback ("you rated 4, the annotator 2, because …").
"""

from __future__ import annotations

import math

import threading
from dataclasses import dataclass, field
from typing import Any, Literal

from scijudge.vocab import norm_verdict

MetricName = Literal["likert_abs", "likert_sq", "verdict_balanced"]
METRICS: tuple[str, ...] = ("likert_abs", "likert_sq", "verdict_balanced")

# Keys that examples carry besides the judge's inputs (prefixed so they never clash with an input name).
ITEM, PART, HUMAN, VERDICT, SCORES, VERDICTS, RATIONALES = (
    "sj_item", "sj_part", "sj_human", "sj_verdict", "sj_scores", "sj_verdicts", "sj_rationales",
)
BELOW = "sj_below"  # a perturbed variant's reference rating (its original's consensus): rate it lower
CRITERION = "sj_criterion"  # a multi-criterion judge's criterion the label scores (absent: the overall score)


def example_key(example: Any) -> str:
    """Identity of an example: its item and part."""
    return f"{example.get(ITEM)}\x1f{example.get(PART) or ''}"


def judged(prediction: Any, criterion: str | None = None) -> tuple[float | None, str | None, str | None]:
    """(score, verdict, abstention reason) read from a judge's prediction (the ``criterion``'s score if given)."""
    if prediction is None:
        return None, None, "no prediction (the program raised)"
    if getattr(prediction, "abstained", False):
        return None, None, getattr(prediction, "reason", None) or "abstained"
    output = getattr(prediction, "judgment", None)
    if output is None:
        return None, None, "no judgment"
    run_fields = getattr(output, "run_fields", None)  # JudgeOutput, or a stored row seen through it
    fields = run_fields() if callable(run_fields) else None
    if fields is None:
        return None, None, f"judgment of type {type(output).__name__} has no score or verdict"
    if criterion:
        from scijudge.optimization._families import criterion_score

        score = criterion_score(output, criterion)
        return (score, None, None) if score is not None else (None, None, f"no score for criterion {criterion!r}")
    return fields.score, norm_verdict(fields.verdict), None


class Ledger:
    """Scores of every candidate program an optimizer evaluated, by example (to recover the best one)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.candidates: dict[str, dict[str, Any]] = {}
        self.scores: dict[str, dict[str, float]] = {}
        self.order: list[str] = []
        from scijudge.optimization._progress import watch

        watch("ledger", self)

    def register(self, cid: str, snapshot: dict[str, Any], lm_calls: int) -> None:
        """Remember a candidate's instructions and demos the first time it runs."""
        with self._lock:
            if cid not in self.candidates:
                self.candidates[cid] = {**snapshot, "first_seen_lm_calls": lm_calls}
                self.scores[cid] = {}
                self.order.append(cid)

    def record(self, cid: str | None, key: str, score: float) -> None:
        if cid is None:
            return
        with self._lock:
            self.scores.setdefault(cid, {})[key] = float(score)

    def mean(self, cid: str, keys: set[str]) -> float | None:
        """Mean score of a candidate over ``keys``, or None when any of them was never scored."""
        got = self.scores.get(cid, {})
        if not keys or not keys <= set(got):
            return None
        return sum(got[k] for k in keys) / len(keys)

    def best(self, keys: set[str]) -> str | None:
        """The fully scored candidate with the highest mean over ``keys`` (the earliest on ties)."""
        with self._lock:
            ranked = [(m, -i, cid) for i, cid in enumerate(self.order) if (m := self.mean(cid, keys)) is not None]
        return max(ranked)[2] if ranked else None

    def best_partial(self, keys: set[str]) -> str | None:
        """When no candidate was scored on all of ``keys`` (a budget stop mid-round): the highest mean among
        candidates scored on at least half of them, compared on what each was scored on."""
        with self._lock:
            ranked = []
            for i, cid in enumerate(self.order):
                got = {k: v for k, v in self.scores.get(cid, {}).items() if k in keys}
                if keys and 2 * len(got) >= len(keys):
                    ranked.append((sum(got.values()) / len(got), -i, cid))
        return max(ranked)[2] if ranked else None

    def trials(self, keys: set[str]) -> list[dict[str, Any]]:
        """One row per candidate: when it first ran, how many examples it was scored on, its mean over ``keys``."""
        with self._lock:
            return [{"candidate": cid, "first_seen_lm_calls": self.candidates[cid]["first_seen_lm_calls"],
                     "n_scored": len(self.scores.get(cid, {})), "score": self.mean(cid, keys)}
                    for cid in self.order]


@dataclass
class JudgeMetric:
    """The recipe's metric as a DSPy metric ``(example, prediction, trace=None) -> float | bool``."""

    name: str
    lo: float = 1.0
    hi: float = 5.0
    step: float = 1.0
    class_weights: dict[str, float] = field(default_factory=dict)
    ledger: Ledger | None = None

    @property
    def __name__(self) -> str:  # DSPy logs metric names
        return self.name

    def score(self, example: Any, prediction: Any) -> float:
        """The graded score in [0, 1]; 0 for abstentions."""
        score, verdict, problem = judged(prediction, example.get(CRITERION))
        if example.get(BELOW) is not None:  # a perturbed variant: see scijudge.optimization._robustness
            from scijudge.optimization._robustness import Robustness

            return Robustness.score(example, score if problem is None else None)
        if problem is not None:
            return 0.0
        if self.name == "verdict_balanced":
            human = norm_verdict(example.get(VERDICT))  # the one rule on both sides
            if verdict is None or human is None:
                return 0.0
            return self.class_weights.get(human, 1.0) if verdict == human else 0.0
        human_score = example.get(HUMAN)
        if score is None or human_score is None:
            return 0.0
        gap = abs(float(score) - float(human_score)) / (self.hi - self.lo)
        return max(0.0, 1.0 - (gap * gap if self.name == "likert_sq" else gap))

    def passes(self, example: Any, prediction: Any) -> bool:
        """Good enough to be a demonstration: the right verdict, or the nearest scale point to the human mean."""
        score, verdict, problem = judged(prediction, example.get(CRITERION))
        if problem is not None or example.get(BELOW) is not None:  # variants never become demonstrations
            return False
        if self.name == "verdict_balanced":
            return verdict is not None and verdict == example.get(VERDICT)
        human_score = example.get(HUMAN)
        return score is not None and human_score is not None and abs(score - human_score) <= self.step / 2 + 1e-9

    def __call__(self, example: Any, prediction: Any, trace: Any = None, pred_name: Any = None,
                 pred_trace: Any = None) -> Any:
        if trace is not None:
            return self.passes(example, prediction)
        value = self.score(example, prediction)
        if self.ledger is not None:
            self.ledger.record(getattr(prediction, "candidate", None), example_key(example), value)
        return value


def _fmt(value: float | None) -> str:
    return "nothing" if value is None else f"{value:g}"


@dataclass
class FeedbackMetric(JudgeMetric):
    """GEPA's metric: always ``dspy.Prediction(score=..., feedback=...)``, trace or not."""

    def __call__(self, example: Any, prediction: Any, trace: Any = None, pred_name: Any = None,
                 pred_trace: Any = None) -> Any:
        import dspy

        value = self.score(example, prediction)
        if self.ledger is not None and pred_name is None:
            self.ledger.record(getattr(prediction, "candidate", None), example_key(example), value)
        return dspy.Prediction(score=value, feedback=self.feedback(example, prediction))

    def feedback(self, example: Any, prediction: Any) -> str:
        """What went wrong for this example, in words, with the annotators' reasons when there are any."""
        score, verdict, problem = judged(prediction, example.get(CRITERION))
        reasons = [r for r in (example.get(RATIONALES) or []) if r]
        because = ""
        if reasons:
            quoted = "; ".join(f"\"{r.strip()[:400]}\"" for r in reasons[:3])
            because = f" The annotator{'s' if len(reasons) > 1 else ''} explained: {quoted}."
        if problem is not None:
            return (f"You gave no usable judgment ({problem}). Answer with one JSON object that follows the "
                    f"judgment schema." + because)
        below = example.get(BELOW)
        if below is not None:  # a perturbed variant of a rated answer
            if example.get("sj_injection"):
                wanted = f"no higher than {_fmt(below)}, the human rating of the untampered answer"
            else:
                wanted = f"below {_fmt(below)}, the human rating of the answer before it was degraded"
            ok = self.score(example, prediction) > 0
            return (f"This answer is a degraded copy of a rated answer. You rated {_fmt(score)}; it should be rated "
                    f"{wanted}." + (" Correct." if ok else " Your rating did not notice the degradation."))
        if self.name == "verdict_balanced":
            human = example.get(VERDICT)
            votes = example.get(VERDICTS) or [human]
            who = "the annotator" if len(votes) == 1 else f"the annotators ({', '.join(map(str, votes))})"
            if verdict == human:
                return f"Correct: you answered '{verdict}', as did {who}." + because
            return f"You answered '{verdict}', but {who} answered '{human}'." + because
        human_score = float(example.get(HUMAN))
        scores = example.get(SCORES) or [human_score]
        if len(scores) == 1:
            who = f"the annotator rated {_fmt(scores[0])}"
        else:
            who = f"the annotators rated {', '.join(_fmt(s) for s in scores)} (mean {_fmt(round(human_score, 2))})"
        gap = (float(score) if score is not None else math.nan) - human_score
        scale = f"on the {_fmt(self.lo)}-{_fmt(self.hi)} scale"
        if abs(gap) <= self.step / 2 + 1e-9:
            verdict_text = "Your rating agrees with the human rating."
        else:
            direction = "too high" if gap > 0 else "too low"
            verdict_text = f"Your rating is {_fmt(round(abs(gap), 2))} point(s) {direction}."
        return f"You rated {_fmt(score)}; {who} {scale}. {verdict_text}" + because


def class_weights(verdicts: list[str]) -> dict[str, float]:
    """n_rarest / n_c for each human class c (1.0 for the rarest)."""
    counts: dict[str, int] = {}
    for word in verdicts:
        v = norm_verdict(word) or ""
        counts[v] = counts.get(v, 0) + 1
    if not counts:
        return {}
    rarest = min(counts.values())
    return {c: rarest / n for c, n in counts.items()}
