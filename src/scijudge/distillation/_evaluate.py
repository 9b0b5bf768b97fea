"""Held-out evaluation of a distilled judge: the student, its base and the teacher judge the held-out items, and
``scijudge.calibrate`` compares them with the human labels (or, without labels, the teacher), paired on the same
items, so a student worse than its base is reported as such.

The student and the base are judged through the normal run API (``judge_items``, one run store each under
``OUT/evaluation/``); the teacher's held-out judgments are read from its run store (they are already paid for).
Mode: decision (the level probabilities, scored by the most likely level) when this scijudge has decision mode,
else generated judgments; ``EVAL_MODE`` says which, and ``mode=`` overrides it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scijudge.data import Item
from scijudge.distillation._data import decision_mode_available

EVAL_MODE = "decision" if decision_mode_available() else "generate"
"""How the student and the base are judged on the held-out split (decision mode once issue 25 has landed)."""


def _judge_with(spec: Any, model: str, mode: str) -> Any:
    from scijudge.judges import load_judge

    if mode == "decision":
        return load_judge(spec, model=model, mode="decision", decision_score="mode")
    return load_judge(spec, model=model)


def judge_contender(spec: Any, items: list[Item], model: str, store_path: Path, mode: str) -> Any:
    """Judge ``items`` with ``model`` into ``store_path`` (resumes if it exists); the store's rows as a frame."""
    from scijudge.run.api import judge_items
    from scijudge.run.store import Run

    judge = _judge_with(spec, model, mode)
    store = Run(store_path)
    try:
        judge_items(items, [judge], store)
        frame = store.to_pandas()
    finally:
        store.close()
    return frame


def teacher_frame(run_path: Path, judge_name: str, model: str | None, item_ids: set[str]) -> Any:
    """The teacher's stored judgments of the held-out items (read only)."""
    from scijudge.run.store import Run

    store = Run(run_path, create=False)
    try:
        frame = store.to_pandas()
    finally:
        store.close()
    keep = frame["judge"].eq(judge_name) & frame["item_id"].isin(item_ids) & frame["part"].fillna("").eq("")
    if model:
        keep &= frame["model"].eq(model)
    return frame[keep]


def reference_labels(labels: Path | None, teacher: Any, judge_name: str, item_ids: set[str]) -> tuple[Any, str]:
    """Labels of the held-out items to compare with: the human labels, else the teacher's scores."""
    import pandas as pd

    if labels is not None:
        from scijudge.labels import labels_to_frame, load_labels

        frame = labels_to_frame([lab for lab in load_labels(labels) if lab.judge == judge_name
                                 and lab.item_id in item_ids and not lab.part])
        return frame, "human labels"
    ok = teacher[teacher["status"].eq("ok") & teacher["score"].notna()]
    frame = pd.DataFrame({"item_id": ok["item_id"], "judge": judge_name, "part": "",
                          "score": ok["score"].round(), "verdict": None, "annotator": "teacher"})
    return frame, "the teacher's scores (no human labels given)"


