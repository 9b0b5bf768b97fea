"""Judge specs: declarative TOML files (instructions, scale, inputs, output type) and where to find them.

Specs ship in the wheel (``scijudge/_data/signatures``) and are also found in a source checkout's
top-level ``signatures/`` folder. A user adds a judge by writing one TOML file, or passes its path.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from scijudge._toml import read_toml
from scijudge.errors import SpecError, UnknownJudgeError, from_validation_error
from scijudge.spec.families import family_names, get_family
from scijudge.spec.output_types import find_output, get_output, output_hash_key
from scijudge.spec.prepare import find_prepare, load_prepare, prepare_hash_key

PAIRWISE_SUFFIX = ".pairwise"
TRUST_ENV = "SCIJUDGE_TRUST_SPEC_CODE"
# Input names that would shadow an attribute of DSPy's Signature (or its pydantic base) or the output field.
_RESERVED_INPUTS = frozenset(set(dir(BaseModel)) | {
    "instructions", "signature", "fields", "input_fields", "output_fields", "with_instructions",
    "with_updated_fields", "prepend", "append", "insert", "delete", "equals", "dump_state", "load_state",
    "judgment", "demos", "config", "lm",
})
_trusted: bool | None = None


def trust_spec_code(trusted: bool = True) -> None:
    """Allow (or forbid again) spec code outside scijudge: ``prepare`` hooks and ``output`` classes run as code.

    The same as ``--trust-spec-code`` on the command line or ``SCIJUDGE_TRUST_SPEC_CODE=1`` in the environment.
    """
    global _trusted
    _trusted = trusted
    if trusted:  # worker processes (spawned by --processes) inherit the choice
        os.environ[TRUST_ENV] = "1"
    else:
        os.environ.pop(TRUST_ENV, None)


def spec_code_trusted() -> bool:
    """Whether specs may import code from outside the scijudge package (off unless the user said so)."""
    if _trusted is not None:
        return _trusted
    return os.environ.get(TRUST_ENV, "").strip().lower() in ("1", "true", "yes", "on")


class ScaleTable(BaseModel):
    """A numeric rating scale with optional anchor text for each level."""

    model_config = ConfigDict(extra="forbid")

    min: float = 1
    max: float = 5
    step: float = 1
    anchors: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> ScaleTable:
        if self.max <= self.min:
            raise ValueError("scale.max must be greater than scale.min")
        if self.step <= 0:
            raise ValueError("scale.step must be positive")
        return self

    def levels(self) -> list[float]:
        """Every allowed value of the scale, lowest first."""
        from scijudge.vocab import ScaleTuple

        return ScaleTuple(float(self.min), float(self.max), float(self.step)).levels()


class InputSpec(BaseModel):
    """One input field of a judge; optional inputs that are empty are left out of the prompt."""

    model_config = ConfigDict(extra="forbid")

    name: str
    description: str = ""
    optional: bool = False
    aliases: list[str] = Field(default_factory=list, description="Older item field names read when `name` is absent.")

    @field_validator("name")
    @classmethod
    def _identifier(cls, value: str) -> str:
        if not value.isidentifier() or value.startswith("_"):
            raise ValueError(f"input name {value!r} must be a Python identifier not starting with '_'")
        if value in _RESERVED_INPUTS or value.startswith("model_"):
            raise ValueError(f"input name {value!r} is reserved (it names part of the judge itself); rename it,"
                             " e.g. to 'task_instructions'")
        return value


class Block(BaseModel):
    """An optional titled text block appended to the instructions only when it has text."""

    model_config = ConfigDict(extra="forbid")

    title: str
    text: str = ""


class JudgeSpec(BaseModel):
    """A judge as declared in TOML: compiled into a DSPy signature by ``scijudge.spec.signatures``."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_.\-]*$")
    family: str
    description: str
    instructions: str
    output: str = Field(default="", description="A registered output type (scijudge.spec.output_types) or 'module:Class'; "
                        "default: the family's.")
    inputs: list[InputSpec]
    scale: ScaleTable | None = None
    pairwise: bool = False
    blocks: dict[str, Block] = Field(default_factory=dict)
    version: int = 1
    provenance: dict[str, Any] = Field(default_factory=dict)
    demos: list[dict[str, Any]] = Field(default_factory=list)
    step: bool = False
    prepare: str | None = Field(default=None, pattern=r"^[\w.]+(:[\w.]+)?$")
    preset: str | None = Field(default=None, description="Prompt preset (scijudge.judges.presets), e.g. 'yescieval-native'.")
    source: str | None = Field(default=None, exclude=True)

    @field_validator("family")
    @classmethod
    def _known_family(cls, value: str) -> str:
        if value not in family_names():
            raise ValueError(f"unknown judge family {value!r}; registered families: {', '.join(family_names())}")
        return value

    @model_validator(mode="after")
    def _check(self) -> JudgeSpec:
        names = [i.name for i in self.inputs]
        duplicated = {n for n in names if names.count(n) > 1}
        if duplicated:
            raise ValueError(f"duplicated input names: {sorted(duplicated)}")
        if not self.inputs:
            raise ValueError("a judge needs at least one input")
        declared = get_family(self.family)
        if not self.output:
            self.output = declared.output
        if declared.needs_scale and self.scale is None:
            self.scale = ScaleTable()
        return self

    def output_type(self) -> type:
        """The typed output class ``output`` names (registered name or 'module:Class'); registered rating
        types (Likert, pairwise) follow ``[scale]``."""
        registered = find_output(self.output)
        if registered is not None:
            cls = get_output(self.output, source=self.source)
        else:
            if ":" not in self.output:
                get_output(self.output, source=self.source)  # raises: unknown name, listing the registered ones
            cls = _import_object(self.output, source=self.source, field="output",
                                 hint="a registered output name or 'module:Class'")
        if not (isinstance(cls, type) and issubclass(cls, BaseModel)):
            raise SpecError(f"{self.output!r} is not a pydantic model class", file=self.source, field="output")
        if registered is not None and registered.scaled and self.scale is not None:
            from scijudge.spec.outputs import scaled_output
            from scijudge.vocab import scale_of

            return scaled_output(cls, scale_of(self))
        return cls

    def prepare_function(self) -> Any:
        """The ``prepare`` hook (a registered name, or ``module:function``): checks and completes inputs before
        any LM call (``scijudge.spec.prepare``)."""
        if self.prepare is None:
            return None
        if find_prepare(self.prepare) is not None or ":" not in self.prepare:
            return load_prepare(self.prepare, source=self.source)
        return _import_object(self.prepare, source=self.source, field="prepare", hint="a registered name or 'module:function'")

    def spec_hash(self) -> str:
        """A short content hash: what a judgment in the run store was produced with."""
        payload = self.model_dump(mode="json", exclude={"provenance"})
        payload["output"] = output_hash_key(self.output)  # a registered name hashes like the path it replaced
        if payload.get("prepare") is not None:
            payload["prepare"] = prepare_hash_key(payload["prepare"])  # likewise for prepare functions
        if payload.get("preset") is None:  # fields added later hash as before while unset (issue 16)
            payload.pop("preset", None)
        for spec_input in payload["inputs"]:
            if not spec_input.get("aliases"):
                spec_input.pop("aliases", None)
        digest = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
        return digest[:16]

    def with_blocks(self, **texts: str) -> JudgeSpec:
        """A copy with named blocks filled in (e.g. ``domain_vocabulary="..."``)."""
        unknown = set(texts) - set(self.blocks)
        if unknown:
            raise SpecError(f"unknown blocks {sorted(unknown)}; this judge has {sorted(self.blocks)}",
                            file=self.source, field="blocks")
        blocks = {k: b.model_copy(update={"text": texts.get(k, b.text)}) for k, b in self.blocks.items()}
        return self.model_copy(update={"blocks": blocks})

    def as_pairwise(self) -> JudgeSpec:
        """Derive the pairwise variant of a Likert rubric: answers A and B, each rated, a preference."""
        if self.family != "likert":
            raise SpecError("only Likert specs have pairwise variants", file=self.source, field="family")
        inputs = [i for i in self.inputs if i.name != "answer"] + [
            InputSpec(name="answer_a", description="Answer A."),
            InputSpec(name="answer_b", description="Answer B."),
        ]
        instructions = (
            self.instructions.strip()
            + "\n\nYou are shown two answers, A and B. Rate each one on this quality alone, using the scale"
            " below, then say which is better; answer 'tie' when neither is clearly better. The order in"
            " which the answers appear says nothing about their quality."
        )
        return self.model_copy(update={
            "name": self.name + PAIRWISE_SUFFIX, "family": "pairwise", "output": "pairwise",
            "inputs": inputs, "instructions": instructions, "pairwise": False,
            "description": "Pairwise: " + self.description,
        })


