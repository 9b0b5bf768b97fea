"""How to rebuild a judge elsewhere (a worker process, a Ray actor): its spec and how to build its LM.

A recipe holds no live objects, so it pickles. ``recipe_of`` derives one from a judge whose LM was built by
``scijudge.make_lm`` (which notes the model string and options on the LM), so a Python user hands the same
judges to every executor.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from scijudge.chain.chain import ChainConfig, StructuredChain
from scijudge.errors import ModelError

LM_RECIPE_ATTRIBUTE = "scijudge_recipe"
"""Attribute ``make_lm`` sets on the LMs it builds: ``{"model": ..., **options}``."""


@dataclass(frozen=True)
class JudgeRecipe:
    """What another process needs to rebuild a judge: its spec, model string, LM, judge and chain options."""

    spec: Any
    model: str
    lm_options: dict[str, Any] = field(default_factory=dict)
    judge_options: dict[str, Any] = field(default_factory=dict)
    chain_options: dict[str, Any] = field(default_factory=dict)

    def build(self) -> Any:
        """The judge, with its own LM and a chain with the recipe's settings."""
        from scijudge.judges.build import build_judge
        from scijudge.lm import make_lm

        chain = StructuredChain(ChainConfig(**self.chain_options)) if self.chain_options else None
        return build_judge(self.spec, lm=make_lm(self.model, **self.lm_options), chain=chain, **self.judge_options)


def recipe_of(judge: Any) -> JudgeRecipe:
    """The recipe that rebuilds ``judge`` (a ``JudgeRecipe`` is returned as it is).

    Raises:
        ModelError: the judge's LM was not built by ``make_lm`` (nothing says how to rebuild it), or the judge
            is a variant (fused, another layout) that runs in one process only.
    """
    if isinstance(judge, JudgeRecipe):
        return judge
    from scijudge.judges.base import Judge

    if not isinstance(judge, Judge) or judge.variant_tags:
        raise ModelError(f"judge {getattr(judge, 'name', judge)!r} runs in this process only (fused judges and "
                         "prompt layouts cannot be rebuilt in another process)")
    made = getattr(judge.lm, LM_RECIPE_ATTRIBUTE, None)
    if not isinstance(made, dict):
        raise ModelError(f"judge {judge.name!r}: its LM was not built by scijudge.make_lm, so another process "
                         "cannot rebuild it; build it with make_lm (or pass a JudgeRecipe)")
    options = {k: v for k, v in made.items() if k != "model"}
    judge_options: dict[str, Any] = {"rating_probs": bool(getattr(judge, "rating_probs", False))}
    if getattr(judge, "mode", "generate") != "generate":
        judge_options.update(mode=judge.mode, decision_score=judge.decision_score)
    for name in ("chunk_tokens", "overlap_tokens"):
        if hasattr(judge, name):
            judge_options[name] = getattr(judge, name)
    defaults = asdict(ChainConfig())
    chain_options = {k: v for k, v in asdict(judge.chain.config).items() if defaults[k] != v}
    if judge_options["rating_probs"]:
        chain_options.pop("logprobs", None)  # rating_probs sets it again
    return JudgeRecipe(judge.spec, str(made["model"]), options, judge_options, chain_options)
