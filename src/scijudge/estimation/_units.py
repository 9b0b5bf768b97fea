"""Judgments matched to human consensus scores, one row per scored unit (item, part) with its group.

Matching, consensus and scales are calibration's (``scijudge.metrics.calibration``), imported in one place
so that estimates and agreement tables always see the same human score for a unit.
"""

from __future__ import annotations

from collections.abc import Mapping
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
    label_only: pd.DataFrame  # judge, model, group, n_label_only
    scales: dict[str, ScaleTuple]
    estimand: str = "mean"
    notes: list[str] | None = None
    by_run: bool = True  # the groups are the runs (no item meta grouping)


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


def match_units(judgments: pd.DataFrame, labels: pd.DataFrame, *, groups: Mapping[str, str] | None = None,
                pairs: Mapping[str, str] | None = None, group_field: str = "group",
                scale: Any = None, estimand: str = "mean") -> Units:
    """Join run-store rows with human scores; group by ``groups[item_id]`` or, without it, by run.

    ``scale`` as in ``calibrate`` (``(lo, hi, step[, "continuous"])``, or a mapping judge -> scale);
    ``estimand`` is ``mean`` (each unit's mean over its annotators: the mean human rating) or ``median``
    (calibration's median consensus). Labels that match no judgment at all are an error; labels of judges
    no run has are left out and counted in ``notes``.
    """
    if estimand not in ESTIMANDS:
        raise InputError(f"unknown estimand {estimand!r}: use {' or '.join(ESTIMANDS)}", field="human")
    rules = calibration_rules()
    from scijudge.metrics.calibration.scales import _resolve_scales

    df = prepare_judgments(judgments)
    df = df.assign(model=_model_labels(df))  # the current judgment per (run, judge, model, item, part) counts
    df = df.drop_duplicates(["source", "judge", "model", "spec_hash", "item_id", "part"], keep="last")
    df["group"] = df["source"] if groups is None else _lookup(df["item_id"], groups, group_field, df["source"])
    df["pair"] = df["item_id"] if pairs is None else _lookup(df["item_id"], pairs, "pair field", df["source"])
    lab = rules._prepare_labels(labels)
    judges = sorted(set(df["judge"]))
    notes: list[str] = []
    other = lab[~lab["judge"].isin(judges)]
    if len(other):
        names = sorted(other["judge"].unique())
        notes.append(f"{len(other)} label(s) of judge(s) no run has were left out: {', '.join(names[:5])}"
                     + (" ..." if len(names) > 5 else ""))
    lab = lab[lab["judge"].isin(judges)]
    scales, continuous, _ = _resolve_scales(df, judges, scale)
    rules._validate_scores(df, lab, scales, continuous)
    consensus, _, _ = rules._consensus(lab, scales, continuous)
    if estimand == "mean":
        keys = ["item_id", "judge", "part"]
        means = lab[lab["score"].notna()].groupby(keys, sort=False)["score"].mean().rename("h_mean").reset_index()
        consensus = consensus.merge(means, on=keys, how="left").assign(h_score=lambda c: c["h_mean"])
        consensus = consensus.drop(columns="h_mean")
    df = df.reset_index(drop=True)
    df["_row"] = np.arange(len(df))
    matched = rules._attach(df, consensus)
    if len(consensus) and matched.empty:
        raise InputError(
            f"no judgment matches a label on (item_id, judge, part): the runs judged {df['item_id'].nunique()} "
            f"items with {judges[:4]}, the labels cover {lab['item_id'].nunique()} items; check the ids",
            field="labels")
    if not len(consensus):
        raise InputError("no score label of a judge in the runs: nothing to estimate the human mean from"
                         + (f" ({notes[0]})" if notes else ""), field="labels")
    df["human"] = np.nan
    df.loc[matched["_row"].to_numpy(), "human"] = matched["h_score"].to_numpy()
    label_only = _label_only(df, consensus, groups)
    n_unmatched = int(label_only["n_label_only"].sum())
    if n_unmatched:
        notes.append(f"{n_unmatched} labelled unit(s) have no judgment of some model (counted as n_label_only, "
                     "never imputed)")
    return Units(df[UNIT_COLUMNS].copy(), label_only, scales, estimand, notes, by_run=groups is None)


def _label_only(df: pd.DataFrame, consensus: pd.DataFrame, groups: Mapping[str, str] | None) -> pd.DataFrame:
    """Per (judge, model, group): human-labelled units of that judge (and group) that no judgment matched.

    The labelled units of the judge (and group) minus those matched to a judgment of that model; the
    pairwise orders AB/BA of one item share a part-less label, so they count once.
    """
    keys = consensus[["item_id", "judge", "part"]].drop_duplicates()
    on = ["judge"]
    if groups is not None:
        keys = keys.assign(group=keys["item_id"].map(groups))
        on.append("group")
    labelled = keys.groupby(on, sort=False).size().rename("n_labels").reset_index()
    matched = df[df["human"].notna()]
    label_part = matched["part"].where(~matched["part"].isin(["AB", "BA"]), "")
    matched = matched.assign(part=label_part).drop_duplicates(["judge", "model", "group", "item_id", "part"])
    counts = matched.groupby(["judge", "model", "group"], sort=False).size().rename("n_matched")
    combos = df[["judge", "model", "group"]].drop_duplicates().merge(labelled, on=on, how="left")
    combos = combos.merge(counts.reset_index(), on=["judge", "model", "group"], how="left").fillna(
        {"n_labels": 0, "n_matched": 0})
    combos["n_label_only"] = (combos["n_labels"] - combos["n_matched"]).astype(int)
    return combos[["judge", "model", "group", "n_label_only"]].sort_values(["judge", "model", "group"])


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
