"""System-level estimates of the mean human score per (judge, model, group): PPI++ beside human-only and
judge-only, differences between groups, and how many labels a target interval width needs.

All three methods use the units the judge scored (status ``ok``), so they estimate the same quantity;
abstentions and labelled units without a judgment are counted (``n_abstained``, ``n_label_only``), never
imputed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from scijudge.errors import InputError
from scijudge.estimation._units import Units, match_units
from scijudge.estimation.ppi import Estimate, classical_mean, difference, labels_needed, ppi_mean

METHODS = ("ppi", "human-only", "judge-only")
ESTIMATE_COLUMNS = [
    "judge", "model", "group", "method", "estimate", "lo", "hi", "se", "n_labeled", "n_unlabeled",
    "n_abstained", "n_label_only", "lam", "kind", "paired", "alpha", "estimand",
]
_DIMENSIONS = ("judge", "model", "group")  # the order of the per-(judge, model, group) keys
_SEARCH = ("group", "model", "judge")  # which dimension two --compare names are looked up in, first to last


def _three(sub: pd.DataFrame, alpha: float) -> dict[str, Estimate]:
    ok = (sub["status"] == "ok") & sub["score"].notna()
    labeled = ok & sub["human"].notna()
    unlabeled = ok & sub["human"].isna()
    y, f = sub.loc[labeled, "human"].to_numpy(), sub.loc[labeled, "score"].to_numpy()
    f_u = sub.loc[unlabeled, "score"].to_numpy()
    return {
        "ppi": ppi_mean(y, f, f_u, alpha),
        "human-only": classical_mean(y, alpha),
        "judge-only": classical_mean(sub.loc[ok, "score"].to_numpy(), alpha, n_labeled=0,
                                     n_unlabeled=int(ok.sum())),
    }


def _paired_three(a: pd.DataFrame, b: pd.DataFrame, alpha: float) -> dict[str, Estimate]:
    """PPI++ on per-pair differences (pairs where both sides were scored; labelled when both are labelled)."""
    keys = ["pair", "part"]
    both = a.merge(b, on=keys, suffixes=("_a", "_b"))
    ok = (both["status_a"] == "ok") & (both["status_b"] == "ok") & both["score_a"].notna() & both["score_b"].notna()
    d_f = (both["score_a"] - both["score_b"]).to_numpy()
    d_y = (both["human_a"] - both["human_b"]).to_numpy()
    labeled = (ok & both["human_a"].notna() & both["human_b"].notna()).to_numpy()
    unlabeled = ok.to_numpy() & ~labeled
    return {
        "ppi": ppi_mean(d_y[labeled], d_f[labeled], d_f[unlabeled], alpha),
        "human-only": classical_mean(d_y[labeled], alpha),
        "judge-only": classical_mean(d_f[ok.to_numpy()], alpha, n_labeled=0, n_unlabeled=int(ok.sum())),
    }


def _rows(judge: str, model: str, group: str, results: Mapping[str, Estimate], *, n_abstained: int,
          n_label_only: int, kind: str, paired: bool | None, alpha: float,
          estimand: str = "mean") -> list[dict[str, Any]]:
    from scijudge.estimation._units import ESTIMANDS

    out = []
    for method in METHODS:
        row = {"judge": judge, "model": model, "group": group, "method": method, **results[method].as_dict(),
               "n_abstained": n_abstained, "n_label_only": n_label_only, "kind": kind, "paired": paired,
               "alpha": alpha, "estimand": ESTIMANDS.get(estimand, estimand)}
        if method != "ppi":
            row["lam"] = math.nan
        out.append(row)
    return out


def estimate_units(units: Units, *, compare: Sequence[str] | None = None, alpha: float = 0.05) -> pd.DataFrame:
    """The estimate table from matched units (see ``estimate``)."""
    frame, rows = units.frame, []
    label_only = units.label_only.set_index(["judge", "model", "group"])["n_label_only"]
    per_key: dict[tuple[str, str, str], pd.DataFrame] = {}
    for (judge, model, group), sub in frame.groupby(["judge", "model", "group"], sort=True):
        per_key[(judge, model, group)] = sub
        rows += _rows(judge, model, group, _three(sub, alpha), n_abstained=int((sub["status"] == "abstained").sum()),
                      n_label_only=int(label_only.get((judge, model, group), 0)), kind="mean", paired=None,
                      alpha=alpha, estimand=units.estimand)
    if compare:
        rows += _compare_rows(per_key, label_only, compare, alpha, units.estimand, by_run=units.by_run)
    return pd.DataFrame(rows, columns=ESTIMATE_COLUMNS)


def _compare_rows(per_key: dict[tuple[str, str, str], pd.DataFrame], label_only: pd.Series,
                  compare: Sequence[str], alpha: float, estimand: str = "mean",
                  by_run: bool = True) -> list[dict[str, Any]]:
    """``A - B`` where A and B are two groups (runs or --by values), two models or two judges: one row set per
    combination of the other two, paired on shared (pair, part) keys, independent otherwise. Two models or
    judges of different runs are compared when the groups are the runs (``by_run``)."""
    if len(compare) != 2 or compare[0] == compare[1]:
        raise InputError(f"compare needs two different groups, got {list(compare)}", field="compare")
    name_a, name_b = (str(c) for c in compare)
    values = {dim: {key[i] for key in per_key} for i, dim in enumerate(_DIMENSIONS)}
    dims = [d for d in _SEARCH if name_a in values[d] and name_b in values[d]]
    if not dims:
        missing = name_b if any(name_a in v for v in values.values()) else name_a
        raise InputError(f"no group named {missing!r}: compare two groups ({', '.join(sorted(values['group']))}), "
                         f"two models ({', '.join(sorted(values['model']))}) or two judges "
                         f"({', '.join(sorted(values['judge'])[:6])})", field="compare")
    for dim in dims:  # two runs named like their models: the groups share no judge and model, the models do
        rows = _compare_along(per_key, label_only, dim, name_a, name_b, alpha, estimand, by_run)
        if rows:
            return rows
    others = " and ".join(d for d in _DIMENSIONS if d != dims[0])
    raise InputError(f"{dims[0]}s {name_a!r} and {name_b!r} never occur with the same {others}: nothing to "
                     "compare", field="compare")


def _compare_along(per_key: dict[tuple[str, str, str], pd.DataFrame], label_only: pd.Series, dim: str,
                   name_a: str, name_b: str, alpha: float, estimand: str, by_run: bool) -> list[dict[str, Any]]:
    axis = _DIMENSIONS.index(dim)
    sides: dict[tuple[str, str, str], list[tuple[tuple[str, str, str], pd.DataFrame]]] = {}
    for key, sub in per_key.items():
        reduced = (key[0], key[1], "" if dim != "group" and by_run else key[2])
        sides.setdefault(reduced, []).append((key, sub))
    rest = sorted({tuple(v for i, v in enumerate(key) if i != axis) for key in sides})
    rows = []
    for other in rest:
        ka = tuple([*other[:axis], name_a, *other[axis:]])
        kb = tuple([*other[:axis], name_b, *other[axis:]])
        if ka not in sides or kb not in sides:
            continue
        a = pd.concat([sub for _, sub in sides[ka]], ignore_index=True)
        b = pd.concat([sub for _, sub in sides[kb]], ignore_index=True)
        for name, side in ((name_a, a), (name_b, b)):
            twice = side.duplicated(["pair", "part"])
            if twice.any():
                key = side.loc[twice, "pair"].iloc[0]
                raise InputError(f"{dim} {name!r} holds pair key {key!r} more than once: pair items by a field "
                                 "that is unique within each group", field="pair_by")
        shared = bool(pd.Index(a["pair"] + "\0" + a["part"]).isin(b["pair"] + "\0" + b["part"]).any())
        if shared:
            results = _paired_three(a, b, alpha)
        else:
            ea, eb = _three(a, alpha), _three(b, alpha)
            results = {m: difference(ea[m], eb[m], alpha) for m in METHODS}
        n_abs = int((a["status"] == "abstained").sum() + (b["status"] == "abstained").sum())
        n_lo = int(sum(label_only.get(k, 0) for k, _ in sides[ka] + sides[kb]))
        label = list(ka)
        label[axis] = f"{name_a} - {name_b}"
        if not label[2]:
            label[2] = " - ".join("+".join(sorted({k[2] for k, _ in sides[s]})) for s in (ka, kb))
        rows += _rows(label[0], label[1], label[2], results, n_abstained=n_abs, n_label_only=n_lo,
                      kind="difference", paired=bool(shared), alpha=alpha, estimand=estimand)
    return rows


def estimate(judgments: pd.DataFrame, labels: pd.DataFrame, *, groups: Mapping[str, str] | None = None,
             pairs: Mapping[str, str] | None = None, compare: Sequence[str] | None = None, alpha: float = 0.05,
             scale: Any = None, estimand: str = "mean") -> pd.DataFrame:
    """Mean human score per (judge, model, group) by PPI++, human-only and judge-only, with (1 - alpha) intervals.

    Args:
        judgments: run-store rows (``Run(path).to_pandas()``, several runs concatenated with a ``source`` column).
        labels: human labels (``labels_to_frame(load_labels(path))``); several annotators → calibration's consensus.
        groups: ``item_id -> group`` (e.g. the system that wrote the answer); ``None`` groups by run (``source``).
        pairs: ``item_id -> pair key`` for paired differences (e.g. the question both systems answered);
            ``None`` pairs by item id. A difference is paired when the two groups share pair keys.
        compare: two group names, two models or two judges: adds rows ``kind="difference"`` for ``A - B``.
        alpha: 1 - the interval's coverage.
        scale: score scale(s) as in ``calibrate``, ``(lo, hi, step, "continuous")`` included (default: the
            judge's spec or family).
        estimand: ``mean`` (default): the mean human rating (each unit's mean over its annotators, averaged
            over units); ``median``: the median consensus snapped to the scale, as ``calibrate`` uses.
    """
    units = match_units(judgments, labels, groups=groups, pairs=pairs, scale=scale, estimand=estimand)
    return estimate_units(units, compare=compare, alpha=alpha)


def labels_needed_units(units: Units, width: float, alpha: float = 0.05) -> pd.DataFrame:
    """Per (judge, model, group): labels needed for an interval of ``width`` with PPI++ and with humans only."""
    rows = []
    for (judge, model, group), sub in units.frame.groupby(["judge", "model", "group"], sort=True):
        ok = (sub["status"] == "ok") & sub["score"].notna()
        labeled, unlabeled = ok & sub["human"].notna(), ok & sub["human"].isna()
        n_ppi, n_human = labels_needed(sub.loc[labeled, "human"].to_numpy(), sub.loc[labeled, "score"].to_numpy(),
                                       sub.loc[unlabeled, "score"].to_numpy(), width, alpha)
        rows.append({"judge": judge, "model": model, "group": group, "n_pilot": int(labeled.sum()),
                     "n_unlabeled": int(unlabeled.sum()), "target_width": width, "labels_ppi": n_ppi,
                     "labels_human_only": n_human})
    return pd.DataFrame(rows)


