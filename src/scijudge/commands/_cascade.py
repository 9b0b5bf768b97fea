"""`scijudge judge --cascade`: the stages of a saved cascade, judged through the one run API."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from scijudge.run.summary import RunSummary


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


def merged(summaries: Sequence[RunSummary]) -> RunSummary:
    """One summary of several stages: counts, tokens and cost added; interrupted if any stage was."""
    out = RunSummary()
    for s in summaries:
        for f in fields(RunSummary):
            value, mine = getattr(s, f.name), getattr(out, f.name)
            if f.name == "interrupted":
                out.interrupted = out.interrupted or s.interrupted
            elif f.name == "resumable":
                out.resumable = out.resumable and s.resumable
            elif isinstance(value, dict):
                for k, v in value.items():
                    mine[k] = mine.get(k, 0) + v
            elif isinstance(value, list):
                mine.extend(value)
            else:
                setattr(out, f.name, mine + value)
    return out


def judge_through(items: Sequence[Any], stages: Sequence[Any], store: Any, *, seed: int, say: Callable[[str], None],
                  **options: Any) -> RunSummary:
    """Judge the items through the stages; one line per member says how many judgments it was sent."""
    from scijudge.run.cascade import judge_cascade

    done = judge_cascade(items, stages, store, seed=seed, **options)
    for member, summary in done.stages:
        say(f"cascade member {member}: {summary.planned} judgment(s) planned, {summary.judged} made now, "
            f"{summary.skipped_done} already stored")
    skipped = [s.member for s in stages if not any(m == s.member for m, _ in done.stages)]
    if skipped:
        say(f"cascade members with no threshold for these judges (not called): {', '.join(skipped)}")
    return merged([s for _, s in done.stages])
