"""Judgments matched to human consensus scores, one row per scored unit (item, part) with its group.

Matching, consensus and scales are calibration's (``scijudge.metrics.calibration``), imported in one place
so that estimates and agreement tables always see the same human score for a unit.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from scijudge.errors import InputError
from scijudge.metrics.groups import prepare_judgments
from scijudge.vocab import ScaleTuple

ESTIMANDS: dict[str, str] = {"mean": "mean human rating", "median": "median consensus"}
"""What ``human`` is per unit: ``mean`` (default) the mean of its annotators' scores, so the estimate targets the
mean human rating; ``median`` calibration's consensus (the median snapped to the scale)."""
UNIT_COLUMNS = ["source", "judge", "model", "group", "item_id", "part", "pair", "status", "score", "probs", "human"]


@dataclass
class Units:
    """Scored units, the labelled units no judgment matched (counted, never imputed) and each judge's scale."""

    frame: pd.DataFrame
    label_only_counts: dict[tuple[str, str, str], int]  # (judge, model, group) -> labelled units not judged
    scales: dict[str, ScaleTuple]
    estimand: str = "mean"
    notes: list[str] | None = None
    by_run: bool = True  # the groups are the runs (no item meta grouping)
    index: Mapping[tuple[str, str, str], np.ndarray] | None = None  # (judge, model, group) -> rows, sorted

    @property
    def label_only(self) -> pd.DataFrame:
        """judge, model, group, n_label_only: per (judge, model, group), labelled units no judgment matched."""
        rows = [(*key, n) for key, n in sorted(self.label_only_counts.items())]
        return pd.DataFrame(rows, columns=["judge", "model", "group", "n_label_only"])


def calibration_rules() -> Any:
    """The calibration module, whose label checks, consensus, scales, matching and probs parser we reuse."""
    from scijudge.metrics import calibration

    return calibration


def _model_labels(df: pd.DataFrame) -> pd.Series:
    """The model string, plus the endpoint when one model name was served by several, plus the spec hash when
    one model ran several versions of a judge."""
    label = df["model"]
    if "endpoint" in df.columns:  # run stores that record the endpoint (without credentials)
        endpoint = df["endpoint"].astype(object).where(df["endpoint"].notna(), "").astype(str)
        served = df.assign(_e=endpoint).groupby(["judge", "model"])["_e"].transform("nunique")
        label = label.where(served <= 1, label + " @" + endpoint)
    versions = df.assign(_m=label).groupby(["judge", "_m"])["spec_hash"].transform("nunique")
    return label.where(versions <= 1, label + " #" + df["spec_hash"].str.slice(0, 8))


def _lookup(item_ids: pd.Series, mapping: Mapping[str, str], field: str, sources: pd.Series) -> pd.Series:
    values = item_ids.map(mapping)
    missing = values.isna()
    if missing.any():
        item = item_ids[missing].iloc[0]
        raise InputError(f"item {item!r} was judged but is not in the items file, so it has no {field!r}",
                         file=sources[missing].iloc[0] or None, field="item_id")
    return values.astype(str)


_CACHE: OrderedDict[str, _Prepared] = OrderedDict()
_CACHE_SIZE = 8
_FINGERPRINT_COLUMNS = ("item_id", "judge", "part", "family", "spec_hash", "model", "status", "score", "source",
                        "endpoint", "decoding", "verdict", "confidence")


@dataclass
class _Prepared:
    """A judgments frame prepared once and indexed by unit key (item, judge, part): what every call reuses."""

    df: pd.DataFrame  # prepared, current judgment per (run, judge, model, spec, item, part), index 0..m-1
    rows: np.ndarray  # positions of df's rows in the caller's frame (probs are read from it on every call)
    keys: pd.Index  # unit keys "item\x1fjudge\x1fpart" (primary and part-less ones)
    code: np.ndarray  # per row: its unit key's position in ``keys``
    fallback: np.ndarray  # per row: the part-less key's position for pairwise orders AB/BA, -1 otherwise
    judges: list[str]
    scales: dict[str, tuple[dict[str, ScaleTuple], set[str]]]
    text: dict[str, np.ndarray]  # item_id, judge, model, source as object arrays
    base: pd.DataFrame  # UNIT_COLUMNS (group = run, pair = item, no probs, no human): each call's frame starts here
    lookup: dict[str, int]  # unit key -> its position in ``keys``
    jm_code: np.ndarray  # per row: its (judge, model) pair's position in ``jm``
    jm: list[tuple[str, str]]
    by_run_index: dict[tuple[str, str, str], np.ndarray] | None = None  # _combo_index when the groups are runs