def evaluate(spec: Any, items: list[Item], out_dir: Path, *, student: str, base: str, labels: Path | None,
             teacher: Path | None, teacher_model: str | None, mode: str | None = None, n_boot: int = 1000,
             seed: int = 0) -> dict[str, Any]:
    """Judge the held-out items with student and base (and read the teacher's), calibrate them paired, write
    ``OUT/evaluation/`` (report.html, report.json, CSV tables) and return the summary for the card."""
    import pandas as pd

    from scijudge.metrics.calibration import calibrate
    from scijudge.report.calibration import write_report

    mode = mode or EVAL_MODE
    folder = out_dir / "evaluation"
    folder.mkdir(parents=True, exist_ok=True)
    ids = {item.id for item in items}
    frames = {"student": judge_contender(spec, items, student, folder / "student.sqlite", mode),
              "base": judge_contender(spec, items, base, folder / "base.sqlite", mode)}
    teacher_rows = None
    if teacher is not None:
        teacher_rows = teacher_frame(teacher, spec.name, teacher_model, ids)
        if not teacher_rows.empty:
            frames["teacher"] = teacher_rows
    reference, against = reference_labels(labels, teacher_rows, spec.name, ids)
    judged = pd.concat([f.assign(source=name) for name, f in frames.items()], ignore_index=True)
    result = calibrate(judged, reference, n_boot=n_boot, seed=seed, specs=[spec], allow_extra_labels=True)
    written = write_report(result, folder)
    contenders = {name: str(f["model"].iloc[0]) for name, f in frames.items() if not f.empty}
    exact = _exact(frames, reference)
    summary: dict[str, Any] = {
        "mode": mode, "against": against, "items": len(ids), "contenders": contenders,
        "exact_agreement": exact, "n_boot": n_boot,
        "per_rubric": _records(result.per_rubric), "paired": _records(result.paired),
        "files": {k: str(Path(v).relative_to(out_dir)) for k, v in written.items()},
        "notes": list(result.notes),  # calibrate's: among them, each contender judged on fewer than 30 items
    }
    if "student" in frames and "base" in frames:
        gain = paired_exact_gain(frames["student"], frames["base"], reference, n_boot=n_boot, seed=seed)
        if gain is not None:
            summary["gain"] = gain
            if gain["diff"] < 0:
                summary["warning"] = "the student agrees less with the reference than its base does"
    return summary


def _hits(frame: Any, consensus: Any) -> dict[str, float]:
    """Item id -> 1.0 where the contender's score equals the reference consensus, else 0.0 (abstained: 0)."""
    rows = frame.drop_duplicates("item_id", keep="last").set_index("item_id")
    return {i: float(rows.at[i, "status"] == "ok" and rows.at[i, "score"] is not None
                     and float(rows.at[i, "score"]) == float(consensus[i]))
            for i in consensus.index if i in rows.index}


def paired_exact_gain(student: Any, base: Any, reference: Any, *, n_boot: int, seed: int,
                      level: float = 0.95) -> dict[str, Any] | None:
    """Student minus base exact agreement on the items both judged, with a paired percentile bootstrap interval
    (items resampled together, ``scijudge.metrics.bootstrap``); None when they share fewer than 2 items."""
    import numpy as np

    from scijudge.metrics.bootstrap import bootstrap_mean_difference, percentile_interval

    consensus = reference.groupby("item_id")["score"].mean().round()
    a, b = _hits(student, consensus), _hits(base, consensus)
    common = sorted(set(a) & set(b))
    if len(common) < 2:
        return None
    diffs = [np.array([a[i] - b[i]]) for i in common]
    value = float(np.mean([d[0] for d in diffs]))
    out: dict[str, Any] = {"diff": value, "n": len(common), "ci": [float("nan"), float("nan")], "n_boot": n_boot}
    if n_boot > 0:
        lo, hi = percentile_interval(bootstrap_mean_difference(diffs, n_boot, seed), level)
        out["ci"] = [float(lo), float(hi)]
    return out


def _exact(frames: dict[str, Any], reference: Any) -> dict[str, dict[str, Any]]:
    """Exact agreement with the reference (the annotators' mean, rounded) per contender, with its item count and a
    Wilson 95% interval on the same items; abstentions count as disagreement and are reported."""
    import math

    consensus = reference.groupby("item_id")["score"].mean().round()
    out: dict[str, dict[str, Any]] = {}
    for name, frame in frames.items():
        rows = frame.drop_duplicates("item_id", keep="last").set_index("item_id")
        common = [i for i in consensus.index if i in rows.index]
        if not common:
            continue
        hits = sum(1 for i in common if rows.at[i, "status"] == "ok" and rows.at[i, "score"] is not None
                   and float(rows.at[i, "score"]) == float(consensus[i]))
        n = len(common)
        p, z = hits / n, 1.959963984540054
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        abstained = int(sum(1 for i in common if rows.at[i, "status"] != "ok"))
        out[name] = {"value": p, "n": n, "ci": [max(0.0, centre - half), min(1.0, centre + half)],
                     "abstained": abstained}
    return out


def _records(frame: Any) -> list[dict[str, Any]]:
    from scijudge.metrics.calibration import frame_records

    return frame_records(frame) if frame is not None and not frame.empty else []
