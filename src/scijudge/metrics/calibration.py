"""Calibration of judges against human labels: agreement, optimism bias, intervals and paired comparisons.

``calibrate(judgments, labels)`` compares every contender (a model, per run and spec version) with the
human consensus, per rubric (run-store ``judge``) and pooled over rubrics that share a scale. Point
estimates come from ``scijudge.metrics.agreement`` (scipy / scikit-learn); 95% intervals from a cluster
bootstrap over items (``scijudge.metrics.bootstrap``), vectorised through contingency tables
(``scijudge.metrics.tables``). Abstentions are counted as lost coverage and never imputed.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import sparse

from scijudge.errors import InputError, ScijudgeError
from scijudge.metrics import agreement as ag
from scijudge.metrics.bootstrap import bootstrap_sums, holm, paired_pvalue, percentile_interval
from scijudge.metrics.groups import prepare_judgments
from scijudge.metrics.tables import ORDINAL_STATS, VERDICT_STATS, ordinal_stats, verdict_stats

ScaleTuple = tuple[float, float, float]
POOLED = "(pooled)"
FAMILY_SCALES: dict[str, ScaleTuple] = {
    "likert": (1.0, 5.0, 1.0),
    "synthesis": (1.0, 5.0, 0.5),
    "linking": (1.0, 5.0, 0.5),
    "checklist": (0.0, 1.0, 0.5),
    "pairwise": (-4.0, 4.0, 1.0),
}
PAIRED_METRICS = {"ordinal": ("kappa_w", "mae"), "verdict": ("kappa", "accuracy")}


@dataclass
class CalibrationResult:
    """Everything ``calibrate`` measured, as pandas DataFrames (see each field's description).

    Interval columns are ``<stat>_lo`` / ``<stat>_hi`` (95% percentile bootstrap over items). A statistic
    that is undefined (e.g. kappa when every rating is equal) is NaN and its row's ``notes`` says why.
    """

    leaderboard: pd.DataFrame  # ordinal scores pooled over rubrics: one row per contender and scale, ranked
    per_rubric: pd.DataFrame  # ordinal scores per contender × rubric
    verdict_leaderboard: pd.DataFrame  # verdicts pooled per contender and judge family
    verdict_per_rubric: pd.DataFrame  # verdicts per contender × rubric
    human_ceiling: pd.DataFrame  # agreement among annotators (per rubric and pooled) where ≥2 labelled a unit
    paired: pd.DataFrame  # contender A − contender B on common units, bootstrap p-values, Holm across rubrics
    confusion: pd.DataFrame  # long format: contender, judge, track, human, judge_value, count
    reliability: pd.DataFrame  # long format reliability-diagram bins (equal-width and equal-mass)
    scales: dict[str, ScaleTuple] = field(default_factory=dict)
    n_boot: int = 1000
    seed: int = 0
    level: float = 0.95
    notes: list[str] = field(default_factory=list)

    def confusion_matrix(self, contender: str, judge: str = POOLED, track: str | None = None) -> pd.DataFrame:
        """One confusion matrix (rows human, columns judge) from the long ``confusion`` frame."""
        sel = self.confusion[(self.confusion["contender"] == contender) & (self.confusion["judge"] == judge)]
        if track is not None:
            sel = sel[sel["track"] == track]
        if sel.empty:
            raise KeyError(f"no confusion matrix for contender {contender!r}, judge {judge!r}")
        if sel["track"].nunique() > 1:
            raise KeyError(f"several tracks for {contender!r} / {judge!r}: pass track= one of {sorted(sel['track'].unique())}")
        return sel.pivot(index="human", columns="judge_value", values="count")

    def frames(self) -> dict[str, pd.DataFrame]:
        """The named DataFrames of this result."""
        return {
            "leaderboard": self.leaderboard,
            "per_rubric": self.per_rubric,
            "verdict_leaderboard": self.verdict_leaderboard,
            "verdict_per_rubric": self.verdict_per_rubric,
            "human_ceiling": self.human_ceiling,
            "paired": self.paired,
            "confusion": self.confusion,
            "reliability": self.reliability,
        }

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: every frame as records (NaN becomes null) plus settings and notes."""
        out: dict[str, Any] = {
            "settings": {"n_boot": self.n_boot, "seed": self.seed, "level": self.level,
                         "scales": {k: list(v) for k, v in self.scales.items()}},
            "notes": list(self.notes),
        }
        for name, frame in self.frames().items():
            out[name] = frame_records(frame)
        return out


def frame_records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """DataFrame rows as JSON-safe dicts (NaN/inf → None, numpy scalars → Python)."""
    rows = []
    for record in frame.to_dict(orient="records"):
        clean = {}
        for key, value in record.items():
            if isinstance(value, (np.floating, float)):
                value = float(value)
                clean[key] = value if math.isfinite(value) else None
            elif isinstance(value, np.integer):
                clean[key] = int(value)
            elif isinstance(value, np.bool_):
                clean[key] = bool(value)
            elif value is pd.NA or value is pd.NaT:
                clean[key] = None
            else:
                clean[key] = value
        rows.append(clean)
    return rows


# --- input checks --------------------------------------------------------------------------------------


def _prepare_labels(labels: pd.DataFrame) -> pd.DataFrame:
    if not isinstance(labels, pd.DataFrame):
        raise InputError(f"labels must be a pandas DataFrame (see labels_to_frame), got {type(labels).__name__}")
    for column in ("item_id", "judge"):
        if column not in labels.columns:
            raise InputError("labels lack a column", field=column)
    if "score" not in labels.columns and "verdict" not in labels.columns:
        raise InputError("labels need a 'score' or a 'verdict' column", field="score")
    lab = labels.copy()
    for column, default in (("part", ""), ("annotator", ""), ("score", np.nan), ("verdict", None),
                            ("source_file", None), ("source_line", None)):
        if column not in lab.columns:
            lab[column] = default
    for column in ("item_id", "judge", "part", "annotator"):
        lab[column] = lab[column].astype(object).where(lab[column].notna(), "").astype(str)
    lab["score"] = pd.to_numeric(lab["score"], errors="raise").astype(float)
    lab["verdict"] = lab["verdict"].astype(object).where(lab["verdict"].notna(), None)
    both = lab["score"].notna() == lab["verdict"].notna()
    if both.any():
        raise _label_error(lab[both].iloc[0], "exactly one of 'score' or 'verdict' must be given", "score")
    dup = lab.duplicated(["item_id", "judge", "part", "annotator"], keep="first")
    if dup.any():
        row = lab[dup].iloc[0]
        who = f"annotator {row['annotator']!r}" if row["annotator"] else "an unnamed annotator"
        raise _label_error(row, f"duplicate label: {who} labelled item {row['item_id']!r}, judge "
                                f"{row['judge']!r}{_part_text(row['part'])} more than once", "annotator")
    lab["verdict"] = lab["verdict"].map(_norm_verdict)
    return lab


def _part_text(part: str) -> str:
    return f", part {part!r}" if part else ""


def _norm_verdict(value: Any) -> str | None:
    return None if value is None else str(value).strip().lower()


def _label_error(row: pd.Series, message: str, field: str) -> InputError:
    line = row.get("source_line")
    line = int(line) if line is not None and not pd.isna(line) else None
    file = row.get("source_file")
    file = file if isinstance(file, str) and file else None
    if file is None and line is None:
        message = f"label for item {row['item_id']!r}, judge {row['judge']!r}: {message}"
    return InputError(message, file=file, line=line, field=field)


def _check_unknown_items(df: pd.DataFrame, lab: pd.DataFrame) -> None:
    known = set(df["item_id"])
    unknown = lab[~lab["item_id"].isin(known)]
    if unknown.empty:
        return
    ids = list(dict.fromkeys(unknown["item_id"]))
    shown = ", ".join(repr(i) for i in ids[:5]) + (" ..." if len(ids) > 5 else "")
    raise _label_error(
        unknown.iloc[0],
        f"labels for {len(ids)} item(s) that no run judged ({shown}); check that labels and runs use the same "
        "item ids, or allow extra labels (allow_extra_labels=True / --allow-extra-labels)",
        "item_id",
    )


def _resolve_scales(
    df: pd.DataFrame, judges: list[str], scale: ScaleTuple | Mapping[str, ScaleTuple] | None
) -> dict[str, ScaleTuple]:
    """Scale per judge: explicit argument, else the shipped spec's scale, else the family default."""
    out: dict[str, ScaleTuple] = {}
    for judge in judges:
        if isinstance(scale, Mapping):
            if judge in scale:
                out[judge] = tuple(float(x) for x in scale[judge])  # type: ignore[assignment]
                continue
        elif scale is not None:
            out[judge] = tuple(float(x) for x in scale)  # type: ignore[assignment]
            continue
        families = df.loc[df["judge"] == judge, "family"].unique()
        family = families[0] if len(families) else "likert"
        out[judge] = _spec_scale(judge, family) or FAMILY_SCALES.get(family, FAMILY_SCALES["likert"])
    for judge, sc in out.items():
        if len(sc) != 3:
            raise InputError(f"scale for judge {judge!r} must be (lo, hi, step), got {sc!r}", field="scale")
        try:
            ag.scale_values(*sc)
        except ValueError as exc:
            raise InputError(f"judge {judge!r}: {exc}", field="scale") from None
    return out


def _spec_scale(judge: str, family: str) -> ScaleTuple | None:
    """The scale of a shipped judge spec of this name, if there is one (pairwise: rating differences)."""
    try:
        from scijudge.specs import get_spec

        spec = get_spec(judge)
    except (ScijudgeError, ImportError):  # not a shipped judge: fall back to the family default
        return None
    sc = getattr(spec, "scale", None)
    if sc is None:
        return None
    if family == "pairwise":
        return (float(sc.min - sc.max), float(sc.max - sc.min), float(sc.step))
    return (float(sc.min), float(sc.max), float(sc.step))


def _on_scale(values: np.ndarray, sc: ScaleTuple) -> np.ndarray:
    lo, hi, step = sc
    idx = np.rint((values - lo) / step)
    return (values >= lo - 1e-9) & (values <= hi + 1e-9) & np.isclose(lo + idx * step, values, atol=1e-6)


def _scale_text(sc: ScaleTuple) -> str:
    return f"{sc[0]:g}..{sc[1]:g} step {sc[2]:g}"


def _validate_scores(df: pd.DataFrame, lab: pd.DataFrame, scales: dict[str, ScaleTuple]) -> None:
    for judge, sc in scales.items():
        sel = lab[(lab["judge"] == judge) & lab["score"].notna()]
        bad = ~_on_scale(sel["score"].to_numpy(), sc)
        if bad.any():
            row = sel[bad].iloc[0]
            raise _label_error(row, f"score {row['score']:g} is outside the scale {_scale_text(sc)} of judge "
                                    f"{judge!r}", "score")
        rows = df[(df["judge"] == judge) & (df["status"] == "ok") & df["score"].notna()]
        bad = ~_on_scale(rows["score"].to_numpy(), sc)
        if bad.any():
            row = rows[bad].iloc[0]
            raise InputError(
                f"judgment of item {row['item_id']!r} by {row['model']!r} has score {row['score']:g}, outside the "
                f"scale {_scale_text(sc)} of judge {judge!r}; pass the right scale (scale=(lo, hi, step) / --scale)",
                file=row["source"] or None, field="score",
            )


# --- consensus and matching --------------------------------------------------------------------------


def _consensus(lab: pd.DataFrame, scales: dict[str, ScaleTuple]) -> tuple[pd.DataFrame, pd.DataFrame, int]:
    """Human consensus per (item, judge, part): median score snapped to the scale (half-way ties round to
    the even scale step), and majority verdict (ties have no consensus and are left out)."""
    keys = ["item_id", "judge", "part"]
    scored = lab[lab["score"].notna() & lab["judge"].isin(list(scales))]
    med = scored.groupby(keys, sort=False)["score"].agg(["median", "size"]).reset_index()
    lo = med["judge"].map(lambda j: scales[j][0]).astype(float)
    step = med["judge"].map(lambda j: scales[j][2]).astype(float)
    med["h_score"] = lo + np.round((med["median"] - lo) / step) * step
    med = med.rename(columns={"size": "n_annotators"})[[*keys, "h_score", "n_annotators"]]

    verd = lab[lab["verdict"].notna()]
    rows = []
    no_consensus = 0
    for key, group in verd.groupby(keys, sort=False):
        counts = group["verdict"].value_counts()
        if len(counts) > 1 and counts.iloc[0] == counts.iloc[1]:
            no_consensus += 1
            continue
        rows.append((*key, counts.index[0], int(counts.sum())))
    vcons = pd.DataFrame(rows, columns=[*keys, "h_verdict", "n_annotators"])
    return med, vcons, no_consensus


def _attach(df: pd.DataFrame, cons: pd.DataFrame) -> pd.DataFrame:
    """Judgments joined to consensus labels on (item, judge, part); pairwise orders AB/BA use a part-less label."""
    keys = ["item_id", "judge", "part"]
    judged = df.copy()
    judged["label_part"] = judged["part"]
    ordered = judged["part"].isin(["AB", "BA"])
    if ordered.any():
        have = set(map(tuple, cons[keys].to_numpy().tolist())) if len(cons) else set()
        sub = judged[ordered]
        missing = [k not in have for k in zip(sub["item_id"], sub["judge"], sub["part"])]
        judged.loc[sub.index[missing], "label_part"] = ""
    merged = judged.merge(
        cons.rename(columns={"part": "label_part"}), on=["item_id", "judge", "label_part"], how="inner"
    )
    return merged


def _check_duplicate_judgments(matched: pd.DataFrame) -> None:
    dup = matched.duplicated(["contender", "item_id", "judge", "part"])
    if dup.any():
        row = matched[dup].iloc[0]
        raise InputError(
            f"{row['contender']!r} judged item {row['item_id']!r} with {row['judge']!r}{_part_text(row['part'])} "
            "more than once; pass each run once, or split repeated samples into separate runs",
            file=row["source"] or None, field="item_id",
        )


# --- bootstrap blocks ----------------------------------------------------------------------------------


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

    def add(self, name: Any, item_ids: np.ndarray, cells: np.ndarray, width: int, values: np.ndarray | None = None) -> None:
        """Register a block: each (item, cell) pair adds ``values`` (default 1) to that item's row."""
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

    def get(self, name: Any) -> np.ndarray | None:
        if self.reps is None:
            return None
        start, width = self.offsets[name]
        return self.reps[:, start : start + width]


# --- statistics of one group -------------------------------------------------------------------------


def _ordinal_point(j: np.ndarray, h: np.ndarray, values: np.ndarray, tol: float) -> tuple[dict[str, float], list[str]]:
    """Point estimates from the library-backed functions, plus why any of them is undefined."""
    notes: list[str] = []
    n = j.size
    out: dict[str, float] = {
        "exact": ag.exact_agreement(j, h),
        "within1": ag.within_agreement(j, h, tol),
        "mae": ag.mean_absolute_error(j, h),
        "top_share_judge": ag.top_share(j, values[-1]),
        "top_share_human": ag.top_share(h, values[-1]),
    }
    bias = ag.mean_bias(j, h)
    out.update(bias=bias.bias, bias_t=bias.t, bias_p=bias.p_ttest, bias_p_wilcoxon=bias.p_wilcoxon)
    j_const, h_const = n < 2 or np.ptp(j) == 0, n < 2 or np.ptp(h) == 0
    if n < 2:
        notes.append("fewer than 2 pairs: correlations, kappa, alpha, AC2 and ICC undefined")
    elif j_const or h_const:
        who = "judge and human" if j_const and h_const else ("judge" if j_const else "human")
        notes.append(f"{who} ratings constant: correlations and ICC undefined")
    with np.errstate(all="ignore"):
        out["kappa_w"] = ag.weighted_kappa(j, h, values) if n >= 2 and not (j_const and h_const) else float("nan")
        pair = np.column_stack([h, j])
        out["alpha_ordinal"] = ag.krippendorff_alpha(pair, values, "ordinal") if n >= 2 else float("nan")
        out["alpha_interval"] = ag.krippendorff_alpha(pair, values, "interval") if n >= 2 else float("nan")
        out["ac2"] = ag.gwet_ac2(pair, values, "quadratic") if n >= 2 else float("nan")
        out["spearman"] = ag.spearman(j, h)
        out["kendall"] = ag.kendall_tau_b(j, h)
        out["pearson"] = ag.pearson(j, h)
        icc = ag.icc(pair) if n >= 2 and not (j_const and h_const) else {"ICC(A,1)": float("nan"), "ICC(C,1)": float("nan")}
        out["icc_a1"], out["icc_c1"] = icc["ICC(A,1)"], icc["ICC(C,1)"]
        out["sd_ratio"] = ag.sd_ratio(j, h) if not h_const else float("nan")
    for name in ("kappa_w", "alpha_ordinal", "alpha_interval"):
        if n >= 2 and not math.isfinite(out[name]) and j_const and h_const:
            notes.append(f"{name} undefined: every rating is the same value")
            break
    if h_const and n >= 2:
        notes.append("sd_ratio undefined: human ratings constant")
    if not math.isfinite(out["bias_p"]):
        notes.append("bias test undefined: fewer than 2 pairs")
    return out, notes


def _intervals(row: dict[str, Any], reps: dict[str, np.ndarray] | None, names: tuple[str, ...], level: float) -> None:
    for name in names:
        if reps is None:
            row[f"{name}_lo"] = row[f"{name}_hi"] = float("nan")
        else:
            lo, hi = percentile_interval(reps[name], level)
            row[f"{name}_lo"], row[f"{name}_hi"] = float(lo), float(hi)


def _calibration(group: pd.DataFrame, track: str, values: np.ndarray | None, n_bins: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Brier score and ECE (equal-width and equal-mass) from rating probabilities or a confidence."""
    out: dict[str, Any] = {"calibration_source": None, "n_calibration": 0, "brier": float("nan"),
                           "ece": float("nan"), "ece_mass": float("nan")}
    bins: list[dict[str, Any]] = []
    correct: np.ndarray
    if track == "ordinal":
        with_probs = group[group["probs"].map(lambda p: isinstance(p, dict) and len(p) > 0)]
        if len(with_probs) and values is not None:
            probs = np.array([_prob_row(p, values, r) for p, (_, r) in zip(with_probs["probs"], with_probs.iterrows())])
            h = with_probs["h_score"].to_numpy(float)
            top = probs.argmax(axis=1)
            correct = np.isclose(values[top], h)
            conf = probs.max(axis=1)
            out.update(calibration_source="probs", n_calibration=len(with_probs),
                       brier=ag.brier_multiclass(probs, h, values))
        else:
            sel = group[group["confidence"].notna()]
            if sel.empty:
                return out, bins
            conf = sel["confidence"].to_numpy(float)
            correct = np.isclose(sel["score"].to_numpy(float), sel["h_score"].to_numpy(float))
            out.update(calibration_source="confidence", n_calibration=len(sel), brier=ag.brier_binary(conf, correct))
    else:
        sel = group[group["confidence"].notna()]
        if sel.empty:
            return out, bins
        conf = sel["confidence"].to_numpy(float)
        correct = (sel["j_verdict"] == sel["h_verdict"]).to_numpy()
        out.update(calibration_source="confidence", n_calibration=len(sel), brier=ag.brier_binary(conf, correct))
    if np.any((conf < 0) | (conf > 1)):
        raise InputError("confidence values must lie in [0, 1]", field="confidence")
    for strategy, key in (("uniform", "ece"), ("quantile", "ece_mass")):
        out[key] = ag.expected_calibration_error(conf, correct, n_bins, strategy)  # type: ignore[arg-type]
        b = ag.reliability_bins(conf, correct, n_bins, strategy)  # type: ignore[arg-type]
        for i in range(len(b["count"])):
            bins.append({"strategy": strategy, "bin": i, "lower": float(b["lower"][i]), "upper": float(b["upper"][i]),
                         "count": int(b["count"][i]), "confidence": float(b["confidence"][i]),
                         "accuracy": float(b["accuracy"][i])})
    return out, bins


def _prob_row(probs: dict[str, Any], values: np.ndarray, row: pd.Series) -> np.ndarray:
    vec = np.zeros(values.size)
    for key, p in probs.items():
        try:
            v = float(key)
            idx = int(np.argmin(np.abs(values - v)))
            ok = abs(values[idx] - v) < 1e-6
            p = float(p)
        except (TypeError, ValueError):
            ok = False
        if not ok or not math.isfinite(p) or p < 0:
            raise InputError(f"judgment of item {row['item_id']!r} ({row['judge']!r}) has a rating probability "
                             f"{key!r}: {p!r} that is not a point of the scale with a probability >= 0",
                             file=row.get("source") or None, field="probs")
        vec[idx] += p
    total = vec.sum()
    if total <= 0:
        raise InputError(f"judgment of item {row['item_id']!r} ({row['judge']!r}) has rating probabilities that sum to 0",
                         file=row.get("source") or None, field="probs")
    return vec / total  # renormalised: logprob-derived probabilities rarely sum to exactly 1


# --- the whole comparison ----------------------------------------------------------------------------


def calibrate(
    judgments: pd.DataFrame,
    labels: pd.DataFrame,
    *,
    scale: ScaleTuple | Mapping[str, ScaleTuple] | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    n_bins: int = 10,
    allow_extra_labels: bool = False,
) -> CalibrationResult:
    """Compare every (model, run, spec version) in ``judgments`` with the human ``labels``.

    Args:
        judgments: run-store rows (``Run(path).to_pandas()``; several runs concatenated, with a ``source``
            column naming the run when they share a model).
        labels: ``labels_to_frame(load_labels(path))`` or any frame with item_id, judge, part, score|verdict,
            annotator.
        scale: ``(lo, hi, step)`` for every judge, or a mapping judge → scale; by default the shipped spec's
            scale, else the family default (Likert 1–5).
        n_boot: bootstrap resamples of items (0 disables intervals and bootstrap p-values).
        seed: seed of the resampling: the same seed gives the same intervals.
        allow_extra_labels: accept labels for items that no run judged (otherwise an error, since it usually
            means mismatched ids).
    """
    df = prepare_judgments(judgments)
    lab = _prepare_labels(labels)
    if df.empty:
        raise InputError("no judgments to calibrate: the runs are empty")
    if lab.empty:
        raise InputError("no labels to calibrate against")
    if not allow_extra_labels:
        _check_unknown_items(df, lab)
    df["verdict"] = df["verdict"].map(_norm_verdict)

    label_keys = set(zip(lab["item_id"], lab["judge"]))
    judged_keys = set(zip(df["item_id"], df["judge"]))
    overlap_judges = sorted({j for (_, j) in label_keys & judged_keys})
    if not overlap_judges:
        raise InputError(
            "no judgment matches a label on (item_id, judge): the runs judged "
            f"{sorted(df['judge'].unique())[:6]} on {df['item_id'].nunique()} items, the labels cover "
            f"{sorted(lab['judge'].unique())[:6]} on {lab['item_id'].nunique()} items",
            field="judge",
        )
    scales = _resolve_scales(df, overlap_judges, scale)
    _validate_scores(df, lab, scales)
    score_cons, verdict_cons, no_consensus = _consensus(lab, scales)
    notes: list[str] = []
    if no_consensus:
        notes.append(f"{no_consensus} labelled unit(s) with tied verdicts among annotators have no consensus "
                     "and were left out")

    df_rel = df[df["judge"].isin(overlap_judges)]
    ord_matched = _attach(df_rel, score_cons)
    ver_matched = _attach(df_rel, verdict_cons)
    if ord_matched.empty and ver_matched.empty:
        raise InputError("no judgment matches a label on (item_id, judge, part): check the 'part' values", field="part")
    for matched in (ord_matched, ver_matched):
        _check_duplicate_judgments(matched)

    # items that enter any statistic, for the shared bootstrap
    items = sorted(set(ord_matched["item_id"]) | set(ver_matched["item_id"]) | set(lab["item_id"]) & set(df["item_id"]))
    blocks = _Blocks(items)
    ctx = _Context(scales=scales, blocks=blocks, level=level, n_bins=n_bins, notes=notes)

    ord_groups = _ordinal_groups(ord_matched, score_cons, ctx)
    ver_groups = _verdict_groups(ver_matched, verdict_cons, ctx)
    ceiling_specs = _ceiling_blocks(lab, scales, ctx)
    pair_specs = _pair_blocks(ord_groups, ver_groups, ctx)
    blocks.run(n_boot, seed)
    if n_boot <= 0:
        notes.append("bootstrap disabled (n_boot=0): no intervals or paired p-values")

    per_rubric, leaderboard, conf_rows, rel_rows = _ordinal_frames(ord_groups, ctx)
    v_per_rubric, v_leaderboard, v_conf, v_rel = _verdict_frames(ver_groups, ctx)
    ceiling = _ceiling_frame(ceiling_specs, ctx)
    paired = _paired_frame(pair_specs, ctx)
    confusion = pd.DataFrame(conf_rows + v_conf, columns=["contender", "judge", "track", "human", "judge_value", "count"])
    reliability = pd.DataFrame(rel_rows + v_rel, columns=["contender", "judge", "track", "source", "strategy", "bin",
                                                          "lower", "upper", "count", "confidence", "accuracy"])
    return CalibrationResult(
        leaderboard=leaderboard, per_rubric=per_rubric, verdict_leaderboard=v_leaderboard,
        verdict_per_rubric=v_per_rubric, human_ceiling=ceiling, paired=paired, confusion=confusion,
        reliability=reliability, scales=scales, n_boot=n_boot, seed=seed, level=level, notes=notes,
    )


@dataclass
class _Context:
    scales: dict[str, ScaleTuple]
    blocks: _Blocks
    level: float
    n_bins: int
    notes: list[str]


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


def _ordinal_groups(matched: pd.DataFrame, cons: pd.DataFrame, ctx: _Context) -> list[_Group]:
    groups = []
    for (contender, judge), g in matched.groupby(["contender", "judge"], sort=True):
        sc = ctx.scales[judge]
        values = ag.scale_values(*sc)
        usable = (g["status"] == "ok") & g["score"].notna()
        pairs = g[usable]
        grp = _Group(contender=contender, judge=judge, track="ordinal", pool=_scale_text(sc), model=str(g["model"].iloc[0]),
                     spec_hash=",".join(sorted(g["spec_hash"].unique())), family=str(g["family"].iloc[0]),
                     categories=values, pairs=pairs, counts=_coverage(g, cons, judge, usable))
        if len(pairs):
            k = values.size
            hi = _cat_index(pairs["h_score"].to_numpy(float), sc)
            ji = _cat_index(pairs["score"].to_numpy(float), sc)
            grp.block = ("ord", contender, judge)
            ctx.blocks.add(grp.block, pairs["item_id"].to_numpy(), hi * k + ji, k * k)
        groups.append(grp)
    return groups


def _cat_index(values: np.ndarray, sc: ScaleTuple) -> np.ndarray:
    return np.rint((values - sc[0]) / sc[2]).astype(np.int64)


def _verdict_groups(matched: pd.DataFrame, cons: pd.DataFrame, ctx: _Context) -> list[_Group]:
    if matched.empty:
        return []
    matched = matched.assign(j_verdict=matched["verdict"])
    fam_of = matched.groupby("judge")["family"].first()
    classes: dict[str, set[str]] = {}
    for judge, fam in fam_of.items():
        sel = matched[matched["judge"] == judge]
        classes.setdefault(fam, set()).update(sel["h_verdict"].dropna())
        classes[fam].update(sel.loc[sel["status"] == "ok", "j_verdict"].dropna())
    cats = {fam: np.array(sorted(c), dtype=object) for fam, c in classes.items()}
    groups = []
    for (contender, judge), g in matched.groupby(["contender", "judge"], sort=True):
        fam = str(fam_of[judge])
        usable = (g["status"] == "ok") & g["j_verdict"].notna()
        pairs = g[usable]
        categories = cats[fam]
        grp = _Group(contender=contender, judge=judge, track="verdict", pool=f"verdict:{fam}", model=str(g["model"].iloc[0]),
                     spec_hash=",".join(sorted(g["spec_hash"].unique())), family=fam, categories=categories,
                     pairs=pairs, counts=_coverage(g, cons, judge, usable))
        if len(pairs):
            index = {c: i for i, c in enumerate(categories)}
            k = categories.size
            hi = np.array([index[v] for v in pairs["h_verdict"]], dtype=np.int64)
            ji = np.array([index[v] for v in pairs["j_verdict"]], dtype=np.int64)
            grp.block = ("ver", contender, judge)
            ctx.blocks.add(grp.block, pairs["item_id"].to_numpy(), hi * k + ji, k * k)
        groups.append(grp)
    return groups


def _table_reps(ctx: _Context, blocks: list[Any], k: int) -> np.ndarray | None:
    parts = [ctx.blocks.get(b) for b in blocks if b is not None]
    if not parts or parts[0] is None:
        return None
    total = np.sum(parts, axis=0)
    return total.reshape(-1, k, k)


def _ordinal_row(groups: list[_Group], ctx: _Context, judge_name: str) -> tuple[dict[str, Any], list[dict], list[dict]]:
    first = groups[0]
    values = first.categories
    tol = float(values[1] - values[0])
    pairs = pd.concat([g.pairs for g in groups], ignore_index=True)
    counts = {k: sum(g.counts[k] for g in groups) for k in first.counts}
    row: dict[str, Any] = {"contender": first.contender, "model": first.model, "judge": judge_name,
                           "spec_hash": first.spec_hash if len(groups) == 1 else "", "family": first.family,
                           "scale": first.pool, **counts,
                           "n_items": int(pairs["item_id"].nunique()) if len(pairs) else 0}
    expected = counts["n_judged"] + counts["n_missing"]
    row["coverage"] = counts["n"] / expected if expected else float("nan")
    conf_rows: list[dict] = []
    rel_rows: list[dict] = []
    if pairs.empty:
        row["notes"] = "no usable judgment (all abstained or missing)"
        return row, conf_rows, rel_rows
    j = pairs["score"].to_numpy(float)
    h = pairs["h_score"].to_numpy(float)
    point, notes = _ordinal_point(j, h, values, tol)
    row.update(point)
    reps_tables = _table_reps(ctx, [g.block for g in groups], values.size)
    reps = ordinal_stats(reps_tables, values, tol) if reps_tables is not None else None
    _intervals(row, reps, ORDINAL_STATS, ctx.level)
    cal, bins = _calibration(pairs, "ordinal", values, ctx.n_bins)
    row.update(cal)
    row["notes"] = "; ".join(notes)
    cm = ag.confusion(j, h, values)
    for a, hv in enumerate(values):
        for b, jv in enumerate(values):
            conf_rows.append({"contender": first.contender, "judge": judge_name, "track": first.pool,
                              "human": float(hv), "judge_value": float(jv), "count": int(cm[a, b])})
    for b in bins:
        rel_rows.append({"contender": first.contender, "judge": judge_name, "track": first.pool,
                         "source": cal["calibration_source"], **b})
    return row, conf_rows, rel_rows


def _per_rubric_and_pooled(groups: list[_Group], ctx: _Context, make_row: Any) -> tuple[list[dict], list[dict], list[dict], list[dict]]:
    """Rows per rubric, then one pooled row per (contender, pool), with their confusion and reliability rows."""
    rows, pooled, conf_rows, rel_rows = [], [], [], []
    for g in groups:
        row, c, r = make_row([g], ctx, g.judge)
        rows.append(row)
        conf_rows += c
        rel_rows += r
    by_pool: dict[tuple[str, str], list[_Group]] = {}
    for g in groups:
        by_pool.setdefault((g.contender, g.pool), []).append(g)
    for (_, _), gs in sorted(by_pool.items()):
        row, c, r = make_row(gs, ctx, POOLED)
        row["n_judges"] = len(gs)
        pooled.append(row)
        conf_rows += c
        rel_rows += r
    return rows, pooled, conf_rows, rel_rows


def _ordinal_frames(groups: list[_Group], ctx: _Context) -> tuple[pd.DataFrame, pd.DataFrame, list[dict], list[dict]]:
    rows, pooled, conf_rows, rel_rows = _per_rubric_and_pooled(groups, ctx, _ordinal_row)
    per_rubric = pd.DataFrame(rows)
    if not per_rubric.empty:
        per_rubric["bias_p_holm"] = np.nan
        for idx in per_rubric.groupby(["contender", "scale"]).groups.values():
            per_rubric.loc[idx, "bias_p_holm"] = holm(per_rubric.loc[idx, "bias_p"].to_numpy(float))
    leaderboard = _rank(pd.DataFrame(pooled), "kappa_w", "scale")
    return per_rubric, leaderboard, conf_rows, rel_rows


def _rank(frame: pd.DataFrame, key: str, by: str) -> pd.DataFrame:
    if frame.empty:
        return frame
    frame = frame.sort_values([by, key], ascending=[True, False], na_position="last").reset_index(drop=True)
    frame.insert(0, "rank", frame.groupby(by)[key].rank(ascending=False, method="min").astype("Int64"))
    return frame


def _verdict_row(groups: list[_Group], ctx: _Context, judge_name: str) -> tuple[dict[str, Any], list[dict], list[dict]]:
    first = groups[0]
    pairs = pd.concat([g.pairs for g in groups], ignore_index=True)
    counts = {k: sum(g.counts[k] for g in groups) for k in first.counts}
    row: dict[str, Any] = {"contender": first.contender, "model": first.model, "judge": judge_name,
                           "spec_hash": first.spec_hash if len(groups) == 1 else "", "family": first.family,
                           "classes": ",".join(first.categories), **counts,
                           "n_items": int(pairs["item_id"].nunique()) if len(pairs) else 0}
    expected = counts["n_judged"] + counts["n_missing"]
    row["coverage"] = counts["n"] / expected if expected else float("nan")
    conf_rows: list[dict] = []
    if pairs.empty:
        row["notes"] = "no usable judgment (all abstained or missing)"
        return row, conf_rows, []
    h = pairs["h_verdict"].to_numpy(object)
    j = pairs["j_verdict"].to_numpy(object)
    scores = ag.verdict_scores(j, h)
    row.update({k: getattr(scores, k) for k in VERDICT_STATS})
    notes = []
    if not math.isfinite(scores.kappa):
        notes.append("kappa and MCC undefined: a single verdict class")
    reps_tables = _table_reps(ctx, [g.block for g in groups], first.categories.size)
    reps = verdict_stats(reps_tables) if reps_tables is not None else None
    _intervals(row, reps, VERDICT_STATS, ctx.level)
    cal, bins = _calibration(pairs, "verdict", None, ctx.n_bins)
    row.update(cal)
    row["notes"] = "; ".join(notes)
    from sklearn.metrics import confusion_matrix

    cm = confusion_matrix(h, j, labels=first.categories)
    for a, hv in enumerate(first.categories):
        for b, jv in enumerate(first.categories):
            conf_rows.append({"contender": first.contender, "judge": judge_name, "track": first.pool,
                              "human": hv, "judge_value": jv, "count": int(cm[a, b])})
    rel_rows = [{"contender": first.contender, "judge": judge_name, "track": first.pool,
                 "source": cal["calibration_source"], **b} for b in bins]
    return row, conf_rows, rel_rows


def _verdict_frames(groups: list[_Group], ctx: _Context) -> tuple[pd.DataFrame, pd.DataFrame, list[dict], list[dict]]:
    rows, pooled, conf_rows, rel_rows = _per_rubric_and_pooled(groups, ctx, _verdict_row)
    leaderboard = _rank(pd.DataFrame(pooled), "kappa", "family") if pooled else pd.DataFrame()
    return pd.DataFrame(rows), leaderboard, conf_rows, rel_rows


# --- human ceiling -----------------------------------------------------------------------------------


@dataclass
class _CeilingSpec:
    judge: str
    track: str
    pool: str
    categories: np.ndarray
    matrix: np.ndarray  # units × annotators, NaN missing (ordinal) or category index (verdict)
    unit_items: np.ndarray
    annotators: list[str]
    block: Any = None


def _ceiling_blocks(lab: pd.DataFrame, scales: dict[str, ScaleTuple], ctx: _Context) -> list[_CeilingSpec]:
    """Annotator × unit matrices for judges where some unit has ≥2 annotators, registered for bootstrap."""
    specs = []
    for track in ("ordinal", "verdict"):
        sel = lab[lab["score"].notna()] if track == "ordinal" else lab[lab["verdict"].notna()]
        sel = sel[sel["item_id"].isin(list(ctx.blocks.index))]
        for judge, g in sel.groupby("judge", sort=True):
            if track == "ordinal" and judge not in scales:
                continue
            per_unit = g.groupby(["item_id", "part"]).size()
            if (per_unit >= 2).sum() < 2:
                continue
            if track == "ordinal":
                categories = ag.scale_values(*scales[judge])
                wide = g.pivot(index=["item_id", "part"], columns="annotator", values="score")
                matrix = wide.to_numpy(float)
                pool = _scale_text(scales[judge])
            else:
                categories = np.array(sorted(g["verdict"].unique()), dtype=object)
                index = {c: float(i) for i, c in enumerate(categories)}
                wide = g.assign(v=g["verdict"].map(index)).pivot(index=["item_id", "part"], columns="annotator", values="v")
                matrix = wide.to_numpy(float)
                pool = "verdict"
            spec = _CeilingSpec(judge=judge, track=track, pool=pool, categories=categories, matrix=matrix,
                                unit_items=wide.index.get_level_values(0).to_numpy(), annotators=list(wide.columns))
            values = categories if track == "ordinal" else np.arange(categories.size, dtype=float)
            counts = ag._category_counts(matrix, values)
            m = counts.sum(axis=1)
            k = values.size
            keep = m >= 2
            # per-unit coincidence contributions (Krippendorff) and AC2 unit statistics (Gwet), both additive
            c = counts[keep]
            per_unit_o = (c[:, :, None] * c[:, None, :] - c[:, :, None] * np.eye(k)[None]) / (m[keep] - 1)[:, None, None]
            weights = "quadratic" if track == "ordinal" else "identity"
            unit_stats = ag.ac2_unit_stats(counts, values, weights)
            items_o = np.repeat(spec.unit_items[keep], k * k)
            cells_o = np.tile(np.arange(k * k), int(keep.sum()))
            width = k * k + unit_stats.shape[1]
            items_a = np.repeat(spec.unit_items, unit_stats.shape[1])
            cells_a = k * k + np.tile(np.arange(unit_stats.shape[1]), len(spec.unit_items))
            spec.block = ("ceil", track, judge)
            ctx.blocks.add(spec.block, np.concatenate([items_o, items_a]), np.concatenate([cells_o, cells_a]), width,
                           np.concatenate([per_unit_o.reshape(-1), unit_stats.reshape(-1)]))
            specs.append(spec)
    return specs


def _pairwise_human(spec: _CeilingSpec) -> tuple[float, float]:
    """Mean over annotator pairs (≥2 shared units) of quadratic kappa (ordinal) or Cohen kappa (verdict),
    and of exact agreement."""
    kappas, exacts = [], []
    for a, b in itertools.combinations(range(spec.matrix.shape[1]), 2):
        both = ~np.isnan(spec.matrix[:, a]) & ~np.isnan(spec.matrix[:, b])
        if both.sum() < 2:
            continue
        x, y = spec.matrix[both, a], spec.matrix[both, b]
        exacts.append(ag.exact_agreement(x, y))
        values = spec.categories if spec.track == "ordinal" else np.arange(spec.categories.size, dtype=float)
        if np.ptp(np.r_[x, y]) > 0:
            kappas.append(ag.weighted_kappa(x, y, values, "quadratic" if spec.track == "ordinal" else None))
    return (float(np.mean(kappas)) if kappas else float("nan"), float(np.mean(exacts)) if exacts else float("nan"))


def _ceiling_frame(specs: list[_CeilingSpec], ctx: _Context) -> pd.DataFrame:
    rows = []
    by_pool: dict[tuple[str, str], list[_CeilingSpec]] = {}
    for spec in specs:
        by_pool.setdefault((spec.track, spec.pool), []).append(spec)
    entries = [(s.judge, [s]) for s in specs] + [(POOLED, v) for (t, p), v in sorted(by_pool.items()) if len(v) > 1 and t == "ordinal"]
    for judge_name, group in entries:
        first = group[0]
        values = first.categories if first.track == "ordinal" else np.arange(first.categories.size, dtype=float)
        k = values.size
        matrix = np.vstack([np.pad(s.matrix, ((0, 0), (0, max(x.matrix.shape[1] for x in group) - s.matrix.shape[1])),
                                   constant_values=np.nan) for s in group])
        n_rated = (~np.isnan(matrix)).sum(axis=1)
        row: dict[str, Any] = {"judge": judge_name, "track": first.pool, "n_units": int((n_rated >= 2).sum()),
                               "n_annotators": len(set().union(*[s.annotators for s in group]))}
        weights = "quadratic" if first.track == "ordinal" else "identity"
        levels = ("ordinal", "interval") if first.track == "ordinal" else ("nominal",)
        stats: dict[str, np.ndarray] = {}
        reps_all = [ctx.blocks.get(s.block) for s in group]
        reps = None if reps_all[0] is None else np.sum(reps_all, axis=0)
        for level in levels:
            row[f"alpha_{level}"] = ag.krippendorff_alpha(matrix, values, level)  # type: ignore[arg-type]
            if reps is not None:
                stats[f"alpha_{level}"] = ag.alpha_from_coincidence(reps[:, : k * k].reshape(-1, k, k), values, level)  # type: ignore[arg-type]
        row["ac2"] = ag.gwet_ac2(matrix, values, weights)  # type: ignore[arg-type]
        if reps is not None:
            stats["ac2"] = ag.ac2_from_unit_stats(reps[:, k * k:], values, weights)
        names = tuple(stats) if stats else tuple(f"alpha_{lv}" for lv in levels) + ("ac2",)
        _intervals(row, stats or None, names, ctx.level)
        if len(group) == 1:
            row["pairwise_kappa"], row["pairwise_exact"] = _pairwise_human(first)
        else:
            pk = [_pairwise_human(s) for s in group]
            row["pairwise_kappa"] = float(np.nanmean([p[0] for p in pk])) if any(np.isfinite(p[0]) for p in pk) else float("nan")
            row["pairwise_exact"] = float(np.nanmean([p[1] for p in pk])) if any(np.isfinite(p[1]) for p in pk) else float("nan")
        rows.append(row)
    return pd.DataFrame(rows)


# --- paired comparisons --------------------------------------------------------------------------------


@dataclass
class _PairSpec:
    a: str
    b: str
    judge: str
    track: str
    pool: str
    categories: np.ndarray
    pairs_a: pd.DataFrame
    pairs_b: pd.DataFrame
    block_a: Any
    block_b: Any


def _pair_blocks(ord_groups: list[_Group], ver_groups: list[_Group], ctx: _Context) -> list[_PairSpec]:
    """For each two contenders and each shared judge, tables restricted to units both rated."""
    specs = []
    for groups in (ord_groups, ver_groups):
        by_judge: dict[str, dict[str, _Group]] = {}
        for g in groups:
            if len(g.pairs):
                by_judge.setdefault(g.judge, {})[g.contender] = g
        for judge, by_c in sorted(by_judge.items()):
            for a, b in itertools.combinations(sorted(by_c), 2):
                ga, gb = by_c[a], by_c[b]
                key = ["item_id", "part"]
                common = ga.pairs[key].merge(gb.pairs[key], on=key)
                if len(common) < 2:
                    continue
                pa = ga.pairs.merge(common, on=key).sort_values(key).reset_index(drop=True)
                pb = gb.pairs.merge(common, on=key).sort_values(key).reset_index(drop=True)
                cats = ga.categories
                k = cats.size
                blocks = []
                for tag, p in (("a", pa), ("b", pb)):
                    if ga.track == "ordinal":
                        sc = ctx.scales[judge]
                        hi, ji = _cat_index(p["h_score"].to_numpy(float), sc), _cat_index(p["score"].to_numpy(float), sc)
                    else:
                        index = {c: i for i, c in enumerate(cats)}
                        hi = np.array([index[v] for v in p["h_verdict"]], dtype=np.int64)
                        ji = np.array([index[v] for v in p["j_verdict"]], dtype=np.int64)
                    name = ("pair", a, b, judge, tag)
                    ctx.blocks.add(name, p["item_id"].to_numpy(), hi * k + ji, k * k)
                    blocks.append(name)
                specs.append(_PairSpec(a=a, b=b, judge=judge, track=ga.track, pool=ga.pool, categories=cats,
                                       pairs_a=pa, pairs_b=pb, block_a=blocks[0], block_b=blocks[1]))
    return specs


def _point_metric(track: str, pairs: pd.DataFrame, categories: np.ndarray, metric: str) -> float:
    if track == "ordinal":
        j, h = pairs["score"].to_numpy(float), pairs["h_score"].to_numpy(float)
        if metric == "mae":
            return ag.mean_absolute_error(j, h)
        if np.ptp(j) == 0 and np.ptp(h) == 0:
            return float("nan")
        return ag.weighted_kappa(j, h, categories)
    scores = ag.verdict_scores(pairs["j_verdict"].to_numpy(object), pairs["h_verdict"].to_numpy(object))
    return float(getattr(scores, metric))


def _paired_frame(specs: list[_PairSpec], ctx: _Context) -> pd.DataFrame:
    rows = []
    pooled: dict[tuple[str, str, str, str], list[_PairSpec]] = {}
    for s in specs:
        pooled.setdefault((s.a, s.b, s.track, s.pool), []).append(s)
    entries = [(s.judge, [s]) for s in specs] + [(POOLED, v) for _, v in sorted(pooled.items(), key=lambda kv: kv[0])]
    for judge_name, group in entries:
        first = group[0]
        pa = pd.concat([s.pairs_a for s in group], ignore_index=True)
        pb = pd.concat([s.pairs_b for s in group], ignore_index=True)
        k = first.categories.size
        reps_a = _table_reps(ctx, [s.block_a for s in group], k)
        reps_b = _table_reps(ctx, [s.block_b for s in group], k)
        for metric in PAIRED_METRICS[first.track]:
            va = _point_metric(first.track, pa, first.categories, metric)
            vb = _point_metric(first.track, pb, first.categories, metric)
            row: dict[str, Any] = {"a": first.a, "b": first.b, "judge": judge_name, "track": first.pool, "metric": metric,
                                   "n": len(pa), "n_items": int(pa["item_id"].nunique()), "value_a": va, "value_b": vb,
                                   "diff": va - vb}
            if reps_a is not None and reps_b is not None:
                if first.track == "ordinal":
                    tol = float(first.categories[1] - first.categories[0])
                    da = ordinal_stats(reps_a, first.categories, tol)[metric]
                    db = ordinal_stats(reps_b, first.categories, tol)[metric]
                else:
                    da, db = verdict_stats(reps_a)[metric], verdict_stats(reps_b)[metric]
                d = da - db
                lo, hi = percentile_interval(d, ctx.level)
                row.update(diff_lo=float(lo), diff_hi=float(hi), p=paired_pvalue(d))
            else:
                row.update(diff_lo=float("nan"), diff_hi=float("nan"), p=float("nan"))
            better_high = metric != "mae"
            row["better"] = "" if not math.isfinite(row["diff"]) or row["diff"] == 0 else (
                first.a if (row["diff"] > 0) == better_high else first.b)
            rows.append(row)
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    frame["p_holm"] = np.nan
    per = frame[frame["judge"] != POOLED]
    for idx in per.groupby(["a", "b", "track", "metric"]).groups.values():
        frame.loc[idx, "p_holm"] = holm(frame.loc[idx, "p"].to_numpy(float))
    pooled_rows = frame["judge"] == POOLED
    frame.loc[pooled_rows, "p_holm"] = frame.loc[pooled_rows, "p"]
    return frame
