"""Compile a JudgeSpec into a DSPy signature whose single output is the spec's typed pydantic model."""

from __future__ import annotations

from typing import Optional

import dspy

from scijudge.spec.judge_spec import JudgeSpec

OUTPUT_FIELD = "judgment"


def _fmt_level(value: float) -> str:
    return f"{value:g}"


def render_instructions(spec: JudgeSpec) -> str:
    """The full instruction text: spec instructions, scale anchors, and only the blocks that have text.

    Nothing here is a template: empty blocks are dropped whole, so no unfilled placeholder or
    empty heading can reach a prompt.
    """
    parts = [spec.instructions.strip()]
    if spec.scale is not None and spec.scale.anchors:
        lines = [f"Scale ({_fmt_level(spec.scale.min)}-{_fmt_level(spec.scale.max)}"
                 + (f", steps of {_fmt_level(spec.scale.step)}" if spec.scale.step != 1 else "") + "):"]
        for level in spec.scale.levels():
            anchor = spec.scale.anchors.get(_fmt_level(level))
            if anchor:
                lines.append(f"- {_fmt_level(level)}: {anchor.strip()}")
        parts.append("\n".join(lines))
    for block in spec.blocks.values():
        if block.text.strip():
            parts.append(f"{block.title.strip()}:\n{block.text.strip()}")
    return "\n\n".join(parts)


def build_signature(spec: JudgeSpec, instructions: str | None = None) -> type[dspy.Signature]:
    """A DSPy signature: one InputField per spec input (optional ones typed ``str | None``) and one
    ``judgment`` OutputField typed with the spec's output model."""
    fields: dict[str, tuple[object, object]] = {}
    for item in spec.inputs:
        annotation = Optional[str] if item.optional else str  # noqa: UP045 - a runtime type DSPy renders into prompts
        default = {"default": None} if item.optional else {}
        fields[item.name] = (annotation, dspy.InputField(desc=item.description or item.name, **default))
    output_type = spec.output_type()
    fields[OUTPUT_FIELD] = (output_type, dspy.OutputField(desc="Your judgment as one JSON object."))
    name = "".join(part.capitalize() for part in spec.name.replace("-", ".").replace("_", ".").split("."))
    signature: type[dspy.Signature] = dspy.make_signature(fields, instructions or render_instructions(spec),
                                                          signature_name=name or "Judge")
    return signature