def _column_chunks(values: pd.Series) -> list[bytes | memoryview]:
    """The bytes of one column for the cache key: Arrow buffers (with offset and length) for Arrow-backed text,
    the raw buffer for numbers, the joined text for anything else."""
    array = values.array
    if getattr(values.dtype, "storage", None) == "pyarrow":  # pandas' python-storage text has __arrow_array__ too
        arrow = array.__arrow_array__()
        out: list[bytes | memoryview] = []
        for chunk in getattr(arrow, "chunks", [arrow]):
            out.append(f"{chunk.offset}:{len(chunk)}:{chunk.type}".encode())
            out += [memoryview(b) for b in chunk.buffers() if b is not None]
        return out
    raw = values.to_numpy()
    if raw.dtype.kind in "biuf":
        return [str(raw.dtype).encode(), np.ascontiguousarray(raw).tobytes()]
    return ["\x1f".join(map(str, raw)).encode("utf-8", "surrogatepass")]


def _fingerprint(judgments: pd.DataFrame) -> str:
    """A content hash of the columns preparation reads: the cache key (a changed frame is a new entry)."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(str(len(judgments)).encode())
    for column in _FINGERPRINT_COLUMNS:
        if column not in judgments.columns:
            continue
        digest.update(b"\x00" + column.encode() + b"\x00")
        for chunk in _column_chunks(judgments[column]):
            digest.update(chunk)
    return digest.hexdigest()


def _unit_keys(item: Any, judge: Any, part: Any) -> np.ndarray:
    """``item\x1fjudge\x1fpart`` per row (the separator occurs in no id a store or label file accepts)."""
    return np.array([f"{i}\x1f{j}\x1f{p}" for i, j, p in zip(item, judge, part)], dtype=object)


def _prepare(judgments: pd.DataFrame) -> _Prepared:
    """Prepared judgments from the cache, or prepared and indexed now (the only pandas-heavy step)."""
    key = _fingerprint(judgments)
    found = _CACHE.get(key)
    if found is not None:
        _CACHE.move_to_end(key)
        return found
    df = prepare_judgments(judgments.reset_index(drop=True))
    df["_pos"] = np.arange(len(df))
    df = df.assign(model=_model_labels(df))  # the current judgment per (run, judge, model, item, part) counts
    df = df.drop_duplicates(["source", "judge", "model", "spec_hash", "item_id", "part"], keep="last")
    df = df.reset_index(drop=True)
    primary = _unit_keys(df["item_id"], df["judge"], df["part"])
    ordered = df["part"].isin(["AB", "BA"]).to_numpy()
    partless = _unit_keys(df["item_id"], df["judge"], [""] * len(df))
    keys = pd.Index(pd.unique(np.concatenate([primary, partless[ordered]])))
    code = keys.get_indexer(primary)
    fallback = np.full(len(df), -1, dtype=np.int64)
    fallback[ordered] = keys.get_indexer(partless[ordered])
    text = {c: df[c].to_numpy(object) for c in ("item_id", "judge", "model", "source")}
    jm_code, jm = pd.factorize(pd.Series(text["judge"] + "\x1f" + text["model"], dtype=object))
    prepared = _Prepared(df.drop(columns="_pos"), df["_pos"].to_numpy(), keys, code, fallback,
                         sorted(set(df["judge"])), {}, text,
                         df.assign(group=df["source"], pair=df["item_id"], probs=None, human=np.nan)[UNIT_COLUMNS],
                         {k: i for i, k in enumerate(keys)}, jm_code,
                         [tuple(v.split("\x1f", 1)) for v in jm])
    _CACHE[key] = prepared
    while len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return prepared


def _scale_key(scale: Any) -> str:
    if isinstance(scale, Mapping):
        return repr(sorted((str(k), repr(v)) for k, v in scale.items()))
    return repr(scale)


def _scales_of(prepared: _Prepared, scale: Any) -> tuple[dict[str, ScaleTuple], set[str]]:
    """Each judge's scale (calibration's rule), resolved and checked against the judgments once per scale."""
    key = _scale_key(scale)
    if key not in prepared.scales:
        from scijudge.metrics.calibration.scales import resolve_scales

        scales, continuous, _ = resolve_scales(prepared.df, prepared.judges, scale)
        calibration_rules()._validate_scores(prepared.df, _NO_LABELS, scales, continuous)
        prepared.scales[key] = (scales, continuous)
    return prepared.scales[key]


_NO_LABELS = pd.DataFrame({"item_id": pd.Series([], dtype=object), "judge": pd.Series([], dtype=object),
                           "score": pd.Series([], dtype=float)})


@dataclass
class _Labels:
    """Score labels as arrays: one row per label of a judge the runs have."""

    item: np.ndarray
    judge: np.ndarray
    part: np.ndarray
    score: np.ndarray
    n_other: int  # score or verdict labels of judges no run has
    other_judges: list[str]


def _text(values: pd.Series) -> np.ndarray:
    """calibration's ``text_column`` on a small column: missing values become "", the rest ``str``."""
    if isinstance(values.dtype, pd.StringDtype) and not values.hasnans:
        return values.to_numpy(object)
    arr = values.to_numpy(object)
    missing = pd.isna(arr)
    return np.array(["" if m else str(v) for v, m in zip(arr, missing)], dtype=object)


