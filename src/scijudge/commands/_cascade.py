"""`scijudge judge --cascade`: the stages of a saved cascade, judged through the one run API."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any


def cascade_stages(path: Path, build: Callable[..., list[Any]]) -> tuple[list[Any], int, list[str]]:
    """The stages of the thresholds file (each member's judges built by ``build(model, api_base, mode,
    decision_score, rating_probs)``), its seed, and its members' models."""
    from scijudge.metrics.selective.api import load_thresholds
    from scijudge.run.cascade import Stage

    plan = load_thresholds(path)
    stages = []
    for m in plan["members"]:
        judges = build(m["model"], m["endpoint"] or None, m["mode"], m["decision_score"], m["rating_probs"])
        stages.append(Stage(m["member"], judges, m["thresholds"], m["confidence"]))
    names = [j.name for j in stages[0].judges]
    missing = [n for n in names if all(m["thresholds"].get(n) is None for m in plan["members"])]
    if missing:
        from scijudge.errors import InputError

        raise InputError(f"no member of the cascade has a threshold for judge {missing[0]!r}"
                         + (f" (nor for {len(missing) - 1} more)" if len(missing) > 1 else "")
                         + ": it was not calibrated, or no member met the target on it; judge it with --model",
                         file=path, field="thresholds")
    return stages, int(plan["seed"]), [m["model"] for m in plan["members"]]
