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

import numpy as np
import pandas as pd

from scijudge.errors import InputError
from scijudge.estimation._units import ESTIMANDS, Units, match_units
from scijudge.estimation.calibrated import joint_columns, ppi_cal_joint_mean, ppi_cal_mean
from scijudge.estimation.ppi import (
    Estimate,
    classical_mean,
    difference,
    labels_needed,
    ppi_mean,
    reference_width,
    with_t,
)
from scijudge.vocab import FEW_UNITS

METHODS = ("ppi", "ppi-cal", "human-only", "judge-only")
"""``ppi``: PPI++ (equal to ppi-python); ``ppi-cal``: PPI++ on a cross-fitted isotonic calibration of the judge's
score (``calibrated.py``); ``human-only``: the labels alone; ``judge-only``: the judge alone (biased when it is)."""
CORRECTED = ("ppi", "ppi-cal")  # the label-corrected estimators one of which is ``recommended``
ESTIMATE_COLUMNS = [
    "judge", "model", "group", "method", "estimate", "lo", "hi", "se", "n_labeled", "n_unlabeled",
    "n_abstained", "n_label_only", "lam", "kind", "paired", "alpha", "estimand", "design", "recommended", "note",
]
SRS_DESIGN = "labels as a simple random sample"
JUDGE_ONLY_DESIGN = "no labels: the judge's scores on every scored unit"
_DIMENSIONS = ("judge", "model", "group")  # the order of the per-(judge, model, group) keys
_SEARCH = ("group", "model", "judge")  # which dimension two --compare names are looked up in, first to last


def _three(sub: pd.DataFrame, alpha: float) -> dict[str, Estimate]:
    return _three_arrays((sub["status"] == "ok").to_numpy(), sub["score"].to_numpy(float),
                         sub["human"].to_numpy(float), alpha)


def _three_arrays(is_ok: np.ndarray, score: np.ndarray, human: np.ndarray, alpha: float) -> dict[str, Estimate]:
    """PPI++, human-only and judge-only on one (judge, model, group)'s scored units."""
    ok = is_ok & ~np.isnan(score)
    labeled = ok & ~np.isnan(human)
    unlabeled = ok & np.isnan(human)
    y, f = human[labeled], score[labeled]
    return {
        "ppi": with_t(ppi_mean(y, f, score[unlabeled], alpha), alpha),
        "ppi-cal": ppi_cal_mean(y, f, score[unlabeled], alpha),
        "human-only": with_t(classical_mean(y, alpha), alpha),
        "judge-only": classical_mean(score[ok], alpha, n_labeled=0, n_unlabeled=int(ok.sum())),
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
        "ppi": with_t(ppi_mean(d_y[labeled], d_f[labeled], d_f[unlabeled], alpha), alpha),
        "ppi-cal": ppi_cal_mean(d_y[labeled], d_f[labeled], d_f[unlabeled], alpha),
        "human-only": with_t(classical_mean(d_y[labeled], alpha), alpha),
        "judge-only": classical_mean(d_f[ok.to_numpy()], alpha, n_labeled=0, n_unlabeled=int(ok.sum())),
    }