def _label_arrays(labels: Any, judges: Sequence[str]) -> _Labels:
    """The labels' columns as arrays, with calibration's checks (``_prepare_labels``): anything those checks
    would refuse (a missing column, a score that is no number, both or neither of score and verdict, a
    duplicate) goes through ``_prepare_labels`` itself, so the error is calibration's one line."""
    rules = calibration_rules()
    ok = isinstance(labels, pd.DataFrame) and {"item_id", "judge"} <= set(labels.columns) and (
        "score" in labels.columns or "verdict" in labels.columns)
    if ok:
        n = len(labels)
        item, judge = _text(labels["item_id"]), _text(labels["judge"])
        part = _text(labels["part"]) if "part" in labels.columns else np.full(n, "", dtype=object)
        annotator = _text(labels["annotator"]) if "annotator" in labels.columns else np.full(n, "", dtype=object)
        try:
            if "score" not in labels.columns:
                score = np.full(n, np.nan)
            elif labels["score"].dtype.kind in "fiu":
                score = labels["score"].to_numpy(float)
            else:
                score = pd.to_numeric(labels["score"], errors="raise").to_numpy(float)
        except (TypeError, ValueError):
            ok = False
        else:
            verdict = (labels["verdict"].notna().to_numpy() if "verdict" in labels.columns
                       else np.zeros(n, dtype=bool))
            ok = not np.any(np.isnan(score) == ~verdict) and len(set(zip(item, judge, part, annotator))) == n
    if not ok:
        lab = rules._prepare_labels(labels)  # raises calibration's one-line error for refused labels
        item, judge, part = (lab[c].to_numpy(object) for c in ("item_id", "judge", "part"))
        score = lab["score"].to_numpy(float)
    known = np.isin(judge, list(judges))
    other = sorted(set(judge[~known]))
    keep = known & ~np.isnan(score)
    return _Labels(item[keep], judge[keep], part[keep], score[keep], int((~known).sum()), other)


def _check_label_scores(lab: _Labels, scales: Mapping[str, ScaleTuple], continuous: set[str],
                        labels: pd.DataFrame) -> None:
    """Every label score on its judge's scale; the first that is not is reported by calibration's check."""
    from scijudge.metrics.calibration.scales import on_scale, in_range

    for judge, sc in scales.items():
        sel = lab.judge == judge
        if sel.any() and not (in_range if judge in continuous else on_scale)(lab.score[sel], sc).all():
            rules = calibration_rules()
            rules._validate_scores(_NO_JUDGMENTS, rules._prepare_labels(labels), scales, continuous)


