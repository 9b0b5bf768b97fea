"""Judge drift: the same judge and model, judged twice (two run stores, or the history inside one store).

Per (judge, model, endpoint): the judgments paired on (item, part) where both runs answered; the flip rate
(scores differ; beyond +-1: they differ by more than one score point), Cohen's unweighted kappa between the two
runs, and the mean shift new - old with a paired-t 95% interval over the paired judgments. Verdict judges get
the flip rate and kappa on verdicts. Status changes (ok <-> abstained) are counted, not paired. A figure on
fewer than 30 pairs carries a warning. Reading a store never writes to it.

Inside one store, history exists only where the judgment's key changed (another spec, item content or decoding):
a re-judgment with the same key replaces the row. A provider that silently changes the model behind a name is
caught by judging into a second store and comparing the two (``drift OLD NEW``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from scijudge.errors import InputError
from scijudge.vocab import FEW_UNITS

PAIR = ["item_id", "judge", "part", "model", "endpoint"]
COLUMNS = ["judge", "model", "endpoint", "track", "n_matched", "n_status_changed", "n_paired", "flip_rate",
           "flip_rate_beyond1", "kappa", "mean_shift", "shift_lo", "shift_hi", "interval", "warning"]
GATES = ("exact", "beyond1")


def read_store(path: str | Path, *, history: bool = False) -> pd.DataFrame:
    """A run store's current rows (or every row, in the order written), read by ``Judgments.read``."""
    from scijudge.metrics.frames import Judgments

    frame = Judgments.read(path, history=history).frame
    for column in ("item_id", "judge", "part", "model", "endpoint", "status"):
        frame[column] = frame[column].astype(object).where(frame[column].notna(), "").astype(str)
    frame["score"] = pd.to_numeric(frame["score"], errors="coerce").astype(float)
    return frame


