"""Registered output types: specs name a judge's typed output (``output = "lematerial.synthesis"``), not its
import path, so moving a class never breaks a shipped or a user's optimized spec.

Registrations hold an import path (imported on first use, so this module loads neither DSPy nor the output
classes) or a class. A spec may still write ``module:Class``: a path that a registration knows resolves to
that registration (and hashes like its name); any other path is imported as before, under the same trust
rule as spec code (``scijudge.spec.judge_spec``).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from scijudge.errors import SpecError


@dataclass(frozen=True)
class OutputType:
    """One registered output type: its name, where its class lives, and what spec hashes record for it."""

    name: str
    target: str | type  # 'module:Class' (imported lazily) or the class itself
    hash_key: str  # the text a spec hash records for the output (older specs wrote the import path)
    aliases: tuple[str, ...] = ()  # older import paths that name this output
    scaled: bool = False  # the ratings follow the spec's [scale] (``scijudge.spec.outputs.scaled_output``)

    def load(self) -> type:
        """The output class (imported on first use)."""
        if isinstance(self.target, type):
            return self.target
        module_name, _, qualname = self.target.partition(":")
        obj: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            obj = getattr(obj, part)
        if not isinstance(obj, type):
            raise AttributeError(f"{self.target!r} is not a class")
        return obj


_OUTPUTS: dict[str, OutputType] = {}
_BY_PATH: dict[str, str] = {}


def register_output(name: str, target: str | type, *, aliases: tuple[str, ...] = (), hash_key: str | None = None,
                    scaled: bool = False, replace: bool = False) -> OutputType:
    """Register an output type under ``name`` (a class, or 'module:Class' imported when first needed).

    Args:
        aliases: import paths older specs used for it; they resolve here and hash like ``name`` (a path
            not listed is imported as written, as before names existed).
        hash_key: what spec hashes record for this output (default ``name``); shipped types that older specs
            named by path keep that path here, so their hashes (and stored runs) stay valid.
        scaled: the type's ratings follow the spec's ``[scale]`` (built-in Likert and pairwise ratings).
        replace: allow re-registering an existing name (otherwise an error: two types under one name).
    """
    if ":" in name or not name.strip():
        raise ValueError(f"an output name is a plain name like 'likert' or 'lematerial.synthesis', got {name!r}")
    if name in _OUTPUTS and not replace and _OUTPUTS[name].target != target:
        raise ValueError(f"output type {name!r} is already registered ({_OUTPUTS[name].target!r})")
    entry = OutputType(name=name, target=target, hash_key=hash_key or name, aliases=tuple(aliases), scaled=scaled)
    _OUTPUTS[name] = entry
    for known in aliases:
        _BY_PATH[known] = name
    return entry


def output_names() -> list[str]:
    """Every registered output name, sorted."""
    return sorted(_OUTPUTS)


def find_output(name_or_path: str) -> OutputType | None:
    """The registration a spec's ``output`` names (by name, or by a path it is known under), else None."""
    if name_or_path in _OUTPUTS:
        return _OUTPUTS[name_or_path]
    registered = _BY_PATH.get(name_or_path)
    return _OUTPUTS[registered] if registered is not None else None


def get_output(name: str, *, source: str | None = None) -> type:
    """The class registered as ``name``; an unknown name is a SpecError listing the registered ones."""
    entry = find_output(name)
    if entry is None:
        raise SpecError(f"unknown output type {name!r}; registered: {', '.join(output_names())} "
                        "(or write 'module:Class')", file=source, field="output")
    try:
        return entry.load()
    except (ImportError, AttributeError) as exc:
        raise SpecError(f"output type {name!r} cannot be imported ({entry.target!r}): {exc}", file=source,
                        field="output") from exc


def output_hash_key(name_or_path: str) -> str:
    """What a spec hash records for a spec's ``output``: the registration's hash key, else the text as written."""
    entry = find_output(name_or_path)
    return entry.hash_key if entry is not None else name_or_path


# --- the shipped output types (hash keys are what the shipped specs wrote before names existed) -----------
_CHECKLIST = "scijudge.judges.checklist"
_MATERIALS = "scijudge.materials.outputs"
register_output("likert", "scijudge.spec.outputs:LikertRating", scaled=True)
register_output("pairwise", "scijudge.spec.outputs:PairwiseJudgment", scaled=True)
for _name, _cls, _module in (
    ("researchrubrics.verdict", "CriterionVerdict", _CHECKLIST),
    ("researchrubrics.verdict.ternary", "TernaryCriterionVerdict", _CHECKLIST),
    ("researchrubrics.evidence", "ChunkEvidence", _CHECKLIST),
    ("lematerial.synthesis", "SynthesisJudgment", _MATERIALS),
    ("lematerial.linking", "LinkingJudgment", _MATERIALS),
):
    register_output(_name, f"{_module}:{_cls}", aliases=(f"{_module}:{_cls}",), hash_key=f"{_module}:{_cls}")