def _designed_three(sub: pd.DataFrame, picks: pd.DataFrame, alpha: float,
                    paired_with: pd.DataFrame | None = None) -> tuple[dict[str, Estimate], str, dict[str, set[str]]]:
    """The three estimates when labels were chosen by a design (``select-labels`` picks): active (IPW) PPI, or
    stratified PPI++ for stratified picks; the human-only estimate weighted the same way. Only labels of picked
    items count (labels of other items would break the design's weights); every scored item of the design is
    part of the estimate, labelled or not."""
    from scijudge.estimation import active

    frame = sub if paired_with is None else _paired_frame(sub, paired_with)
    ok = (frame["status"] == "ok") & frame["score"].notna()
    merged = frame[ok].merge(picks[["item_id", "pi", "picked", *(["stratum"] if "stratum" in picks else [])]],
                             on="item_id", how="left")
    merged = merged[merged["pi"].notna()]
    if merged.empty:
        raise InputError("no scored item of this judge is in the picks file: pass the picks made for these runs",
                         field="picks")
    picked = merged["picked"].astype(bool).to_numpy()
    labelled = merged["human"].notna().to_numpy()
    use = picked & labelled
    ids = merged["item_id"].to_numpy(object)
    counts = {"labels_outside_design": set(ids[labelled & ~picked]), "picked_unlabelled": set(ids[picked & ~labelled]),
              "items_outside_picks": set(frame.loc[ok, "item_id"][~frame.loc[ok, "item_id"].isin(picks["item_id"])])}
    f = merged["score"].to_numpy(float)
    y = merged["human"].to_numpy(float)
    pi = merged["pi"].to_numpy(float)
    design = str(picks["design"].iloc[0]) if "design" in picks and len(picks) else "picks"
    if design == "stratified" and "stratum" in merged:
        strata = merged["stratum"].astype(str).to_numpy()
        ppi = active.stratified_ppi_mean(f, use, y[use], strata, alpha=alpha, quantile="t")
        human = active.stratified_ppi_mean(f, use, y[use], strata, alpha=alpha, lam=0.0, quantile="t")
        label = "stratified picks, stratified PPI++, t interval"
    else:
        ppi = active.active_ppi_mean(f, use, y[use], pi, alpha=alpha, quantile="t")
        human = active.ipw_human_mean(use, y[use], pi, alpha=alpha, quantile="t")
        label = f"{design} picks, active PPI (Hajek weights 1/pi), t interval"
    judge_only = classical_mean(f, alpha, n_labeled=0, n_unlabeled=int(f.size))

    def plain(e: Any) -> Estimate:  # the small-sample t interval (Kish / Welch-Satterthwaite df: see active.py)
        return Estimate(e.estimate, e.lo, e.hi, e.se, e.n_labeled, e.n_unlabeled, e.lam, e.df)

    return {"ppi": plain(ppi), "human-only": plain(human), "judge-only": judge_only}, label, counts