_NO_JUDGMENTS = pd.DataFrame({"judge": pd.Series([], dtype=object), "score": pd.Series([], dtype=float),
                              "status": pd.Series([], dtype=object)})


def consensus_arrays(keys: np.ndarray, judge: np.ndarray, score: np.ndarray, scales: Mapping[str, ScaleTuple],
                     continuous: set[str], estimand: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(unique unit keys, human score per key, annotators per key): each unit's mean over its annotators
    (``mean``) or calibration's consensus (``median``: the median snapped to the scale, half-way ties to the
    even step, a continuous scale keeping the median), computed on sorted arrays (the tests check it equals
    ``metrics.calibration.scales._consensus`` and a hand case)."""
    codes, uniq = pd.factorize(keys)
    counts = np.bincount(codes, minlength=uniq.size)
    if estimand == "mean":
        return np.asarray(uniq, object), np.bincount(codes, weights=score, minlength=uniq.size) / counts, counts
    order = np.lexsort((score, codes))
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    ordered = score[order]
    median = (ordered[starts + (counts - 1) // 2] + ordered[starts + counts // 2]) / 2.0
    first_judge = judge[order][starts]
    lo = np.array([scales[j][0] for j in first_judge], dtype=float)
    step = np.array([scales[j][2] for j in first_judge], dtype=float)
    snapped = lo + np.round((median - lo) / step) * step
    keep = np.array([j in continuous for j in first_judge], dtype=bool)
    return np.asarray(uniq, object), np.where(keep, median, snapped), counts


def match_units(judgments: pd.DataFrame, labels: pd.DataFrame, *, groups: Mapping[str, str] | None = None,
                pairs: Mapping[str, str] | None = None, group_field: str = "group",
                scale: Any = None, estimand: str = "mean") -> Units:
    """Join run-store rows with human scores; group by ``groups[item_id]`` or, without it, by run.

    ``judgments``: run-store rows or a minimal frame (``metrics.frames.complete_judgments`` fills the rest).
    ``scale`` as in ``calibrate`` (``(lo, hi, step[, "continuous"])``, or a mapping judge -> scale);
    ``estimand`` is ``mean`` (each unit's mean over its annotators: the mean human rating) or ``median``
    (calibration's median consensus). Labels that match no judgment at all are an error; labels of judges
    no run has are left out and counted in ``notes``.

    The judgments are prepared and indexed by unit key once per distinct frame (a content hash is the key of
    a small cache); each call then joins its labels by array lookups, so repeated estimates over new label
    sets (simulations, planners) pay only for the labels.
    """
    if estimand not in ESTIMANDS:
        raise InputError(f"unknown estimand {estimand!r}: use {' or '.join(ESTIMANDS)}", field="human")
    prep = _prepare(judgments)
    df = prep.df
    lab = _label_arrays(labels, prep.judges)
    notes: list[str] = []
    if lab.n_other:
        names = lab.other_judges
        notes.append(f"{lab.n_other} label(s) of judge(s) no run has were left out: {', '.join(names[:5])}"
                     + (" ..." if len(names) > 5 else ""))
    scales, continuous = _scales_of(prep, scale)
    _check_label_scores(lab, scales, continuous, labels)
    if not lab.score.size:
        raise InputError("no score label of a judge in the runs: nothing to estimate the human mean from"
                         + (f" ({notes[0]})" if notes else ""), field="labels")
    ukeys, h, _ = consensus_arrays(_unit_keys(lab.item, lab.judge, lab.part), lab.judge, lab.score, scales,
                                   continuous, estimand)
    by_code = np.full(len(prep.keys), np.nan)
    where = np.fromiter((prep.lookup.get(k, -1) for k in ukeys), dtype=np.int64, count=len(ukeys))
    by_code[where[where >= 0]] = h[where >= 0]
    human = by_code[prep.code]
    ordered = prep.fallback >= 0
    use_fallback = ordered & np.isnan(human)
    human[use_fallback] = by_code[prep.fallback[use_fallback]]
    if not np.isfinite(human).any():
        raise InputError(
            f"no judgment matches a label on (item_id, judge, part): the runs judged {df['item_id'].nunique()} "
            f"items with {prep.judges[:4]}, the labels cover {len(set(lab.item))} items; check the ids",
            field="labels")
    group, pair = prep.text["source"], prep.text["item_id"]
    if groups is not None or pairs is not None:
        items = pd.Series(prep.text["item_id"], dtype=object)
        sources = pd.Series(prep.text["source"], dtype=object)
        if groups is not None:
            group = _lookup(items, groups, group_field, sources).to_numpy(object)
        if pairs is not None:
            pair = _lookup(items, pairs, "pair field", sources).to_numpy(object)
    probs = judgments["probs"].to_numpy(object)[prep.rows] if "probs" in judgments.columns else None
    frame = prep.base.copy(deep=False)
    if groups is not None:
        frame["group"] = group
    if pairs is not None:
        frame["pair"] = pair
    if probs is not None:
        frame["probs"] = probs
    frame["human"] = human
    if groups is None:
        if prep.by_run_index is None:
            prep.by_run_index = _combo_index(prep, group)
        index = prep.by_run_index
    else:
        index = _combo_index(prep, group)
    label_only = _label_only(human, prep, index, ukeys, groups)
    n_unmatched = int(sum(label_only.values()))
    if n_unmatched:
        notes.append(f"{n_unmatched} labelled unit(s) have no judgment of some model (counted as n_label_only, "
                     "never imputed)")
    return Units(frame, label_only, scales, estimand, notes, by_run=groups is None, index=index)


def _combo_index(prep: _Prepared, group: np.ndarray) -> dict[tuple[str, str, str], np.ndarray]:
    """(judge, model, group) -> row positions, in sorted key order (what ``groupby(sort=True).indices`` gives)."""
    g_code, g_values = pd.factorize(pd.Series(group, dtype=object))
    combined = prep.jm_code.astype(np.int64) * max(len(g_values), 1) + g_code
    uniq, inverse = np.unique(combined, return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    bounds = np.cumsum(np.bincount(inverse, minlength=uniq.size))[:-1]
    index = {(*prep.jm[int(c) // max(len(g_values), 1)], str(g_values[int(c) % max(len(g_values), 1)])): rows
             for c, rows in zip(uniq, np.split(order, bounds))}
    return dict(sorted(index.items()))


def _label_only(human: np.ndarray, prep: _Prepared, index: Mapping[tuple[str, str, str], np.ndarray],
                ukeys: np.ndarray, groups: Mapping[str, str] | None) -> dict[tuple[str, str, str], int]:
    """Per (judge, model, group): human-labelled units of that judge (and group) that no judgment matched.

    The labelled units of the judge (and group) minus those matched to a judgment of that model; the
    pairwise orders AB/BA of one item share a part-less label, so they count once.
    """
    unit = np.where(prep.fallback >= 0, prep.fallback, prep.code)
    matched = np.isfinite(human)
    label_judge = [k.split("\x1f", 2)[1] for k in ukeys]
    label_group: list[str | None] = [None] * len(ukeys) if groups is None else [
        None if (g := groups.get(k.split("\x1f", 1)[0])) is None else str(g) for k in ukeys]
    counted: dict[tuple[str, str | None], int] = {}
    for j, g in zip(label_judge, label_group):
        counted[(j, g)] = counted.get((j, g), 0) + 1
    counts: dict[tuple[str, str, str], int] = {}
    for (judge, model, group), positions in index.items():
        seen = np.unique(unit[positions][matched[positions]]).size
        labelled = counted.get((judge, None if groups is None else group), 0)
        counts[(judge, model, group)] = labelled - seen
    return counts


def item_meta_map(items: Any, field: str, *, path: Any = None) -> dict[str, str]:
    """``item id -> str(meta[field])`` from loaded items; an item without the field is an error naming its line."""
    mapping: dict[str, str] = {}
    for item in items:
        meta = item.meta if hasattr(item, "meta") else dict(item.get("meta") or {})
        item_id = item.id if hasattr(item, "id") else str(item["id"])
        if field not in meta or meta[field] is None:
            file, line = item.origin if hasattr(item, "origin") else (None, None)
            raise InputError(f"item {item_id!r} has no meta field {field!r} to group or pair by",
                             file=file or path, line=line,
                             field=f"meta.{field}")
        mapping[item_id] = str(meta[field])
    return mapping