def _import_object(path: str, *, source: str | None, field: str, hint: str) -> Any:
    """Import ``module:Qual.Name`` named in a spec; failures are SpecErrors naming the spec field.

    Code outside the scijudge package is code the spec's author wrote: it runs only when the user trusts
    spec code, and is never looked up in the current directory unless trusted.
    """
    module_name, _, qualname = path.partition(":")
    if not module_name or not qualname:
        raise SpecError(f"must be {hint}, got {path!r}", file=source, field=field)
    own = module_name == "scijudge" or module_name.startswith("scijudge.")
    if not own and not spec_code_trusted():
        raise SpecError(
            f"{path!r} is code outside scijudge and specs with code run it; pass --trust-spec-code (or set "
            f"{TRUST_ENV}=1, or call scijudge.spec.judge_spec.trust_spec_code()) if you trust this spec",
            file=source, field=field)
    if any(part.startswith("_") and part != "__init__" for part in qualname.split(".")):
        raise SpecError(f"{path!r} names a private attribute", file=source, field=field)
    try:
        obj: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise SpecError(f"cannot import {path!r}: {exc}", file=source, field=field) from exc
    return obj


def _source_dirs() -> list[Path]:
    from scijudge._resources import shipped_paths

    return shipped_paths("signatures")


def _field_line(text: str, field: str) -> int | None:
    """Best-effort line of a top-level key in TOML text, so that errors point somewhere useful."""
    key = field.split(".")[0]
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip().startswith((key + " ", key + "=", f"[{key}", f"[[{key}")):
            return number
    return None


