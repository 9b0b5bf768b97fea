"""The judge contract: what the run layer, the optimizers and the reports may ask of any judge.

Every family's judge (the generic ``Judge``, ``ChecklistJudge``, ``FusedJudge``, a user's own) implements
``JudgeProtocol``; nothing outside a judge reads its private attributes. A judge says *which* judgments it
will store for an (item, part) before making them (``identity``), so that a run can skip what is stored,
and *makes* them with ``judge_item``, which returns one result per identity, in the same order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from scijudge.data import Item
    from scijudge.records import Identity, JudgeResult


@runtime_checkable
class JudgeProtocol(Protocol):
    """A judge: bound to an LM, it turns an item (one part of it) into stored judgments."""

    @property
    def name(self) -> str:
        """The judge's name, as stored in the ``judge`` column (a fused judge: ``fused:a,b``)."""
        ...

    @property
    def lm(self) -> Any:
        """The LM this judge calls (its own, else DSPy's configured one)."""
        ...

    def parts(self, item: Item) -> list[str]:
        """The parts an item is judged in (``[""]``: once; pairwise: both orders; checklist: each criterion)."""
        ...

    def inputs_for(self, item: Item, part: str = "") -> dict[str, Any]:
        """The keyword inputs the judge reads for one part (a missing required input is an ``InputError``)."""
        ...

    def identity(self, item: Item, part: str = "") -> list[Identity]:
        """The identities of the judgments ``judge_item(item, part)`` stores, in order."""
        ...

    def judge_item(self, item: Item, part: str = "") -> list[JudgeResult]:
        """Judge one part of an item: one result per identity (item-level trouble is an abstention; run-level
        faults raise ``EndpointError``, a judgment with no answer ``TransportFailure``)."""
        ...


def lm_of(judge: JudgeProtocol) -> Any:
    """The LM a judge calls (a helper for code that holds judges of any family)."""
    return judge.lm
