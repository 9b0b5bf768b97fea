"""Shared machinery: bootstrap blocks, the per-call context, contender groups, coverage and ranking."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd
from scipy import sparse

from scijudge.metrics import agreement as ag
from scijudge.metrics.bootstrap import (
    bootstrap_sums,
    percentile_interval,
    resample_counts,
)
from scijudge.metrics.calibration._result import POOLED
from scijudge.vocab import ScaleTuple


class _Blocks:
    """Per-item sums for many statistics side by side, resampled together in one bootstrap pass."""

    def __init__(self, items: list[str]) -> None:
        self.index = {item: i for i, item in enumerate(items)}
        self._lookup = pd.Index(items)
        self.rows: list[np.ndarray] = []
        self.cols: list[np.ndarray] = []
        self.vals: list[np.ndarray] = []
        self.offsets: dict[Any, tuple[int, int]] = {}
        self.width = 0
        self.reps: np.ndarray | None = None
        self.draws: tuple[int, int] | None = None  # (n_boot, seed) of the resampling, once run

    def add(self, name: Any, item_ids: np.ndarray | pd.Series, cells: np.ndarray, width: int,
            values: np.ndarray | None = None) -> None:
        """Register a block: each (item, cell) pair adds ``values`` (default 1) to that item's row. A text column
        may be given as it is (a Series): turning pandas' text into an array of Python strings first cost more
        than the lookup."""
        self.offsets[name] = (self.width, width)
        rows = self._lookup.get_indexer(pd.Index(item_ids))
        if (rows < 0).any():
            raise KeyError("item outside the bootstrap index")  # internal invariant, not user input
        self.rows.append(rows.astype(np.int64))
        self.cols.append(np.asarray(cells, dtype=np.int64) + self.width)
        self.vals.append(np.ones(len(cells)) if values is None else np.asarray(values, dtype=float))
        self.width += width

    def run(self, n_boot: int, seed: int) -> None:
        if n_boot <= 0 or not self.offsets or not self.index:
            return
        mat = sparse.csr_matrix(
            (np.concatenate(self.vals), (np.concatenate(self.rows), np.concatenate(self.cols))),
            shape=(len(self.index), self.width),
        )
        self.reps = bootstrap_sums(mat, n_boot, seed)
        self.draws = (n_boot, seed)

    def pair_counts(self, item_ids: np.ndarray) -> Iterator[np.ndarray] | None:
        """(chunk × pairs) arrays, resamples in order: how often each pair's item is drawn in each resample — the
        same draws as every block's replicates (``resample_counts`` is deterministic), for statistics that are
        not sums. Chunks, because the whole (n_boot × pairs) array of 1,000 × 150,000 pairs is 1.2 GB."""
        if self.draws is None:
            return None
        rows = self._lookup.get_indexer(pd.Index(item_ids))
        return (counts[:, rows] for counts in resample_counts(len(self.index), *self.draws))

    def get(self, name: Any) -> np.ndarray | None:
        if self.reps is None:
            return None
        start, width = self.offsets[name]
        return self.reps[:, start : start + width]


def _isin(values: pd.Series, allowed: Any) -> np.ndarray:
    """``values.isin(allowed)`` as a boolean array, fast for many allowed values: pandas' isin on a pyarrow string
    column turns each allowed value into a pyarrow scalar one at a time (about 10 µs each); a hash lookup does not."""
    index = pd.Index(allowed)
    if not index.is_unique:
        index = index.unique()
    return np.asarray(index.get_indexer(pd.Index(values)) >= 0)


@dataclass
class _Context:
    scales: dict[str, ScaleTuple]
    blocks: _Blocks
    level: float
    n_bins: int
    notes: list[str]
    continuous: set[str] = field(default_factory=set)  # judges on a continuous scale for every contender
    caller_threads: Callable[[], AbstractContextManager[Any]] = contextlib.nullcontext  # see one_blas_thread
    partly: set[tuple[str, str]] = field(default_factory=set)  # (contender, judge) continuous where others are not
    kappas: dict[tuple[bytes, tuple[int, ...], str | None], float] = field(default_factory=dict)

    def kappa(self, table: np.ndarray, weights: Literal["quadratic", "linear"] | None = "quadratic") -> float:
        """``ag.kappa_from_confusion`` of an integer confusion table, once per distinct table: κ depends on the
        table alone (scikit-learn builds the same integer matrix from pairs or from cells), and a paired
        comparison on units both contenders rated in full has the very table of each contender's own row."""
        t = np.ascontiguousarray(table, dtype=np.int64)
        key = (t.tobytes(), t.shape, weights)
        if key not in self.kappas:
            self.kappas[key] = ag.kappa_from_confusion(t, weights)
        return self.kappas[key]

    def is_continuous(self, contender: str, judge: str) -> bool:
        """Whether ``contender`` is calibrated on ``judge``'s scale as a continuous one (its own scale)."""
        return judge in self.continuous or (contender, judge) in self.partly


@contextlib.contextmanager
def one_blas_thread() -> Iterator[Callable[[], AbstractContextManager[Any]]]:
    """Run with one BLAS thread; yields a context factory that gives back the caller's BLAS threads.

    calibrate's own arithmetic (tables, moments, products of small matrices) gets the same numbers with any number
    of BLAS threads, but every multi-threaded BLAS call leaves its helper threads spinning for a while: on two cores
    that was more than a second of CPU. A library estimate whose last bits depend on the thread count (scipy's
    Pearson r sums its dot product in per-thread parts) runs inside ``caller_threads()``, so it gives exactly what
    the library gives its caller; the stretch is kept short, as the helper threads spin through all of it.
    """
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # scikit-learn depends on it; without it, nothing is limited
        yield contextlib.nullcontext
        return
    # One controller for the whole call: each ``threadpool_limits(...)`` builds its own, which finds the loaded
    # libraries again by reading the process's memory map (about 5 ms; calibrate asks once per row).
    controller = ThreadpoolController()
    caller = {lib["prefix"]: lib["num_threads"] for lib in controller.info() if lib.get("user_api") == "blas"}
    with controller.limit(limits=1, user_api="blas"):
        yield lambda: controller.limit(limits=caller) if caller else contextlib.nullcontext()


