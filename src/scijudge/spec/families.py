"""Judge families: what differs between likert, pairwise, checklist, synthesis and linking judges, declared once.

A family names its default output type, its calibration track and default score scale, how an item splits
into parts, and (optionally) the factory of its judge. Specs, judges, calibration and optimization look these
up here instead of comparing family names. Adding a family is one ``register_family(Family(...))`` call (or
``@family(...)`` on its judge factory). This module sits in the spec layer and imports no judge code and no
DSPy: a family without a factory is judged by the generic spec-driven judge, and the judge layer registers
the factories of the families whose judges it defines (``scijudge.judges.build``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from scijudge.errors import SpecError

if TYPE_CHECKING:
    from scijudge.data import Item

Track = Literal["ordinal", "verdict", "continuous"]
JudgeFactory = Callable[..., Any]
"""``factory(spec, *, lm, rating_probs, chunk_tokens, overlap_tokens) -> judge``: a factory ignores options that
are not its own; what it returns implements ``scijudge.judges.contract.JudgeProtocol``."""
DEFAULT_SCORE_SCALE = (1.0, 5.0, 1.0)


def one_part(item: Item) -> list[str]:
    """Most judges judge an item once (part '')."""
    return [""]


@dataclass(frozen=True)
class Family:
    """One judge family, declared in one place.

    Attributes:
        name: the ``family`` a spec writes.
        output: registered output type a spec of this family gets when it names none
            (``scijudge.spec.output_types``).
        judge: builds the family's judge from a spec (``build_judge`` calls it with lm, rating_probs,
            chunk_tokens and overlap_tokens; a factory ignores options that are not its own); None: the judge
            layer's factory for this family, else the generic spec-driven ``Judge``.
        track: what its judgments are to calibration: ordinal scores on a scale's steps, categorical verdicts,
            or continuous scores (a judge calibrated on the family's default scale is then continuous). Which
            statistics run is still decided by the labels (scores or verdicts).
        score_scale: the run store's score scale when no spec with the stored hash is known.
        needs_scale: specs get the default ``[scale]`` when they declare none.
        parts: the parts an item is judged in (``[""]``: once; pairwise: both orders).
        input_source: where input ``name`` comes from in the item for a part (pairwise: answers swap in BA).
        orient: turns a part's run fields into the item's own terms (pairwise: a BA verdict is flipped back).
        rating_probs: P(rating) can be read from token logprobs of a ``rating`` field.
        optimizable: ``scijudge optimize`` can tune it (one judgment per item and part).
        optimizer_judge: builds the judge an optimization evaluates (default: ``judge``).
        one_call: each judgment is one LM call, so a provider's batch API can serve it.
    """

    name: str
    output: str
    judge: JudgeFactory | None = None
    track: Track = "ordinal"
    score_scale: tuple[float, float, float] = DEFAULT_SCORE_SCALE
    needs_scale: bool = False
    parts: Callable[[Item], list[str]] = one_part
    input_source: Callable[[str, str], str] | None = None
    orient: Callable[[Any, str], Any] | None = None
    rating_probs: bool = False
    optimizable: bool = True
    optimizer_judge: JudgeFactory | None = None
    one_call: bool = True


_FAMILIES: dict[str, Family] = {}


def register_family(declared: Family, *, replace: bool = False) -> Family:
    """Register a family (an error if the name is taken, unless ``replace``)."""
    if declared.name in _FAMILIES and not replace and _FAMILIES[declared.name] != declared:
        raise ValueError(f"judge family {declared.name!r} is already registered")
    _FAMILIES[declared.name] = declared
    return declared


def family(name: str, *, output: str, **declared: Any) -> Callable[[JudgeFactory], JudgeFactory]:
    """Decorator form: ``@family("toy", output="toy.verdict")`` on the judge factory registers the family."""

    def register(factory: JudgeFactory) -> JudgeFactory:
        register_family(Family(name=name, output=output, judge=factory, **declared))
        return factory

    return register


def family_names() -> list[str]:
    """Every registered family name, sorted."""
    return sorted(_FAMILIES)


def get_family(name: str, *, source: str | None = None) -> Family:
    """The family registered as ``name``; an unknown name is a SpecError listing the registered ones."""
    try:
        return _FAMILIES[name]
    except KeyError:
        raise SpecError(f"unknown judge family {name!r}; registered families: {', '.join(family_names())}",
                        file=source, field="family") from None


def find_family(name: Any) -> Family | None:
    """The family registered as ``name``, or None (run stores may hold families this process does not know)."""
    return _FAMILIES.get(name) if isinstance(name, str) else None


def score_scale_of_family(name: Any) -> tuple[float, float, float]:
    """Default run-store score scale of a family (the Likert 1..5 scale for unknown families)."""
    found = find_family(name)
    return found.score_scale if found is not None else DEFAULT_SCORE_SCALE


# --- the five built-in families ------------------------------------------------------------------------
def _pairwise_parts(item: Item) -> list[str]:
    """Both orders ("AB", "BA"), so position bias shows as inconsistency; no second answer, nothing to compare."""
    return ["AB", "BA"] if item.value("answer_b") else []


def _pairwise_source(name: str, part: str) -> str:
    """A is always the item's ``answer`` and B its ``answer_b``; in the BA order they swap slots."""
    if name not in ("answer_a", "answer_b"):
        return name
    first, second = ("answer", "answer_b") if part != "BA" else ("answer_b", "answer")
    return first if name == "answer_a" else second


def _pairwise_orient(fields: Any, part: str) -> Any:
    """Report a BA preference in the item's own terms: the verdict flips and the score changes sign."""
    if part != "BA" or fields.verdict not in ("A", "B"):
        return fields
    return fields.model_copy(update={"verdict": "B" if fields.verdict == "A" else "A",
                                     "score": -fields.score if fields.score is not None else None})


register_family(Family(name="likert", output="likert", needs_scale=True, rating_probs=True))
register_family(Family(name="pairwise", output="pairwise", needs_scale=True, score_scale=(-4.0, 4.0, 1.0),
                       parts=_pairwise_parts, input_source=_pairwise_source, orient=_pairwise_orient,
                       optimizable=False))
register_family(Family(name="checklist", output="researchrubrics.verdict", track="verdict",
                       score_scale=(0.0, 1.0, 0.5), one_call=False))
register_family(Family(name="synthesis", output="lematerial.synthesis", score_scale=(1.0, 5.0, 0.5)))
register_family(Family(name="linking", output="lematerial.linking", score_scale=(1.0, 5.0, 0.5)))