def history_pairs(rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(old, new) inside one store: per (item, judge, part, model, endpoint) its current row and the row it
    replaced as current (the latest history row). ``rows`` in the order written (``Run.rows(history=True)``)."""
    current = rows[rows["current"].astype(bool)]
    older = rows[~rows["current"].astype(bool)]
    return older.groupby(PAIR, sort=False).tail(1), current


def cohen_kappa(a: np.ndarray, b: np.ndarray) -> float:
    """Unweighted Cohen's kappa of two label vectors (checked against scikit-learn in the tests)."""
    cats = np.unique(np.concatenate([np.asarray(a, dtype=object).astype(str), np.asarray(b, dtype=object).astype(str)]))
    index = {c: i for i, c in enumerate(cats)}
    table = np.zeros((cats.size, cats.size))
    for x, y in zip(np.asarray(a, dtype=object).astype(str), np.asarray(b, dtype=object).astype(str)):
        table[index[x], index[y]] += 1
    n = table.sum()
    if n == 0:
        return math.nan
    po = np.trace(table) / n
    pe = float((table.sum(0) * table.sum(1)).sum()) / n ** 2
    return math.nan if pe == 1 else float((po - pe) / (1 - pe))


def _label(values: np.ndarray) -> np.ndarray:
    """Scores as category labels for kappa: 3.0 and 3 are the same category."""
    return np.array([f"{v:g}" for v in values], dtype=object)


def mean_shift_interval(d: np.ndarray, level: float = 0.95) -> tuple[float, float, float]:
    """Mean of paired differences and its paired-t interval (scipy.stats.t)."""
    from scipy import stats

    n = d.size
    if n == 0:
        return math.nan, math.nan, math.nan
    mean = float(d.mean())
    if n < 2:
        return mean, math.nan, math.nan
    se = float(d.std(ddof=1)) / math.sqrt(n)
    if se == 0:
        return mean, mean, mean
    half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * se
    return mean, mean - half, mean + half


def drift(old: pd.DataFrame, new: pd.DataFrame, *, any_model: bool = False, tolerance: float = 1.0,
          level: float = 0.95) -> pd.DataFrame:
    """One row per (judge, model, endpoint): paired statistics between old and new judgments (see the module).

    ``any_model``: pair on (item, judge, part) only, e.g. when the model was renamed (one model per judge in
    each run); the model column then reads 'old -> new'."""
    keys = PAIR if not any_model else ["item_id", "judge", "part"]
    if any_model:
        for frame, which in ((old, "old"), (new, "new")):
            many = frame.groupby("judge")["model"].nunique()
            if (many > 1).any():
                judge = many[many > 1].index[0]
                raise InputError(f"the {which} run has several models for judge {judge!r}: pairing on the item alone "
                                 "needs one model per judge", field="any-model")
    merged = old.drop_duplicates(keys, keep="last").merge(new.drop_duplicates(keys, keep="last"), on=keys,
                                                           suffixes=("_old", "_new"))
    if any_model:
        merged["model"] = merged["model_old"] + " -> " + merged["model_new"]
        merged["endpoint"] = merged["endpoint_old"]
    rows = []
    for (judge, model, endpoint), g in merged.groupby(["judge", "model", "endpoint"], sort=True):
        both_ok = (g["status_old"] == "ok") & (g["status_new"] == "ok")
        row: dict[str, Any] = {"judge": judge, "model": model, "endpoint": endpoint, "n_matched": len(g),
                               "n_status_changed": int((g["status_old"] != g["status_new"]).sum())}
        scored = g[both_ok & g["score_old"].notna() & g["score_new"].notna()]
        if len(scored):
            a, b = scored["score_old"].to_numpy(float), scored["score_new"].to_numpy(float)
            d = b - a
            mean, lo, hi = mean_shift_interval(d, level)
            row.update(track="score", n_paired=len(scored), flip_rate=float(np.mean(~np.isclose(a, b))),
                       flip_rate_beyond1=float(np.mean(np.abs(d) > tolerance + 1e-9)),
                       kappa=cohen_kappa(_label(a), _label(b)), mean_shift=mean, shift_lo=lo, shift_hi=hi,
                       interval=f"paired t {level:.0%}")
        else:
            verd = g[both_ok & g["verdict_old"].notna() & g["verdict_new"].notna()]
            a, b = verd["verdict_old"].to_numpy(object), verd["verdict_new"].to_numpy(object)
            row.update(track="verdict", n_paired=len(verd), flip_rate=float(np.mean(a != b)) if len(verd) else math.nan,
                       flip_rate_beyond1=math.nan, kappa=cohen_kappa(a, b) if len(verd) else math.nan,
                       mean_shift=math.nan, shift_lo=math.nan, shift_hi=math.nan, interval="")
        row["warning"] = f"only {row['n_paired']} paired judgments" if row["n_paired"] < FEW_UNITS else ""
        rows.append(row)
    return pd.DataFrame(rows, columns=COLUMNS)


def drift_stores(old: str | Path, new: str | Path | None = None, **options: Any) -> pd.DataFrame:
    """``drift`` between two run stores, or (``new`` None) between history and current rows of one store."""
    if new is None:
        before, after = history_pairs(read_store(old, history=True))
        if before.empty:
            raise InputError("the store holds no history (no judgment was superseded by a newer one); compare two "
                             "stores: drift OLD NEW", file=old)
    else:
        before, after = read_store(old), read_store(new)
    table = drift(before, after, **options)
    if table.empty:
        raise InputError("no judgment of the same item, judge, part, model and endpoint is in both runs (a renamed "
                         "model? try --any-model)", file=new or old)
    return table


def gate(table: pd.DataFrame, fail_above: float | None, on: str = "exact") -> list[str]:
    """The (judge, model) lines whose flip rate exceeds ``fail_above`` (empty: the gate passes)."""
    if on not in GATES:
        raise InputError(f"unknown gate {on!r}: use {' or '.join(GATES)}", field="on")
    if fail_above is None or table.empty:
        return []
    column = "flip_rate" if on == "exact" else "flip_rate_beyond1"
    bad = table[table[column] > fail_above]
    return [f"{r.judge} / {r.model}: {on} flip rate {getattr(r, column):.3f} > {fail_above:g} (n={r.n_paired})"
            for r in bad.itertuples()]
