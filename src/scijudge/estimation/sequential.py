"""The labelling loop: one anytime-valid confidence sequence per (judge, model), and one per judge over several
models' scores at once, from labels read in the order they were given; where each becomes certain enough.

``sequential.csv`` holds the sequences (``judge, model, n, estimate, lo, hi``: one row per number of labels);
``table.attrs["stops"]`` says per sequence where it first reached the target width (``anytime.py`` has the math).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from scijudge.errors import InputError
from scijudge.estimation import anytime
from scijudge.estimation._units import Units, match_units

SEQUENTIAL_COLUMNS = ["judge", "model", "n", "estimate", "lo", "hi"]
JOINT_SEPARATOR = " + "  # as the joint ppi-cal row of ``estimate`` names several models


def label_order(labels: Any) -> dict[tuple[str, str, str], float]:
    """(item_id, judge, part) -> the position of the unit's first label: by ``labelled_at`` when every label has
    one, else the order given (file order); ``judge`` and ``part`` are "" for labels of any judge/part.
    ``labels``: ``HumanLabel``s (``load_labels``) or a frame (a ``labelled_at`` column is used when present)."""
    if not isinstance(labels, pd.DataFrame):
        labels = pd.DataFrame([{"item_id": x.item_id, "judge": x.judge, "part": x.part,
                                "labelled_at": x.labelled_at} for x in labels],
                              columns=["item_id", "judge", "part", "labelled_at"])
    if labels.empty:
        return {}
    rank = np.arange(len(labels), dtype=float)
    stamps = labels["labelled_at"] if "labelled_at" in labels else None
    if stamps is not None and stamps.notna().all():
        when = pd.to_datetime(stamps, utc=True, errors="coerce", format="ISO8601")
        if when.notna().all():
            rank = np.argsort(np.argsort(when.to_numpy(), kind="stable"), kind="stable").astype(float)
    out: dict[tuple[str, str, str], float] = {}
    columns = [labels[c].fillna("").astype(str).to_numpy() if c in labels else np.full(len(labels), "")
               for c in ("item_id", "judge", "part")]
    for key, r in zip(zip(*columns), rank):
        if r < out.get(key, np.inf):
            out[key] = float(r)
    return out


def _ranks(order: Mapping[tuple[str, str, str], float], judge: str, items: pd.Index) -> np.ndarray:
    """Each unit's label position (its own judge and part first, then labels for any judge or part)."""
    out = np.empty(len(items))
    for k, (item, part) in enumerate(items):
        item, part = str(item), "" if part is None or part != part else str(part)
        out[k] = min(order.get((item, judge, part), np.inf), order.get((item, "", part), np.inf),
                     order.get((item, judge, ""), np.inf), order.get((item, "", ""), np.inf))
    return out


def _one(judge: str, model: str, human: np.ndarray, x: np.ndarray, rank: np.ndarray, alpha: float,
         width: float, options: Mapping[str, Any], bounds: tuple[float, float] | None,
         ) -> tuple[pd.DataFrame, dict[str, Any]]:
    """One sequence over these units (human NaN when unlabelled): its rows and where it stops."""
    labelled = np.flatnonzero(~np.isnan(human))
    labelled = labelled[np.argsort(rank[labelled], kind="stable")]
    seq = anytime.ppi_sequence(human[labelled], x[labelled], x.mean(axis=0), alpha, bounds=bounds, **options)
    rows = pd.DataFrame({"judge": judge, "model": model, "n": seq.n, "estimate": seq.estimate, "lo": seq.lo,
                         "hi": seq.hi})
    stop = seq.stop(width)
    at = (stop or labelled.size) - 1
    point = (float(seq.estimate[at]), float(seq.lo[at]), float(seq.hi[at])) if labelled.size else (np.nan,) * 3
    return rows, {"judge": judge, "model": model, "n_labels": int(labelled.size), "n_units": int(human.size),
                  "stop": stop, "estimate": point[0], "lo": point[1], "hi": point[2]}


