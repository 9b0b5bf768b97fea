"""Optimization recipes (TOML): optimizer, its settings, metric, split, budget — validated before any LM call.

A recipe looks like::

    optimizer = "mipro"            # mipro | gepa | simba | copro | bootstrap_rs
    metric = "likert_abs"          # likert_abs | likert_sq | verdict_balanced
    description = "..."            # optional

    [split]                        # by item; ratios sum to 1; dev may be 0
    train = 0.5
    dev = 0.25
    test = 0.25
    seed = 7

    [budget]                       # both optional; the run never sends more than max_lm_calls
    max_lm_calls = 300
    max_cost_usd = 1.0

    [settings]                     # the optimizer's own knobs (see each *Settings class)
    num_candidates = 4

Every error names the file, the line and the field (``settings.num_trials``).
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from scijudge._toml import read_toml
from scijudge.errors import InputError

OptimizerName = Literal["mipro", "gepa", "simba", "copro", "bootstrap_rs"]


class _Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    num_threads: int = Field(default=1, ge=1, description="Parallel judge calls while evaluating candidates.")


class MiproSettings(_Settings):
    """MIPROv2: bootstrapped demo sets + proposed instructions, searched with Optuna (TPE)."""

    auto: Literal["off", "light", "medium", "heavy"] = "off"
    num_candidates: int | None = Field(default=None, ge=1)
    num_trials: int | None = Field(default=None, ge=1)
    max_bootstrapped_demos: int = Field(default=2, ge=0)
    max_labeled_demos: int = Field(default=2, ge=0)
    init_temperature: float = Field(default=1.0, ge=0)
    minibatch: bool = False
    minibatch_size: int = Field(default=35, ge=1)
    minibatch_full_eval_steps: int = Field(default=5, ge=1)
    view_data_batch_size: int = Field(default=10, ge=1)
    program_aware_proposer: bool = True
    data_aware_proposer: bool = True
    tip_aware_proposer: bool = True
    fewshot_aware_proposer: bool = True
    metric_threshold: float | None = None

    @model_validator(mode="after")
    def _check(self) -> MiproSettings:
        if self.auto == "off" and (self.num_candidates is None or self.num_trials is None):
            missing = "num_candidates" if self.num_candidates is None else "num_trials"
            raise ValueError(f"{missing}: with auto = \"off\" both num_candidates and num_trials are required")
        if self.auto != "off" and (self.num_candidates is not None or self.num_trials is not None):
            raise ValueError("num_candidates: set either auto or num_candidates/num_trials, not both")
        return self


class GepaSettings(_Settings):
    """GEPA: reflective prompt evolution from textual feedback, with a Pareto front over dev examples."""

    auto: Literal["light", "medium", "heavy"] | None = None
    max_full_evals: int | None = Field(default=None, ge=1)
    max_metric_calls: int | None = Field(default=None, ge=1)
    reflection_minibatch_size: int = Field(default=3, ge=1)
    candidate_selection_strategy: Literal["pareto", "current_best"] = "pareto"
    skip_perfect_score: bool = True
    use_merge: bool = False
    max_merge_invocations: int = Field(default=5, ge=0)
    add_format_failure_as_feedback: bool = False

    @model_validator(mode="after")
    def _check(self) -> GepaSettings:
        chosen = [n for n in ("auto", "max_full_evals", "max_metric_calls") if getattr(self, n) is not None]
        if len(chosen) != 1:
            raise ValueError("max_metric_calls: set exactly one of auto, max_full_evals, max_metric_calls"
                             + (f" (found {', '.join(chosen)})" if chosen else ""))
        return self


class SimbaSettings(_Settings):
    """SIMBA: mini-batch ascent; self-reflective rules and demos from high-variance examples."""

    bsize: int = Field(default=8, ge=1)
    num_candidates: int = Field(default=4, ge=1)
    max_steps: int = Field(default=4, ge=1)
    max_demos: int = Field(default=2, ge=0)
    demo_input_field_maxlen: int = Field(default=100_000, ge=1)
    temperature_for_sampling: float = Field(default=0.2, gt=0)
    temperature_for_candidates: float = Field(default=0.2, gt=0)


class CoproSettings(_Settings):
    """COPRO: coordinate ascent over proposed instructions, breadth × depth."""

    breadth: int = Field(default=4, ge=2)
    depth: int = Field(default=2, ge=1)
    init_temperature: float = Field(default=1.0, ge=0)


class BootstrapRSSettings(_Settings):
    """BootstrapFewShotWithRandomSearch: bootstrapped + labelled demo sets, the best on dev kept."""

    max_bootstrapped_demos: int = Field(default=2, ge=0)
    max_labeled_demos: int = Field(default=2, ge=0)
    max_rounds: int = Field(default=1, ge=1)
    num_candidate_programs: int = Field(default=4, ge=1)
    max_errors: int | None = Field(default=None, ge=1)
    stop_at_score: float | None = None
    metric_threshold: float | None = None


SETTINGS: dict[str, type[_Settings]] = {
    "mipro": MiproSettings, "gepa": GepaSettings, "simba": SimbaSettings, "copro": CoproSettings,
    "bootstrap_rs": BootstrapRSSettings,
}


class SplitSpec(BaseModel):
    """Split ratios (by item) and the seed of the shuffle."""

    model_config = ConfigDict(extra="forbid")

    train: float = Field(default=0.5, gt=0, le=1)
    dev: float = Field(default=0.25, ge=0, le=1)
    test: float = Field(default=0.25, gt=0, le=1)
    seed: int = 0

    @model_validator(mode="after")
    def _sum(self) -> SplitSpec:
        total = self.train + self.dev + self.test
        if not math.isclose(total, 1.0, abs_tol=1e-6):
            raise ValueError(f"train + dev + test must be 1, got {total:g}")
        return self

    @property
    def ratios(self) -> tuple[float, float, float]:
        return self.train, self.dev, self.test


class BudgetSpec(BaseModel):
    """Hard limits on the whole run: optimization plus the before/after test evaluation."""

    model_config = ConfigDict(extra="forbid")

    max_lm_calls: int | None = Field(default=None, ge=1)
    max_cost_usd: float | None = Field(default=None, gt=0)


class Recipe(BaseModel):
    """One optimization recipe (see module docstring); ``settings`` is validated per optimizer."""

    model_config = ConfigDict(extra="forbid")

    optimizer: OptimizerName
    metric: Literal["likert_abs", "likert_sq", "verdict_balanced"] = "likert_abs"
    description: str = ""
    split: SplitSpec = Field(default_factory=SplitSpec)
    budget: BudgetSpec = Field(default_factory=BudgetSpec)
    settings: dict[str, Any] = Field(default_factory=dict)
    source: str | None = Field(default=None, exclude=True)

    @model_validator(mode="after")
    def _settings(self) -> Recipe:
        self.settings = SETTINGS[self.optimizer].model_validate(self.settings).model_dump()
        return self

    @property
    def name(self) -> str:
        """The recipe's file stem, or the optimizer name for recipes built in code."""
        return Path(self.source).stem if self.source else self.optimizer

    def typed_settings(self) -> _Settings:
        return SETTINGS[self.optimizer].model_validate(self.settings)


