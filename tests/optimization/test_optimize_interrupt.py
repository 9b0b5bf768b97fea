"""Ctrl-C during an optimization's search keeps the best candidate so far, tested and written, marked stopped early."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from scijudge.optimization import OptimizerEntry, OptimizerSettings, optimize, recipe_from_dict, register
from scijudge.optimization._registry import unregister
from scijudge.spec.judge_spec import get_spec
from scijudge.testing.scripted import scripted_lm
from scijudge.testing.toy_judge import toy_setup


@pytest.mark.slow
def test_ctrl_c_during_the_search_writes_the_best_so_far_marked_stopped_early(tmp_path: Path) -> None:
    def interrupted(settings: Any, inputs: Any) -> Any:
        raise KeyboardInterrupt

    register(OptimizerEntry("ctrl-c", OptimizerSettings, interrupted, proposes=False))
    try:
        spec, items, labels, world = toy_setup()
        result = optimize(spec, items, labels, scripted_lm(world.respond),
                          recipe_from_dict({"optimizer": "ctrl-c", "split": {"seed": 3}}), out=tmp_path, n_boot=0)
    finally:
        unregister("ctrl-c")
    assert result.stopped == "interrupted by Ctrl-C"
    assert any("stopped early: interrupted by Ctrl-C" in note for note in result.notes)
    assert result.spec_path is not None
    saved = get_spec(result.spec_path)
    assert saved.provenance["stopped_early"] is True and saved.provenance["stopped"] == "interrupted by Ctrl-C"