def sequential_units(units: Units, labels: Any, *, target_width: float, alpha: float = 0.1,
                     t_opt: float = anytime.DEFAULT_T_OPT, start: int = anytime.DEFAULT_START,
                     joint: bool = True) -> pd.DataFrame:
    """The sequences (``SEQUENTIAL_COLUMNS``) from matched units and the labels in their order (``label_order``:
    ``HumanLabel``s or a frame); ``attrs["stops"]`` one dict per sequence
    (judge, model, n_labels, n_units, stop: the first n at most ``target_width`` wide or None, and the estimate
    and interval there, or at the last label when it never is)."""
    if not target_width > 0:
        raise InputError(f"the target width must be > 0, got {target_width}", field="target_width")
    if not 0 < alpha < 1:
        raise InputError(f"alpha must be between 0 and 1, got {alpha}", field="alpha")
    order = label_order(labels)
    options = {"t_opt": t_opt, "start": start}
    frame = units.frame[(units.frame["status"] == "ok") & units.frame["score"].notna()]
    parts, stops = [], []
    for judge, sub in frame.groupby("judge", sort=True):
        judge = str(judge)
        scale = units.scales.get(judge)
        bounds = (float(scale[0]), float(scale[1])) if scale is not None else None
        part = sub["part"].astype(object).where(sub["part"].notna(), "")
        wide = sub.assign(part=part).pivot_table(index=["item_id", "part"], columns="model", values="score",
                                                 aggfunc="mean", sort=True)
        human = sub.assign(part=part).groupby(["item_id", "part"], sort=True)["human"].first()
        human_arr = human.reindex(wide.index).to_numpy(float)
        rank = _ranks(order, judge, wide.index)
        for model in wide.columns:
            scored = wide[model].notna().to_numpy()
            rows, stop = _one(judge, str(model), human_arr[scored], wide[model].to_numpy(float)[scored],
                              rank[scored], alpha, target_width, options, bounds)
            parts.append(rows)
            stops.append(stop)
        if joint and wide.shape[1] >= 2 and bool((wide.notna().sum(axis=1) >= 2).any()):
            from scijudge.estimation.calibrated import joint_columns

            columns = joint_columns(wide.to_numpy(float))
            name = JOINT_SEPARATOR.join(str(m) for m in wide.columns)
            rows, stop = _one(judge, name, human_arr, columns, rank, alpha, target_width, options, bounds)
            parts.append(rows)
            stops.append(stop)
    table = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=SEQUENTIAL_COLUMNS)
    table = table[SEQUENTIAL_COLUMNS]
    table.attrs["stops"] = stops
    table.attrs.update(target_width=target_width, alpha=alpha, start=start, t_opt=t_opt)
    return table


def sequential(judgments: pd.DataFrame, labels: Any, *, target_width: float, alpha: float = 0.1,
               t_opt: float = anytime.DEFAULT_T_OPT, start: int = anytime.DEFAULT_START, scale: Any = None,
               estimand: str = "mean", joint: bool = True) -> pd.DataFrame:
    """Anytime-valid prediction-powered confidence sequences of the mean human score, per (judge, model) and per
    judge over its models at once, with labels read in the order given (``labelled_at``, else row order).

    Args:
        judgments: run-store rows (as for ``estimate``); labels: ``load_labels(path)`` (their ``labelled_at``
            orders them) or a labels frame (its row order, or its ``labelled_at`` column).
        target_width: the total width at which a sequence is certain enough (``attrs["stops"]`` says where).
        alpha: 1 - the coverage that holds at every number of labels at once.
        t_opt: the number of labels where the sequence is tightest; start: labels before the first interval.
    Returns the ``judge, model, n, estimate, lo, hi`` table (one row per number of labels).
    """
    frame = labels
    if not isinstance(labels, pd.DataFrame):
        from scijudge.labels import labels_to_frame

        frame = labels_to_frame(list(labels))
    units = match_units(judgments, frame, scale=scale, estimand=estimand)
    return sequential_units(units, labels, target_width=target_width, alpha=alpha, t_opt=t_opt, start=start,
                            joint=joint)


