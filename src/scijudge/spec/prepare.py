"""Registered prepare functions: a spec names the hook that checks and completes its inputs before any LM call
(``prepare = "lematerial.synthesis"``) by name, not by import path, so that moving a module never changes a
spec's identity or orphans a stored run.

A registration holds an import path (imported on first use) or the function itself, and the text a spec hash
records for it. Shipped hooks keep the ``module:function`` path they were first named by as that text, so
specs written either way hash alike. A spec may still write ``module:function``: a path a registration knows
resolves to it; any other path is imported under the spec-code trust rule (``scijudge.spec.judge_spec``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from scijudge.errors import SpecError

PrepareFunction = Callable[..., dict[str, Any]]
"""``prepare(values, *, source, line) -> values``: the judge's inputs, checked and completed."""


@dataclass(frozen=True)
class PrepareHook:
    """One registered prepare function."""

    name: str
    target: str | PrepareFunction  # 'module:function' (imported lazily) or the function
    hash_key: str
    aliases: tuple[str, ...] = ()

    def load(self) -> PrepareFunction:
        if not isinstance(self.target, str):
            return self.target
        module_name, _, qualname = self.target.partition(":")
        obj: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            obj = getattr(obj, part)
        return obj  # type: ignore[no-any-return]


_HOOKS: dict[str, PrepareHook] = {}
_BY_PATH: dict[str, str] = {}


def register_prepare(name: str, target: str | PrepareFunction, *, aliases: tuple[str, ...] = (),
                     hash_key: str | None = None, replace: bool = False) -> PrepareHook:
    """Register a prepare function under ``name`` (the function, or 'module:function' imported when needed)."""
    if ":" in name or not name.strip():
        raise ValueError(f"a prepare name is a plain name like 'lematerial.synthesis', got {name!r}")
    if name in _HOOKS and not replace and _HOOKS[name].target != target:
        raise ValueError(f"prepare function {name!r} is already registered ({_HOOKS[name].target!r})")
    hook = PrepareHook(name=name, target=target, hash_key=hash_key or name, aliases=tuple(aliases))
    _HOOKS[name] = hook
    for path in aliases:
        _BY_PATH[path] = name
    return hook


def prepare_names() -> list[str]:
    return sorted(_HOOKS)


def find_prepare(name_or_path: str) -> PrepareHook | None:
    """The registration a spec's ``prepare`` names (by name, or a path it is known under), else None."""
    if name_or_path in _HOOKS:
        return _HOOKS[name_or_path]
    registered = _BY_PATH.get(name_or_path)
    return _HOOKS[registered] if registered is not None else None


def load_prepare(name: str, *, source: str | None = None) -> PrepareFunction:
    """The registered function; an unknown name or a failed import is a SpecError naming the spec field."""
    hook = find_prepare(name)
    if hook is None:
        raise SpecError(f"unknown prepare function {name!r}; registered: {', '.join(prepare_names())} "
                        "(or write 'module:function')", file=source, field="prepare")
    try:
        return hook.load()
    except (ImportError, AttributeError) as exc:
        raise SpecError(f"prepare function {name!r} cannot be imported ({hook.target!r}): {exc}", file=source,
                        field="prepare") from exc


def prepare_hash_key(name_or_path: str) -> str:
    """What a spec hash records for ``prepare``: the registration's hash key, else the text as written."""
    hook = find_prepare(name_or_path)
    return hook.hash_key if hook is not None else name_or_path


# --- the shipped hooks (hash keys are the paths the shipped specs wrote first) ------------------------------
for _name, _function in (("lematerial.synthesis", "prepare_synthesis_inputs"),
                         ("lematerial.linking", "prepare_linking_inputs")):
    _path = f"scijudge.materials.inputs:{_function}"
    register_prepare(_name, _path, aliases=(_path,), hash_key=_path)
