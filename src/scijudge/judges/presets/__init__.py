"""Prompt presets: alternative prompt layouts a judge can be sent with (``--preset`` or a spec's ``preset``).

A preset asks the model in a source method's own layout (free text), parses that answer into the judge's
typed output, and leaves the structured chain as the retry when the free-text answer cannot be read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scijudge.errors import SpecError

if TYPE_CHECKING:
    from scijudge.spec.judge_spec import JudgeSpec

PRESET_NAMES: tuple[str, ...] = ("yescieval-native",)


def get_preset(name: str, *, source: str | None = None) -> Any:
    """The preset object for a name; an unknown name is a SpecError listing the known ones."""
    if name == "yescieval-native":
        from scijudge.judges.presets.yescieval_native import YESciEvalNativePreset

        return YESciEvalNativePreset()
    raise SpecError(f"unknown preset {name!r}; known presets: {', '.join(PRESET_NAMES)}", file=source,
                    field="preset")


def apply_blocks_and_preset(specs: list[JudgeSpec], *, blocks: list[str], preset: str | None = None) -> list[JudgeSpec]:
    """The specs with blocks filled from ``NAME=FILE`` options and, when given, the prompt preset set on every
    spec it has a layout for (the others keep the default prompt)."""
    from scijudge.spec.blocks import apply_blocks

    filled = apply_blocks(specs, blocks)
    if not preset:
        return filled
    supported = _preset_supported(filled, preset)
    return [spec.model_copy(update={"preset": preset}) if spec.name in supported else spec for spec in filled]


def _preset_supported(specs: list[JudgeSpec], preset: str) -> set[str]:
    """Names of the specs the preset has a layout for (a glob like ``yescieval.qa.*`` also selects pairwise
    variants, which keep the default prompt); an error when it fits none of them."""
    chosen = get_preset(preset)
    names: set[str] = set()
    first_error: SpecError | None = None
    for spec in specs:
        try:
            chosen.check(spec)
        except SpecError as exc:
            first_error = first_error or exc
            continue
        names.add(spec.name)
    if not names and first_error is not None:
        raise first_error
    return names


__all__ = ["PRESET_NAMES", "apply_blocks_and_preset", "get_preset"]
