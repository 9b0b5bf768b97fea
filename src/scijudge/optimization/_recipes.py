"""Optimization recipes (TOML): optimizer, its settings, metric, split, budget — validated before any LM call.

A recipe looks like::

    optimizer = "mipro"            # mipro | gepa | simba | copro | bootstrap_rs (or a registered one)
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
from scijudge.errors import InputError, validation_problem
from scijudge.optimization import _registry
from scijudge.optimization._registry import OptimizerSettings

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

    optimizer: str
    metric: Literal["likert_abs", "likert_sq", "verdict_balanced"] = "likert_abs"
    description: str = ""
    split: SplitSpec = Field(default_factory=SplitSpec)
    budget: BudgetSpec = Field(default_factory=BudgetSpec)
    settings: dict[str, Any] = Field(default_factory=dict)
    source: str | None = Field(default=None, exclude=True)

    @model_validator(mode="after")
    def _settings(self) -> Recipe:
        entry = _registry.get(self.optimizer)
        if entry is None:
            raise ValueError(f"unknown optimizer {self.optimizer!r}; choose one of {', '.join(_registry.names())}")
        self.settings = entry.settings.model_validate(self.settings).model_dump()
        return self

    @property
    def name(self) -> str:
        """The recipe's file stem, or the optimizer name for recipes built in code."""
        return Path(self.source).stem if self.source else self.optimizer

    def typed_settings(self) -> OptimizerSettings:
        return _registry.entry_for(self.optimizer).settings.model_validate(self.settings)


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


def recipe_line(recipe: Recipe, loc: tuple[str, ...]) -> int | None:
    """Line of a key in the file a recipe was read from (None for a recipe built in code or a file gone since)."""
    source = Path(recipe.source) if recipe.source else None
    return _line_of(source.read_text(encoding="utf-8"), loc) if source is not None and source.exists() else None


def _settings_error(exc: ValidationError, optimizer: str) -> tuple[str, tuple[str, ...]]:
    kind, where, msg = validation_problem(exc)
    loc = tuple(str(p) for p in where if not isinstance(p, int))
    if kind == "extra_forbidden":
        allowed = ", ".join(sorted(_registry.entry_for(optimizer).settings.model_fields))
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
    if optimizer is not None and _registry.get(optimizer) is None:
        raise InputError(f"unknown optimizer {optimizer!r}; choose one of {', '.join(_registry.names())}",
                         file=source, line=_line_of(text, ("optimizer",)), field="optimizer")
    settings = data.get("settings", {})
    if optimizer is not None and isinstance(settings, dict):
        try:
            _registry.entry_for(optimizer).settings.model_validate(settings)
        except ValidationError as exc:
            msg, loc = _settings_error(exc, optimizer)
            raise InputError(msg, file=source, line=_line_of(text, loc), field=".".join(loc)) from None
    try:
        recipe = Recipe.model_validate(data)
    except ValidationError as exc:
        kind, where, msg = validation_problem(exc)
        loc = tuple(str(p) for p in where if not isinstance(p, int))
        if kind == "extra_forbidden":
            known = sorted(Recipe.model_fields) if len(loc) == 1 else None
            if loc and loc[0] == "split":
                known = sorted(SplitSpec.model_fields)
            elif loc and loc[0] == "budget":
                known = sorted(BudgetSpec.model_fields)
            known = [k for k in (known or []) if k != "source"]
            msg = "unknown field" + (f" (expected one of: {', '.join(known)})" if known else "")
        elif kind == "literal_error" and loc == ("metric",):
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
