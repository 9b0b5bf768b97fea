"""Prompt presets: alternative prompt layouts a judge can be sent with (``--preset`` or a spec's ``preset``).

A preset asks the model in a source method's own layout (free text), parses that answer into the judge's
typed output, and leaves the structured chain as the retry when the free-text answer cannot be read.
"""

from __future__ import annotations

from typing import Any

from scijudge.errors import SpecError

PRESET_NAMES: tuple[str, ...] = ("yescieval-native",)


def get_preset(name: str, *, source: str | None = None) -> Any:
    """The preset object for a name; an unknown name is a SpecError listing the known ones."""
    if name == "yescieval-native":
        from scijudge.judges.presets.yescieval_native import YESciEvalNativePreset

        return YESciEvalNativePreset()
    raise SpecError(f"unknown preset {name!r}; known presets: {', '.join(PRESET_NAMES)}", file=source,
                    field="preset")


__all__ = ["PRESET_NAMES", "get_preset"]