@contextlib.contextmanager
def trusted_library_arguments() -> Iterator[None]:
    """scikit-learn without its per-call parameter validation (``skip_parameter_validation``, its public switch):
    calibrate calls its metrics hundreds of times with arguments it built itself, and checking their types and
    options was most of each call's few milliseconds (weighted κ, confusion matrices). The arithmetic and the
    numbers are the library's own either way; only a wrong argument would raise a different error."""
    try:
        import sklearn
    except ImportError:  # pragma: no cover - a dependency
        yield
        return
    with sklearn.config_context(skip_parameter_validation=True):
        yield


@dataclass
class _Group:
    """One contender × judge on one track, with its matched pairs."""

    contender: str
    judge: str
    track: str  # "ordinal" or "verdict"
    pool: str  # pooling key: scale text (ordinal) or "verdict:<family>"
    model: str
    spec_hash: str
    family: str
    categories: np.ndarray  # scale values (ordinal) or verdict classes
    pairs: pd.DataFrame  # ok judgments with a usable value, joined to the consensus
    counts: dict[str, int]
    block: Any = None
    cache: dict[str, Any] = field(default_factory=dict)  # per-group results a pooled row reuses


def _intervals(row: dict[str, Any], reps: dict[str, np.ndarray] | None, names: tuple[str, ...], level: float) -> None:
    for name in names:
        if reps is None:
            row[f"{name}_lo"] = row[f"{name}_hi"] = float("nan")
        else:
            lo, hi = percentile_interval(reps[name], level)
            row[f"{name}_lo"], row[f"{name}_hi"] = float(lo), float(hi)


def _table_reps(ctx: _Context, blocks: list[Any], k: int) -> np.ndarray | None:
    found = [ctx.blocks.get(b) for b in blocks if b is not None]
    if not found or found[0] is None:
        return None
    parts = [p for p in found if p is not None]
    total = np.sum(parts, axis=0)
    return total.reshape(-1, k, k)


def _coverage(matched: pd.DataFrame, cons: pd.DataFrame, judge: str, usable: pd.Series) -> dict[str, int]:
    """Labelled units, judgments of them (a pairwise unit is judged in two orders), abstentions, and units
    this contender never judged; coverage = usable judgments / (judgments + never-judged units)."""
    units = int((cons["judge"] == judge).sum())
    n_judged = len(matched)
    n_abst = int((matched["status"] == "abstained").sum())
    n_ok = int(usable.sum())
    judged_units = int(matched[["item_id", "label_part"]].drop_duplicates().shape[0])
    return {"n_units": units, "n_judged": n_judged, "n_abstained": n_abst,
            "n_no_value": n_judged - n_abst - n_ok, "n_missing": units - judged_units, "n": n_ok}


def _per_rubric_and_pooled(groups: list[_Group], ctx: _Context, make_row: Any) -> tuple[list[dict], list[dict], list[dict], list[dict]]:
    """Rows per rubric, then one pooled row per (contender, pool), with their confusion and reliability rows."""
    rows, pooled, conf_rows, rel_rows = [], [], [], []
    for g in groups:
        row, c, r = make_row([g], ctx, g.judge)
        rows.append(row)
        conf_rows += c
        rel_rows += r
    for gs in pools(groups):
        row, c, r = make_row(gs, ctx, POOLED)
        row["n_judges"] = len(gs)
        pooled.append(row)
        conf_rows += c
        rel_rows += r
    return rows, pooled, conf_rows, rel_rows


def pools(groups: list[_Group]) -> list[list[_Group]]:
    """The groups of each pooled row (one per contender and pool), in the order of the pooled rows."""
    by_pool: dict[tuple[str, str], list[_Group]] = {}
    for g in groups:
        by_pool.setdefault((g.contender, g.pool), []).append(g)
    return [gs for _, gs in sorted(by_pool.items(), key=lambda kv: kv[0])]


COVERAGE_FLOOR = 0.8
"""A contender that judged (ok) fewer than this share of the labelled units it was asked for gets no rank: its
agreement is measured on the units it chose to answer, not on the ones the others were scored on."""


def _rank(frame: pd.DataFrame, key: str, by: str) -> pd.DataFrame:
    """Rank by ``key`` within ``by`` among contenders whose ``coverage`` reaches ``COVERAGE_FLOOR``; the others
    are listed after them with no rank and a note."""
    if frame.empty:
        return frame
    covered = frame["coverage"].fillna(0.0) >= COVERAGE_FLOOR if "coverage" in frame else pd.Series(True, frame.index)
    frame = frame.assign(_below=~covered).sort_values([by, "_below", key], ascending=[True, True, False],
                                                       na_position="last").reset_index(drop=True)
    ranked = frame[key].where(~frame["_below"])
    frame.insert(0, "rank", ranked.groupby(frame[by]).rank(ascending=False, method="min").astype("Int64"))
    if frame["_below"].any():
        text = f"not ranked: coverage below {COVERAGE_FLOOR:g}"
        notes = frame["notes"].fillna("").astype(str) if "notes" in frame else pd.Series("", index=frame.index)
        frame["notes"] = notes.where(~frame["_below"], (notes + "; " + text).str.lstrip("; "))
    return frame.drop(columns="_below")
