"""The typed options of judging, shared by Python and the command line (``scijudge judge`` maps its flags here).

``JudgeOptions`` says how each judge is built and called (model, endpoint, decoding, prompt); ``RunOptions``
(``scijudge.run.options``) adds how a run is executed. Bad values are one ``InputError`` naming the field as Python
spells it (``fused``, ``chunk_tokens``); the command line names the flag instead.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from scijudge.errors import InputError, from_validation_error

Mode = Literal["generate", "decision"]
DecisionScore = Literal["expected", "mode"]
Layout = Literal["rubric-first", "item-first"]


class JudgeOptions(BaseModel):
    """How judges are built and called. Every option of ``scijudge judge`` that shapes a judgment is here."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str | None = None
    """DSPy/litellm model string, or ``hf:<model or adapter>`` for the local engine."""
    api_base: str | None = None
    """OpenAI-compatible server URL."""
    cache: bool = True
    timeout: float = Field(60.0, gt=0)
    """Deadline in seconds for a whole request."""
    max_tokens: int | None = Field(None, ge=1)
    retry_after_cap: float = Field(120.0, ge=0)
    """Longest Retry-After (seconds) a rate limit may pause the run for."""
    rating_probs: bool = False
    """Ask for token logprobs and store P(rating)."""
    chunk_tokens: int | None = Field(None, ge=1000)
    overlap_tokens: int | None = Field(None, ge=0)
    fused: bool = False
    """Likert rubrics: all the selected rubrics in one call per item."""
    layout: Layout = "rubric-first"
    mode: Mode = "generate"
    decision_score: DecisionScore = "expected"
    preset: str | None = None
    """Prompt preset for every judge (e.g. ``yescieval-native``)."""
    blocks: tuple[str, ...] = ()
    """Text blocks filled from files: ``NAME=FILE`` (``NAME=`` empties one)."""

    @classmethod
    def of(cls, options: Any = None, **values: Any) -> Any:
        """``options`` (this class, a mapping or None) with ``values`` set; a bad value is one error naming its
        field."""
        base = options.model_dump() if isinstance(options, BaseModel) else dict(options or {})
        try:
            return cls(**{**base, **values})
        except ValidationError as exc:
            raise from_validation_error(exc) from None

    def lm_options(self) -> dict[str, Any]:
        """What ``make_lm`` takes besides the model string."""
        return {"api_base": self.api_base, "cache": self.cache, "timeout": self.timeout, "max_tokens": self.max_tokens}

    def judge_options(self) -> dict[str, Any]:
        """What each judge is built with (``build_judge``)."""
        return {"rating_probs": self.rating_probs, "chunk_tokens": self.chunk_tokens,
                "overlap_tokens": self.overlap_tokens, "mode": self.mode, "decision_score": self.decision_score}

    def require_model(self) -> str:
        if not self.model:
            raise InputError("give the model to judge with", field="model")
        return self.model