def path_text(table: pd.DataFrame, judge: str, model: str, start: int, stop: int | None) -> str:
    """The sequence at a few numbers of labels (start, doubling, the stop and the last), for the console."""
    rows = table[(table["judge"] == judge) & (table["model"] == model)].set_index("n")
    if rows.empty or rows.index.max() < start:
        return ""
    last = int(rows.index.max())
    marks, n = set(), max(start, 2)
    while n <= last:
        marks.add(n)
        n *= 2
    marks |= {last, *([stop] if stop is not None else [])}
    return " · ".join(f"n={k} {rows.at[k, 'estimate']:.3f} [{rows.at[k, 'lo']:.3f}, {rows.at[k, 'hi']:.3f}]"
                      + (" stop" if k == stop else "") for k in sorted(marks))


def stop_line(stop: Mapping[str, Any], target_width: float, alpha: float, start: int) -> str:
    """One console line: where the sequence became certain enough, or how far it is."""
    who = f"{stop['judge']} / {stop['model']}"
    level = f"{1 - alpha:.0%}"
    if stop["stop"] is not None:
        return (f"{who}: certain enough at n = {stop['stop']} of {stop['n_labels']} labels: {stop['estimate']:.3f} "
                f"[{stop['lo']:.3f}, {stop['hi']:.3f}] (within ±{target_width / 2:g} at {level}, valid at every n)")
    if stop["n_labels"] < max(start, 2):
        return f"{who}: {stop['n_labels']} labels; no interval before {start} labels (target ±{target_width / 2:g})"
    return (f"{who}: not yet: {stop['estimate']:.3f} [{stop['lo']:.3f}, {stop['hi']:.3f}] at n = "
            f"{stop['n_labels']} labels, width {stop['hi'] - stop['lo']:.3g} > {target_width:g} ({level})")


def certainty(judgments: pd.DataFrame, labels: Any, *, target_width: float, alpha: float = 0.1,
              judges: Sequence[str] | None = None, start: int = anytime.DEFAULT_START) -> tuple[list[str], str | None]:
    """For a labelling queue: (one line per judge with its current interval, the stop line or None).

    Each judge's sequence is fixed by a rule before any label: the one over all its models' scores at once when
    several models judged it, else its one model's. The queue is certain enough when every judge's sequence is
    at most ``target_width`` wide; the stop line is then ``certain enough: ±W at 90%``. ``labels``: dicts or
    ``HumanLabel``s (item_id, judge, part, score[, labelled_at]) in the order given; labels without a score
    (verdicts) are left out.
    """
    rows = [x if isinstance(x, Mapping) else x.model_dump() for x in labels]
    frame = pd.DataFrame([{"item_id": str(x["item_id"]), "judge": str(x["judge"]), "part": str(x.get("part") or ""),
                           "score": float(x["score"]), "labelled_at": x.get("labelled_at")}
                          for x in rows if isinstance(x.get("score"), (int, float))
                          and not isinstance(x.get("score"), bool)],
                         columns=["item_id", "judge", "part", "score", "labelled_at"])
    if judges:
        judgments = judgments[judgments["judge"].isin(list(judges))]
        frame = frame[frame["judge"].isin(list(judges))]
    level = f"{1 - alpha:.0%}"
    if judgments.empty:
        return [], None
    frame = frame.groupby(["item_id", "judge", "part"], sort=False, as_index=False).agg(
        score=("score", "mean"), labelled_at=("labelled_at", "first"))  # several annotators: one unit, first time
    if frame.empty:
        return [f"no labels yet: the interval starts at {start} labels (target ±{target_width / 2:g} at {level})"], None
    table = sequential(judgments, frame, target_width=target_width, alpha=alpha, start=start)
    chosen: dict[str, dict[str, Any]] = {}
    for stop in table.attrs["stops"]:  # the joint sequence, listed after its judge's models, wins when there is one
        if stop["judge"] not in chosen or JOINT_SEPARATOR in stop["model"]:
            chosen[stop["judge"]] = stop
    lines = [stop_line(s, target_width, alpha, start) for _, s in sorted(chosen.items())]
    done = bool(chosen) and all(s["stop"] is not None for s in chosen.values())
    return lines, (f"certain enough: ±{target_width / 2:g} at {level}" if done else None)
