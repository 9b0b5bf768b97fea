"""Prompt layouts: the rubric first (DSPy's default: rubric as system prompt, item after) or the item first.

With ``item-first`` the item's fields open the prompt and the rubric text (DSPy's system message) follows it,
in one user message. Every rubric's prompt for one item then starts with the same tokens, so a local engine
computes the item once for all its rubrics (the KV cache of a long item is shared); with ``rubric-first`` the
rubric is the shared prefix across items instead. The words the model reads are the same; only their order
changes, and with it the judgment's identity (the spec hash a judge records is salted with the layout).
"""

from __future__ import annotations

from typing import Any, Literal

from scijudge.errors import InputError
from scijudge.chain.chain import StructuredChain

Layout = Literal["rubric-first", "item-first"]
LAYOUTS: tuple[str, ...] = ("rubric-first", "item-first")


class ItemFirstChain(StructuredChain):
    """The structured chain with the item's fields before the rubric text (see the module docstring)."""

    def format(self, signature: Any, demos: list[dict[str, Any]], inputs: dict[str, Any]) -> list[dict[str, Any]]:
        messages = super().format(signature, demos, inputs)
        if not messages or messages[0]["role"] != "system" or messages[-1]["role"] != "user":
            return messages
        rubric = messages[0]["content"]
        request = messages[-1]["content"]
        item = self.format_user_message_content(signature, inputs, main_request=False)
        if request.startswith(item):
            content = f"{item}\n\n{rubric}{request[len(item):]}"
        else:  # an adapter that words the request otherwise: keep it whole, rubric after it
            content = f"{request}\n\n{rubric}"
        return [*messages[1:-1], {"role": "user", "content": content}]


def chain_for(layout: str, base: StructuredChain) -> StructuredChain:
    """A chain with ``base``'s settings (and its memory of refused formats) for the given layout."""
    if layout not in LAYOUTS:
        raise InputError(f"unknown layout {layout!r}; choose one of {', '.join(LAYOUTS)}", field="layout")
    if layout == "rubric-first":
        return base
    return ItemFirstChain(base.config, memory=base.memory)  # what a provider refused is true in any prompt order


def apply_layout(judge: Any, layout: str) -> Any:
    """Switch a judge (generic or fused) to ``layout`` in place and give it the matching identity."""
    chain = chain_for(layout, judge.chain)
    if chain is judge.chain:
        return judge
    judge.use_chain(chain)
    judge.tag_identity(layout)
    return judge
