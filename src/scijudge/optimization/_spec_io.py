"""Optimized specs as files: build one from instructions + demos, write it as TOML, read it (or the program) back."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from scijudge.spec.demos import demo_to_spec, demos_from_spec
from scijudge.judges.base import Judge
from scijudge.spec.signatures import render_instructions
from scijudge.spec.judge_spec import JudgeSpec, get_spec


def _split_instructions(base: JudgeSpec, text: str) -> tuple[JudgeSpec, bool]:
    """A spec whose rendered instructions equal ``text``: keep the anchors when the text still ends with them."""
    text = text.strip()
    suffix = render_instructions(base)[len(base.instructions.strip()):]
    if suffix and text.endswith(suffix):
        head = text[: -len(suffix)]
        candidate = base.model_copy(update={"instructions": head})
        if render_instructions(candidate) == text:
            return candidate, False
    scale = base.scale.model_copy(update={"anchors": {}}) if base.scale else None
    blocks = {k: b.model_copy(update={"text": ""}) for k, b in base.blocks.items()}
    candidate = base.model_copy(update={"instructions": text, "scale": scale, "blocks": blocks})
    if render_instructions(candidate) != text:  # pragma: no cover - render only strips and joins
        raise AssertionError("optimized instructions do not survive rendering")
    return candidate, True


def optimized_spec(base: JudgeSpec, instructions: str, demos: list[dict[str, Any]],
                   provenance: dict[str, Any]) -> JudgeSpec:
    """A copy of ``base`` that renders exactly ``instructions``, with ``demos`` and ``provenance``."""
    spec, inlined = _split_instructions(base, instructions)
    if inlined:
        provenance = {**provenance, "anchors_inlined": True}
    spec = spec.model_copy(update={"demos": demos, "provenance": provenance, "pairwise": False})
    spec.source = None
    return spec


def _toml_ready(value: Any) -> Any:
    """Drop None and non-finite floats (TOML has neither null nor NaN in our files)."""
    if isinstance(value, dict):
        return {str(k): _toml_ready(v) for k, v in value.items() if v is not None and _toml_ready(v) is not None}
    if isinstance(value, (list, tuple)):
        return [_toml_ready(v) for v in value if v is not None]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Path):
        return str(value)
    return value


def _has_cr(value: Any) -> bool:
    if isinstance(value, str):
        return "\r" in value
    if isinstance(value, dict):
        return any(_has_cr(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_cr(v) for v in value)
    return False


def save_spec(spec: JudgeSpec, path: str | Path) -> Path:
    """Write a spec as TOML that ``get_spec(path)`` reads back identically (same hash, same prompts)."""
    import tomli_w

    path = Path(path)
    data = _toml_ready(spec.model_dump(mode="json"))
    # Multi-line TOML strings are easier to review, but a reader may turn "\r\n" in them into "\n": text
    # with carriage returns is written with escapes instead, so that it reads back byte for byte.
    multiline = not _has_cr(data)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(tomli_w.dumps(data, multiline_strings=multiline), encoding="utf-8")
    return path


def load_optimized_judge(path: str | Path, *, lm: Any = None, model: str | None = None) -> Judge:
    """A judge from a spec file, with the spec's demos (``Judge`` applies a spec's demos when it is built)."""
    from scijudge.judges.build import load_judge

    return load_judge(Path(path), lm=lm, model=model)


def load_program(path: str | Path, spec: JudgeSpec | str | Path, *, lm: Any = None) -> Judge:
    """A judge from a DSPy program JSON (``judge.save``) and the spec it was optimized from."""
    spec = spec if isinstance(spec, JudgeSpec) else get_spec(spec)
    judge = Judge(spec)
    judge.load(str(path))  # (loading deep-copies the module: bind the LM afterwards)
    judge.lm = lm
    typed = spec.model_copy(update={"demos": [demo_to_spec(d, spec) for d in judge.predict.demos]})
    judge.predict.demos = demos_from_spec(typed)
    judge.predict.lm = None
    return judge