def _line_of(text: str, loc: tuple[str, ...]) -> int | None:
    """Line of a (possibly nested) key in TOML text: ``("settings", "num_trials")`` or ``("optimizer",)``."""
    table: tuple[str, ...] = ()
    header = re.compile(r"^\s*\[\s*([A-Za-z0-9_.\-\"' ]+?)\s*\]\s*(#.*)?$")
    first_table_line: dict[tuple[str, ...], int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        m = header.match(line)
        if m:
            table = tuple(p.strip().strip("\"'") for p in m.group(1).split("."))
            first_table_line.setdefault(table, number)
            continue
        key = re.match(r"^\s*([A-Za-z0-9_\-\"']+)\s*=", line)
        if not key:
            continue
        full = (*table, key.group(1).strip("\"'"))
        if full == loc or (len(loc) > 1 and full[: len(loc)] == loc):
            return number
    for size in range(len(loc), 0, -1):  # the key is missing: point at its table
        if loc[:size] in first_table_line:
            return first_table_line[loc[:size]]
    return None


def _settings_error(exc: ValidationError, optimizer: str) -> tuple[str, tuple[str, ...]]:
    first = exc.errors()[0]
    loc = tuple(str(p) for p in first["loc"] if not isinstance(p, int))
    msg = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        allowed = ", ".join(sorted(SETTINGS[optimizer].model_fields))
        msg = f"unknown setting for optimizer {optimizer!r} (allowed: {allowed})"
    elif not loc and ":" in msg:  # model-level checks name their field first: "num_trials: ..."
        name, _, rest = msg.partition(":")
        if name.strip().isidentifier():
            loc, msg = (name.strip(),), rest.strip()
    return msg, ("settings", *loc)


def load_recipe(path: str | Path) -> Recipe:
    """Read and validate a recipe file; every error names the file, the line and the field."""
    path = Path(path)
    text, data = read_toml(path, what="recipe")
    return recipe_from_dict(data, source=path, text=text)


def recipe_from_dict(data: dict[str, Any], *, source: str | Path | None = None, text: str = "") -> Recipe:
    """Validate recipe data (from TOML or code); errors name ``source`` and, given ``text``, the line."""
    optimizer = data.get("optimizer")
    if optimizer is not None and optimizer not in SETTINGS:
        raise InputError(f"unknown optimizer {optimizer!r}; choose one of {', '.join(sorted(SETTINGS))}",
                         file=source, line=_line_of(text, ("optimizer",)), field="optimizer")
    settings = data.get("settings", {})
    if optimizer is not None and isinstance(settings, dict):
        try:
            SETTINGS[optimizer].model_validate(settings)
        except ValidationError as exc:
            msg, loc = _settings_error(exc, optimizer)
            raise InputError(msg, file=source, line=_line_of(text, loc), field=".".join(loc)) from None
    try:
        recipe = Recipe.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = tuple(str(p) for p in first["loc"] if not isinstance(p, int))
        msg = first["msg"].removeprefix("Value error, ")
        if first["type"] == "extra_forbidden":
            known = sorted(Recipe.model_fields) if len(loc) == 1 else None
            if loc and loc[0] == "split":
                known = sorted(SplitSpec.model_fields)
            elif loc and loc[0] == "budget":
                known = sorted(BudgetSpec.model_fields)
            known = [k for k in (known or []) if k != "source"]
            msg = "unknown field" + (f" (expected one of: {', '.join(known)})" if known else "")
        elif first["type"] == "literal_error" and loc == ("metric",):
            msg = f"unknown metric {data.get('metric')!r}; choose one of likert_abs, likert_sq, verdict_balanced"
        raise InputError(msg, file=source, line=_line_of(text, loc) if loc else None,
                         field=".".join(loc) or None) from None
    recipe.source = str(source) if source is not None else None
    return recipe


def shipped_recipes_dir() -> Path | None:
    """The ``optimizers/`` folder: packaged in the wheel, or at the top of a source checkout."""
    from scijudge._resources import shipped_path

    return shipped_path("optimizers")


def resolve_recipe(name_or_path: str | Path | Recipe) -> Recipe:
    """A Recipe from a path, or from a shipped recipe's name (``mipro`` → optimizers/mipro.toml)."""
    if isinstance(name_or_path, Recipe):
        return name_or_path
    path = Path(name_or_path)
    if path.exists() or str(name_or_path).endswith(".toml"):
        return load_recipe(path)
    folder = shipped_recipes_dir()
    if folder is not None and (folder / f"{name_or_path}.toml").exists():
        return load_recipe(folder / f"{name_or_path}.toml")
    shipped = sorted(p.stem for p in folder.glob("*.toml")) if folder else []
    hint = f"; shipped recipes: {', '.join(shipped)}" if shipped else ""
    raise InputError(f"no recipe file {str(name_or_path)!r}{hint}", file=str(name_or_path))
