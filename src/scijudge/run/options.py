"""The typed options of a judging run: ``JudgeOptions`` (how each judge is built and called) plus how the run is
executed. ``scijudge judge`` maps its flags to these fields in one place; Python builds the same object."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from scijudge.errors import InputError
from scijudge.judges.options import JudgeOptions

EXECUTOR_CHOICES = ("auto", "threads", "async")


class RunOptions(JudgeOptions):
    """Every option of ``scijudge judge``: the judges, how each is called (``JudgeOptions``) and how the run goes."""

    judges: tuple[str, ...] = ()
    """Judge names, globs (``yescieval.qa.*``) or spec paths."""
    executor: str = "auto"
    """In-process executor: auto (asyncio from 64 in flight up for API models, threads otherwise)."""
    concurrency: int = Field(8, ge=1)
    processes: int = Field(1, ge=1)
    """Worker processes (API models only)."""
    limit: int | None = Field(None, ge=1)
    skip_invalid: bool = False
    retry_abstained: bool = False
    grace: float = Field(10.0, ge=0)
    """On an interrupt, seconds to wait for requests in flight so that their answers are stored."""
    reports: Path | None = None
    """Checklist judges: the reports folder (or JSONL) of a ResearchRubrics task file."""
    allow_unknown_axes: bool = False
    batch: bool = False
    """Send the judgments through the provider's batch API."""
    batch_size: int = Field(5000, ge=1, le=50000)
    batch_poll: float = Field(30.0, ge=0)
    batch_fallback: Literal["next-strategy", "direct"] = "next-strategy"
    ray: str | None = None
    """Run hf: judges on Ray actors: 'local' or a cluster address."""
    cascade: Path | None = None
    """A cascade saved by ``scijudge cascade --save``: its members' models, endpoints and modes."""

    def executor_kind(self) -> str:
        """batch, ray, processes or threads (the in-process choice, threads or async, comes with the judges)."""
        if self.executor not in EXECUTOR_CHOICES:
            raise InputError(f"must be auto, threads or async, not {self.executor!r}", field="executor")
        if self.batch and self.ray is not None:
            raise InputError("cannot go with ray: choose a provider's batch API (batch) or local hf: models on Ray "
                             "(ray)", field="batch")
        kind = "batch" if self.batch else "ray" if self.ray is not None else "processes" if self.processes > 1 \
            else "threads"
        if kind != "threads" and self.executor != "auto":
            raise InputError(f"{self.executor} runs judgments in this process; leave it out with {kind}",
                             field="executor")
        return kind

    def check_cascade(self) -> None:
        """A cascade takes its members' models, endpoints and modes from its file; without one, a model is needed."""
        if self.cascade is not None and (self.model is not None or self.api_base is not None
                                         or self.mode != "generate" or self.rating_probs or self.fused
                                         or self.ray is not None or self.limit is not None):
            raise InputError("a cascade takes its members' models, endpoints and modes from the thresholds file: "
                             "leave out model, api_base, mode, rating_probs, fused, ray and limit", field="cascade")
        if self.cascade is None and self.model is None:
            raise InputError("give the model to judge with (model) or a saved cascade (cascade)", field="model")