def _paired_frame(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """Per shared (pair, part): the difference A - B of scores and of human scores, keyed by A's item id."""
    both = a.merge(b, on=["pair", "part"], suffixes=("", "_b"))
    ok = (both["status"] == "ok") & (both["status_b"] == "ok")
    out = both[["item_id", "part", "pair"]].copy()
    out["status"] = ok.map({True: "ok", False: "abstained"})
    out["score"] = both["score"] - both["score_b"]
    out["human"] = both["human"] - both["human_b"]
    return out


def _rows(judge: str, model: str, group: str, results: Mapping[str, Estimate], *, n_abstained: int,
          n_label_only: int, kind: str, paired: bool | None, alpha: float,
          estimand: str = "mean", design: str = SRS_DESIGN) -> list[dict[str, Any]]:
    out = []
    best = recommended_method(results)
    for method in METHODS:
        if method not in results:  # ppi-cal is not defined for designed picks (inverse-probability weights)
            continue
        row = {"judge": judge, "model": model, "group": group, "method": method, **results[method].as_dict(),
               "n_abstained": n_abstained, "n_label_only": n_label_only, "kind": kind, "paired": paired,
               "alpha": alpha, "estimand": ESTIMANDS.get(estimand, estimand), "design": design,
               "recommended": method == best}
        if method not in CORRECTED:
            row["lam"] = math.nan
        if method == "judge-only":
            row["design"] = JUDGE_ONLY_DESIGN
        out.append(row)
    return out


SIMPLER_FIRST = ("human-only", "ppi", "ppi-cal")
"""The label-using methods from the simplest: a tie goes to the earlier one."""
REFERENCE_ALPHA = 0.1
"""The one alpha at which the recommendation compares widths, whatever alpha the table is for."""
TIE = 1e-9
"""Widths within this relative difference are a tie (ppi equals human-only, up to rounding, when every unit is
labelled)."""


def recommended_method(results: Mapping[str, Estimate]) -> str | None:
    """The label-using estimate (``ppi``, ``ppi-cal`` or ``human-only``) with the narrowest interval at
    ``REFERENCE_ALPHA`` (each with its own normal or t quantile): one choice for every alpha. A tie (within ``TIE``)
    goes to the simpler method; an interval of zero width (a difference that is 0 by construction, labels that
    do not vary) is never recommended; None when nothing has an interval."""
    widths = {m: reference_width(results[m].se, results[m].df, REFERENCE_ALPHA) for m in SIMPLER_FIRST
              if m in results}
    finite = {m: w for m, w in widths.items() if math.isfinite(w) and w > 0}
    if not finite:
        return None
    best = min(finite.values())
    return next(m for m in SIMPLER_FIRST if m in finite and finite[m] <= best * (1.0 + TIE))


def _flag_rows(table: pd.DataFrame, units: Units) -> pd.DataFrame:
    """The ``note`` column: intervals that carry less information than they seem to.

    * ``few units (n < 30)``: the normal/t interval rests on fewer than 30 labelled (judge-only: scored) units;
    * ``zero width: identical values``: a finite interval of width 0 (one or two units, or no spread);
    * ``identical inputs``: a difference whose two sides are the same scores and labels (a run with itself);
    * ``clipped to the scale lo..hi``: a mean lies on its judge's scale and a difference within +-(hi - lo), so
      an interval reaching beyond is cut there (the estimand cannot be outside; coverage is unchanged).
    """
    method, kind = table["method"].to_numpy(object), table["kind"].to_numpy(object)
    lo, hi = table["lo"].to_numpy(float).copy(), table["hi"].to_numpy(float).copy()
    n = np.where(method == "judge-only", table["n_unlabeled"].to_numpy(), table["n_labeled"].to_numpy())
    est, se = table["estimate"].to_numpy(float), table["se"].to_numpy(float)
    scales = [units.scales.get(j) for j in table["judge"]]
    notes: list[str] = []
    for k in range(len(table)):
        parts: list[str] = []
        if n[k] < FEW_UNITS:
            parts.append(f"few units (n = {int(n[k])} < {FEW_UNITS})")
        if math.isfinite(lo[k]) and hi[k] - lo[k] == 0:
            parts.append("zero width: identical values")
        if kind[k] == "difference" and est[k] == 0 and se[k] == 0:
            parts.append("identical inputs")
        sc = scales[k]
        if sc is not None and math.isfinite(lo[k]):
            low, high = (sc[0], sc[1]) if kind[k] == "mean" else (sc[0] - sc[1], sc[1] - sc[0])
            if lo[k] < low or hi[k] > high:
                lo[k], hi[k] = max(lo[k], low), min(hi[k], high)
                parts.append(f"clipped to the scale {low:g}..{high:g}")
        notes.append("; ".join(parts))
    return table.assign(lo=lo, hi=hi, note=notes)


def estimate_units(units: Units, *, compare: Sequence[str] | None = None, alpha: float = 0.05,
                   picks: pd.DataFrame | None = None) -> pd.DataFrame:
    """The estimate table from matched units (see ``estimate``)."""
    frame, rows = units.frame, []
    label_only = units.label_only_counts
    index = units.index if units.index is not None else frame.groupby(["judge", "model", "group"], sort=True).indices
    design_items: dict[str, set[str]] = {}
    status = frame["status"].to_numpy(object)
    is_ok, score, human = status == "ok", frame["score"].to_numpy(float), frame["human"].to_numpy(float)
    for (judge, model, group), positions in index.items():
        design = SRS_DESIGN
        if picks is not None:
            results, design, counts = _designed_three(frame.iloc[positions], picks, alpha)
            for key, value in counts.items():  # items, counted once however many models judged them
                design_items.setdefault(key, set()).update(value)
        else:
            results = _three_arrays(is_ok[positions], score[positions], human[positions], alpha)
        rows += _rows(judge, model, group, results, n_abstained=int((status[positions] == "abstained").sum()),
                      n_label_only=int(label_only.get((judge, model, group), 0)), kind="mean", paired=None,
                      alpha=alpha, estimand=units.estimand, design=design)
    if picks is None:
        rows += _joint_rows(frame, units, alpha, rows)
    if compare:
        per_key = {key: frame.iloc[positions] for key, positions in index.items()}
        rows += _compare_rows(per_key, label_only, compare, alpha, units.estimand, by_run=units.by_run, picks=picks)
    table = pd.DataFrame(rows, columns=ESTIMATE_COLUMNS)
    table = _flag_rows(table, units)
    table.attrs["design_notes"] = {key: len(items) for key, items in design_items.items()}
    return table


JOINT_SEPARATOR = " + "
"""Joins the models of a joint ``ppi-cal`` row in its ``model`` column (``a + b + c``)."""


def _several_contenders(units: Units, keys: Sequence[str]) -> bool:
    """Whether some judge (and group, when the groups are not the runs) has two or more (model, run) contenders,
    read from the (judge, model, group) index without touching the frame."""
    index = units.index if units.index is not None else units.frame.groupby(_DIMENSIONS, sort=True).indices
    seen: dict[tuple[str, ...], tuple[str, str]] = {}
    for judge, model, group in index:
        key = (judge,) if len(keys) == 1 else (judge, group)
        first = seen.setdefault(key, (model, group))
        if first != (model, group):
            return True
    return False


def _joint_rows(frame: pd.DataFrame, units: Units, alpha: float,
                single_rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``ppi-cal`` on several models' scores at once (``calibrated.ppi_cal_joint_mean``): one row per judge (and
    ``--by`` group; across the runs when the groups are the runs) where at least two models scored a shared
    unit and the labels suffice (``calibrated.joint_labels_needed``). Its ``model`` is the models joined by
    " + ", its ``design`` says what was fitted; ``recommended`` when it is narrower than every
    single-model estimate of that judge (and group); ``n_label_only`` is the fewest of its models'."""
    keys = ["judge"] if units.by_run else ["judge", "group"]
    if not _several_contenders(units, keys):  # one model per judge (and group): nothing to fit, nothing to pay
        return []
    is_ok = (frame["status"] == "ok") & frame["score"].notna()
    out: list[dict[str, Any]] = []
    for key, whole in frame.groupby(keys, sort=True):
        sub = whole[is_ok.loc[whole.index]]
        judge = str(key[0] if isinstance(key, tuple) else key)
        models = sub["model"].astype(str)
        if units.by_run:  # a contender is a model in one run; the same model in two runs is named with its run
            runs_per_model = sub.groupby(models)["group"].transform("nunique")
            contender = models.where(runs_per_model <= 1, models + " (" + sub["group"].astype(str) + ")")
        else:
            contender = models
        names = sorted(set(contender))
        if len(names) < 2:
            continue
        scores = sub.assign(_c=contender).groupby(["item_id", "part", "_c"], sort=True)["score"].mean().unstack("_c")
        if int((scores.notna().sum(axis=1) >= 2).sum()) == 0:
            continue
        human = sub.groupby(["item_id", "part"], sort=True)["human"].first().reindex(scores.index).to_numpy(float)
        covariates = joint_columns(scores[names].to_numpy(float))
        labeled = ~np.isnan(human)
        result = ppi_cal_joint_mean(human[labeled], covariates[labeled], covariates[~labeled], alpha)
        width = result.hi - result.lo
        if not math.isfinite(width):  # fewer labels than joint_labels_needed: no row (the single models' stand)
            continue
        group = (JOINT_SEPARATOR.join(sorted(set(sub["group"].astype(str)))) if units.by_run
                 else str(key[1]))
        single = [reference_width(r["se"], r["df"], REFERENCE_ALPHA) for r in single_rows if r["kind"] == "mean"
                  and r["recommended"] and r["judge"] == judge and (units.by_run or r["group"] == group)]
        n_abstained = int(whole[["item_id", "part"]].drop_duplicates().shape[0] - len(scores))
        design = (f"{SRS_DESIGN}; ppi-cal on {len(names)} models' scores at once (least squares on "
                  f"{covariates.shape[1]} columns, t on n - p df), units any of them scored")
        label_only = [units.label_only_counts.get((judge, m, g), 0) for m, g in
                      sub[["model", "group"]].drop_duplicates().itertuples(index=False)]
        out.append({"judge": judge, "model": JOINT_SEPARATOR.join(names), "group": group, "method": "ppi-cal",
                    **result.as_dict(), "n_abstained": n_abstained, "n_label_only": min(label_only) if label_only else 0,
                    "kind": "mean", "paired": None, "alpha": alpha,
                    "estimand": ESTIMANDS.get(units.estimand, units.estimand), "design": design,
                    "recommended": bool(single and reference_width(result.se, result.df, REFERENCE_ALPHA)
                                        < min(single))})
    return out


def _compare_rows(per_key: dict[tuple[str, str, str], pd.DataFrame], label_only: Mapping[Any, int],
                  compare: Sequence[str], alpha: float, estimand: str = "mean",
                  by_run: bool = True, picks: pd.DataFrame | None = None) -> list[dict[str, Any]]:
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
        rows = _compare_along(per_key, label_only, dim, name_a, name_b, alpha, estimand, by_run, picks)
        if rows:
            return rows
    others = " and ".join(d for d in _DIMENSIONS if d != dims[0])
    raise InputError(f"{dims[0]}s {name_a!r} and {name_b!r} never occur with the same {others}: nothing to "
                     "compare", field="compare")


def _compare_along(per_key: dict[tuple[str, str, str], pd.DataFrame], label_only: Mapping[Any, int], dim: str,
                   name_a: str, name_b: str, alpha: float, estimand: str, by_run: bool,
                   picks: pd.DataFrame | None = None) -> list[dict[str, Any]]:
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
        design = SRS_DESIGN
        if picks is not None:
            if not shared:
                raise InputError("with --picks, differences are estimated on items both sides judged (paired); "
                                 f"{name_a!r} and {name_b!r} share none", field="picks")
            results, design, _ = _designed_three(a, picks, alpha, paired_with=b)
        elif shared:
            results = _paired_three(a, b, alpha)
        else:
            ea, eb = _three(a, alpha), _three(b, alpha)
            results = {m: difference(ea[m], eb[m], alpha) for m in METHODS if m in ea and m in eb}
        n_abs = int((a["status"] == "abstained").sum() + (b["status"] == "abstained").sum())
        n_lo = int(sum(label_only.get(k, 0) for k, _ in sides[ka] + sides[kb]))
        label = list(ka)
        label[axis] = f"{name_a} - {name_b}"
        if not label[2]:
            label[2] = " - ".join("+".join(sorted({k[2] for k, _ in sides[s]})) for s in (ka, kb))
        rows += _rows(label[0], label[1], label[2], results, n_abstained=n_abs, n_label_only=n_lo,
                      kind="difference", paired=bool(shared), alpha=alpha, estimand=estimand, design=design)
    return rows


def estimate(judgments: Any, labels: Any, *, groups: Mapping[str, str] | None = None,
             pairs: Mapping[str, str] | None = None, compare: Sequence[str] | None = None, alpha: float = 0.05,
             scale: Any = None, estimand: str = "mean", picks: pd.DataFrame | None = None) -> pd.DataFrame:
    """Mean human score per (judge, model, group) by PPI++, human-only and judge-only, with (1 - alpha) intervals.

    Args:
        judgments: run store path(s) or a ``Judgments`` (perturbed variants left out, each judge on the one scale the
            stores record), or run-store rows (``Run(path).to_pandas()``, several runs with a ``source`` column).
        labels: human labels: a path, a list of ``HumanLabel`` or a frame; several annotators → calibration's
            consensus.
        groups: ``item_id -> group`` (e.g. the system that wrote the answer); ``None`` groups by run (``source``).
        pairs: ``item_id -> pair key`` for paired differences (e.g. the question both systems answered);
            ``None`` pairs by item id. A difference is paired when the two groups share pair keys.
        compare: two group names, two models or two judges: adds rows ``kind="difference"`` for ``A - B``.
        alpha: 1 - the interval's coverage.
        scale: score scale(s) as in ``calibrate``, ``(lo, hi, step, "continuous")`` included (default: the
            judge's spec or family).
        estimand: ``mean`` (default): the mean human rating (each unit's mean over its annotators, averaged
            over units); ``median``: the median consensus snapped to the scale, as ``calibrate`` uses.
        picks: the design the labels were chosen by (``select_labels``: item_id, pi, picked[, stratum, design]):
            active PPI weighting labels by 1/pi, or stratified PPI++ for stratified picks; the ``design`` column
            names it, and ``table.attrs["design_notes"]`` counts the items whose labels are outside the design
            (dropped) and the picked
            items without a label (non-response).
    """
    from scijudge.labels import labels_frame_of
    from scijudge.metrics.frames import Judgments

    if not isinstance(judgments, pd.DataFrame):
        read = Judgments.read(judgments)
        judgments = read.originals()
        scale = read.scales_with(scale, sorted(judgments["judge"].astype(str).unique()))
    labels = labels if isinstance(labels, pd.DataFrame) else labels_frame_of(labels)
    units = match_units(judgments, labels, groups=groups, pairs=pairs, scale=scale, estimand=estimand)
    return estimate_units(units, compare=compare, alpha=alpha, picks=picks)


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