def load_spec_file(path: str | Path) -> JudgeSpec:
    """Read and validate one TOML spec; errors name the file, line and field."""
    path = Path(path)
    text, data = read_toml(path, what="spec", error=SpecError)
    from scijudge._bulk import collector_paused

    try:
        with collector_paused():  # as in read_toml: the table may be nested deeply
            spec = JudgeSpec.model_validate(data)
    except ValidationError as exc:
        raise from_validation_error(exc, file=path, error=SpecError,
                                    line_of=lambda field: _field_line(text, field)) from None
    except RecursionError:
        raise SpecError("nested too deeply", file=path) from None
    spec.source = str(path)
    return spec


@lru_cache(maxsize=1)
def _shipped() -> dict[str, JudgeSpec]:
    specs: dict[str, JudgeSpec] = {}
    for folder in _source_dirs():
        for path in sorted(folder.glob("*.toml")):
            spec = load_spec_file(path)
            specs.setdefault(spec.name, spec)
            if spec.pairwise:
                pair = spec.as_pairwise()
                specs.setdefault(pair.name, pair)
    return specs


def list_specs(*, include_steps: bool = False) -> list[JudgeSpec]:
    """Every shipped judge spec (pairwise variants included), sorted by name.

    Specs marked ``step = true`` are internal steps of another judge (e.g. the checklist judge's
    per-chunk evidence call): they are left out unless asked for.
    """
    return sorted((s for s in _shipped().values() if include_steps or not s.step), key=lambda s: s.name)


def get_spec(name_or_path: str | Path) -> JudgeSpec:
    """Resolve a judge by shipped name, by glob over names (``yescieval.qa.*``) is not done here, or by path."""
    if isinstance(name_or_path, Path) or str(name_or_path).endswith(".toml"):
        path = Path(name_or_path)
        if not path.exists():
            raise UnknownJudgeError(f"judge spec file not found: {path}")
        return load_spec_file(path)
    specs = _shipped()
    name = str(name_or_path)
    if name in specs:
        return specs[name]
    import difflib

    close = difflib.get_close_matches(name, list(specs), n=3, cutoff=0.75) or \
        [n for n in specs if name.split(".")[-1] in n][:5]
    hint = f"; did you mean {', '.join(close)}?" if close else "; run `scijudge judges` to list them"
    raise UnknownJudgeError(f"unknown judge {name!r}{hint}")


def resolve_judges(names: list[str]) -> list[JudgeSpec]:
    """Expand names, paths and shell-style patterns (``yescieval.qa.*``) into specs, keeping order."""
    import fnmatch

    out: list[JudgeSpec] = []
    for name in names:
        if any(ch in name for ch in "*?[") and not name.endswith(".toml"):
            matched = [s for s in list_specs() if fnmatch.fnmatch(s.name, name)]
            if not matched:
                raise UnknownJudgeError(f"no judge matches {name!r}; run `scijudge judges` to list them")
            out.extend(matched)
        else:
            out.append(get_spec(name))
    # The same name may appear twice with different content (a judge and its optimized spec): keep both.
    seen: set[tuple[str, str]] = set()
    unique = []
    for spec in out:
        key = (spec.name, spec.spec_hash())
        if key not in seen:
            seen.add(key)
            unique.append(spec)
    return unique
