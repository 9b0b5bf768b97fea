"""Robustness of judges to perturbed answers, from recorded judgments alone (no human labels needed).

For every judgment of a variant (a perturbed answer) the judgment of its original by the same contender,
judge and part is its pair. Per contender × judge × level, and pooled per contender over its judges
(``judge = "*"``): mean score of originals and variants, mean drop (original − variant) with a cluster
bootstrap interval over original items, the paired P(original > variant) and P(tie), and the unpaired AUC
(Mann–Whitney: P(X_original > X_variant) + ½ P(tie) over all original × variant pairs of scores, the
statistic published rating studies report).

Variants are recognised from (a) ``scijudge perturb`` ids ``<id>::<rubric>::<level>`` (counted only for
the judge whose rubric they target; the ``injection`` probe for every judge, as level
``injection_<level>``), or (b) ``result.variant_of`` / ``result.level`` of imported judgments. A variant
whose text equals its original's (same ``input_hash``, or ``result.changed`` false) is excluded and
counted. Everything is vectorised (pandas group-bys, one sparse bootstrap): 200,000 judgments take seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import sparse

from scijudge.errors import InputError
from scijudge.metrics.bootstrap import bootstrap_sums, percentile_interval
from scijudge.metrics.groups import prepare_judgments
from scijudge.vocab import INJECTION, VARIANT_ID, few_units_note, rubric_of_judge

ALL_JUDGES = "*"
COLUMNS: tuple[str, ...] = ("model", "judge", "level", "n_pairs", "mean_original", "mean_variant", "drop", "drop_lo",
                            "drop_hi", "p_greater", "p_tie", "auc")
EXTRA_COLUMNS: tuple[str, ...] = ("n_unchanged", "n_abstained", "n_unpaired")


@dataclass
class RobustnessResult:
    """The robustness table (``COLUMNS`` + counts) and what was left out, with why."""

    table: pd.DataFrame
    excluded: dict[str, int] = field(default_factory=dict)
    n_boot: int = 1000
    seed: int = 0
    level: float = 0.95
    notes: list[str] = field(default_factory=list)


def _from_result(df: pd.DataFrame) -> pd.DataFrame:
    """variant_of / level / changed of imported rows, read in one pass over the result dicts."""
    cols = ("variant_of", "level", "changed")
    if "result" not in df.columns:
        return pd.DataFrame({c: None for c in cols}, index=df.index, dtype=object)
    values = [(r.get("variant_of"), r.get("level"), r.get("changed")) if isinstance(r, dict) and "variant_of" in r
              else (None, None, None) for r in df["result"].tolist()]
    return pd.DataFrame(values, columns=list(cols), index=df.index, dtype=object)


def label_variants(judgments: pd.DataFrame) -> pd.DataFrame:
    """Run-store rows with ``base_id``, ``level`` ('' for originals), ``targets_judge`` and ``unchanged``."""
    df = prepare_judgments(judgments)
    imported = _from_result(df)
    variant_of = imported["variant_of"]
    maybe = df["item_id"].str.contains("::", regex=False) & variant_of.isna()
    parsed = df.loc[maybe, "item_id"].str.extract(VARIANT_ID).reindex(df.index)
    by_id = parsed["base"].notna()
    df["base_id"] = variant_of.where(variant_of.notna(), parsed["base"]).fillna(df["item_id"]).astype(str)
    injection = by_id & (parsed["rubric"] == INJECTION)
    id_level = parsed["level"].where(~injection, INJECTION + "_" + parsed["level"].astype(str))
    df["level"] = imported["level"].where(variant_of.notna(), id_level).fillna("").astype(str)
    rubric_of = {j: rubric_of_judge(j) for j in df["judge"].unique()}
    targets = ~by_id | injection | (parsed["rubric"] == df["judge"].map(rubric_of))
    df["targets_judge"] = targets.to_numpy()
    df["unchanged"] = imported["changed"].eq(False).to_numpy()  # None (unknown) is not unchanged
    return df


def _pairs(df: pd.DataFrame, excluded: dict[str, int]) -> pd.DataFrame:
    """One row per (variant judgment, its original's judgment) with both scores; counts what was dropped."""
    keys = ["contender", "judge", "part", "base_id"]
    usable = (df["status"] == "ok") & df["score"].notna()
    originals = df[(df["level"] == "") & usable]
    dup = originals.duplicated(keys)
    if dup.any():
        row = originals[dup].iloc[0]
        raise InputError(f"{row['contender']!r} judged original item {row['base_id']!r} with {row['judge']!r} more "
                         "than once; pass each run once", file=row["source"] or None, field="item_id")
    variants = df[(df["level"] != "") & df["targets_judge"]]
    excluded["abstained_or_no_score"] = int((~usable[variants.index]).sum())
    variants = variants[usable[variants.index]]
    if "input_hash" in df.columns:
        same = variants[keys].merge(originals[[*keys, "input_hash"]], on=keys, how="left")["input_hash"].to_numpy()
        mine = variants["input_hash"].fillna("").to_numpy()
        known = mine != ""  # imported rows carry no input hash: their text cannot be compared this way
        variants = variants.assign(unchanged=variants["unchanged"].to_numpy() | (known & (same == mine)))
    excluded["unchanged"] = int(variants["unchanged"].sum())
    variants = variants[~variants["unchanged"]]
    pairs = variants[[*keys, "model", "level", "score"]].merge(
        originals[[*keys, "score"]].rename(columns={"score": "original"}), on=keys, how="left")
    excluded["no_original"] = int(pairs["original"].isna().sum())
    pairs = pairs[pairs["original"].notna()].rename(columns={"score": "variant"})
    excluded["off_target"] = int(((df["level"] != "") & ~df["targets_judge"]).sum())
    return pairs.reset_index(drop=True)


def _with_pooled(pairs: pd.DataFrame) -> pd.DataFrame:
    pooled = pairs.assign(judge=ALL_JUDGES)
    return pd.concat([pairs, pooled], ignore_index=True)


def _auc(frame: pd.DataFrame, groups: list[str]) -> pd.Series:
    """Unpaired AUC per group from mid-ranks: (R_original − n₁(n₁+1)/2) / (n₁·n₂), ties counted one half.

    The originals sample holds each original judgment once (several variants may share one original).
    """
    x = frame.drop_duplicates([*groups, "part", "base_id", "src_judge"])[[*groups, "original"]]
    x = x.rename(columns={"original": "value"}).assign(is_x=1)
    y = frame[[*groups, "variant"]].rename(columns={"variant": "value"}).assign(is_x=0)
    both = pd.concat([x, y], ignore_index=True)
    both["rank"] = both.groupby(groups, sort=False)["value"].rank(method="average")
    agg = both.assign(rx=both["rank"] * both["is_x"]).groupby(groups, sort=False).agg(
        r_x=("rx", "sum"), n_x=("is_x", "sum"), n=("is_x", "size"))
    n_y = agg["n"] - agg["n_x"]
    return (agg["r_x"] - agg["n_x"] * (agg["n_x"] + 1) / 2) / (agg["n_x"] * n_y)


def robustness_table(
    judgments: pd.DataFrame, *, n_boot: int = 1000, seed: int = 0, level: float = 0.95
) -> RobustnessResult:
    """Robustness per model × judge × level and pooled per model (``judge = '*'``); see the module doc."""
    df = label_variants(judgments)
    if not (df["level"] != "").any():
        raise InputError("no perturbed answers in these judgments: judge `scijudge perturb` output (ids "
                         "'<id>::<rubric>::<level>') or import judgments with variant_of and level")
    df = df[df["family"] != "pairwise"]  # a pairwise score is a difference of two answers, not a rating
    excluded: dict[str, int] = {}
    pairs = _pairs(df, excluded)
    result = RobustnessResult(table=pd.DataFrame(columns=[*COLUMNS, *EXTRA_COLUMNS]), excluded=excluded,
                              n_boot=n_boot, seed=seed, level=level)
    if pairs.empty:
        result.notes.append("no variant has a judged original: nothing to compare")
        return result
    pairs["diff"] = pairs["original"] - pairs["variant"]
    pairs["greater"] = (pairs["diff"] > 0).astype(float)
    pairs["tie"] = (pairs["diff"] == 0).astype(float)
    pairs["src_judge"] = pairs["judge"]
    full = _with_pooled(pairs)
    groups = ["contender", "judge", "level"]
    table = full.groupby(groups, sort=True).agg(
        n_pairs=("diff", "size"), mean_original=("original", "mean"), mean_variant=("variant", "mean"),
        drop=("diff", "mean"), p_greater=("greater", "mean"), p_tie=("tie", "mean"))
    table["auc"] = _auc(full, groups)
    lo, hi = _drop_intervals(full, table.index, groups, n_boot, seed, level)
    table["drop_lo"], table["drop_hi"] = lo, hi
    table = table.reset_index().rename(columns={"contender": "model"})
    counts = _counts(df, groups)
    table = table.merge(counts, on=["model", "judge", "level"], how="left")
    for column in EXTRA_COLUMNS:
        table[column] = table[column].fillna(0).astype(int)
    order = {"subtle": 0, "extreme": 1}
    table["_order"] = table["level"].map(lambda v: order.get(v, 2))
    table["_pooled"] = table["judge"] == ALL_JUDGES
    table = table.sort_values(["model", "_pooled", "judge", "_order", "level"]).drop(columns=["_order", "_pooled"])
    result.table = table[[*COLUMNS, *EXTRA_COLUMNS]].reset_index(drop=True)
    if n_boot <= 0:
        result.notes.append("bootstrap disabled (n_boot=0): no intervals")
    items = full.groupby(groups, sort=True)["base_id"].nunique()  # the bootstrap's unit
    result.notes.extend(few_units_note([(" / ".join(key), n) for key, n in items.items()], "original items",
                                       "read the drop's interval, not its point (p_greater and auc carry no interval)"))
    return result


def _counts(df: pd.DataFrame, groups: list[str]) -> pd.DataFrame:
    """Unchanged / abstained / unpaired variant counts per group and pooled, for the table's extra columns."""
    variants = df[(df["level"] != "") & df["targets_judge"]].copy()
    if variants.empty:
        return pd.DataFrame(columns=["model", "judge", "level", *EXTRA_COLUMNS])
    keys = ["contender", "judge", "part", "base_id"]
    ok = (df["status"] == "ok") & df["score"].notna()
    orig_keys = pd.MultiIndex.from_frame(df.loc[(df["level"] == "") & ok, keys])
    variants["n_abstained"] = (~ok[variants.index]).astype(int)
    has_orig = pd.MultiIndex.from_frame(variants[keys]).isin(orig_keys)
    variants["n_unchanged"] = (variants["unchanged"] & ok[variants.index]).astype(int)
    variants["n_unpaired"] = (~has_orig & ok[variants.index] & ~variants["unchanged"]).astype(int)
    full = pd.concat([variants, variants.assign(judge=ALL_JUDGES)], ignore_index=True)
    out = full.groupby(groups)[list(EXTRA_COLUMNS)].sum().reset_index()
    return out.rename(columns={"contender": "model"})


def _drop_intervals(full: pd.DataFrame, index: pd.MultiIndex, groups: list[str], n_boot: int, seed: int,
                    level: float) -> tuple[np.ndarray, np.ndarray]:
    """Percentile intervals of every group's mean drop from one cluster bootstrap over original items."""
    n = len(index)
    if n_boot <= 0:
        return np.full(n, np.nan), np.full(n, np.nan)
    group_idx = index.get_indexer(pd.MultiIndex.from_frame(full[groups]))
    items, item_idx = np.unique(full["base_id"].to_numpy(str), return_inverse=True)
    rows = np.concatenate([item_idx, item_idx])
    cols = np.concatenate([group_idx, group_idx + n])  # [sum of drops | number of pairs] per group
    vals = np.concatenate([full["diff"].to_numpy(float), np.ones(len(full))])
    mat = sparse.csr_matrix((vals, (rows, cols)), shape=(items.size, 2 * n))
    reps = bootstrap_sums(mat, n_boot, seed)
    with np.errstate(divide="ignore", invalid="ignore"):
        means = reps[:, :n] / reps[:, n:]
    lo, hi = percentile_interval(means, level)
    return np.asarray(lo, float), np.asarray(hi, float)
