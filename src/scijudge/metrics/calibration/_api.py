"""Calibration of judges against human labels: agreement, optimism bias, intervals and paired comparisons.

``calibrate(judgments, labels)`` compares every contender (a model, per run and spec version) with the
human consensus, per rubric (run-store ``judge``) and pooled over rubrics that share a scale. Point
estimates come from ``scijudge.metrics.agreement`` (scipy / scikit-learn); 95% intervals from a cluster
bootstrap over items (``scijudge.metrics.bootstrap``), vectorised through contingency tables
(``scijudge.metrics.tables``). Abstentions are counted as lost coverage and never imputed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from scijudge.errors import InputError
from scijudge.metrics.calibration._blocks import _Blocks, _Context, one_blas_thread, trusted_library_arguments
from scijudge.metrics.calibration._inputs import (
    _attach,
    _check_duplicate_judgments,
    _check_unknown_items,
    _prepare_labels,
    _resolve_checklist_parts,
    _validate_scores,
)
from scijudge.metrics.calibration._result import CalibrationResult, ScaleTuple
from scijudge.metrics.calibration.ceiling import _ceiling_blocks, _ceiling_frame
from scijudge.metrics.calibration.ordinal import _ordinal_frames, _ordinal_groups
from scijudge.metrics.calibration.paired import _pair_blocks, _paired_frame
from scijudge.metrics.calibration.position import position_consistency
from scijudge.metrics.calibration.verdict import _verdict_frames, _verdict_groups
from scijudge.metrics.calibration.scales import (
    _consensus,
    resolve_contender_scales,
    norm_verdicts,
)
from scijudge.metrics.groups import prepare_judgments
from scijudge.vocab import few_units_note


def calibrate(
    judgments: Any,
    labels: Any,
    *,
    scale: ScaleTuple | Mapping[str, ScaleTuple] | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    n_bins: int = 10,
    allow_extra_labels: bool = False,
    specs: Any = None,
    tasks: Any = None,
    run_scales: Mapping[str, Mapping[str, Any]] | None = None,
    selective: Mapping[str, float] | None = None,
) -> CalibrationResult:
    """Compare every (model, run, spec version) in ``judgments`` with the human ``labels``.

    Args:
        judgments: run store path(s) or a ``Judgments`` (perturbed variants left out, each run's recorded scales
            read as ``run_scales``), or run-store rows (``Run(path).to_pandas()``; several runs concatenated, with a
            ``source`` column naming the run when they share a model).
        labels: a labels file, a list of ``HumanLabel`` or any frame with item_id, judge, part, score|verdict,
            annotator.
        scale: ``(lo, hi, step)`` or ``(lo, hi, step, "continuous")`` for every judge, or a mapping judge →
            scale; by default the scale of the spec whose hash the judgments record (``specs`` given here,
            then shipped specs), else the family default (Likert 1–5). A continuous scale accepts any value in
            range: MAE, bias, correlations and ICC use raw values, κ/α/AC2 the step grid after rounding.
        n_boot: bootstrap resamples of items (0 disables intervals and bootstrap p-values).
        seed: seed of the resampling: the same seed gives the same intervals.
        allow_extra_labels: accept labels for items that no run judged (otherwise an error, since it usually
            means mismatched ids). Coverage then counts only labels of items some run judged.
        specs: judge specs (``JudgeSpec``) the runs may have used, for their scales (matched by hash).
        tasks: ResearchRubrics tasks (``importers.researchrubrics.load_tasks``), to resolve checklist labels that
            name a criterion by its position in the task (by text or id needs nothing).
        run_scales: the scales each run recorded, ``{source: {judge: 'lo,hi,step[,continuous]'}}`` (``source``: the
            judgments' ``source`` column; the CLI passes each store's meta ``scales``), for the judges ``scale``
            does not name.
        selective: the selective curve's ``target``, ``risk`` and ``tolerance`` (default 0.8, 0.1, 0): the
            threshold fixed-sequence testing guarantees is marked on each contender's curve.

    Each contender is calibrated on its own scale, so one contender's presence never changes another's figures:
    a judge has one grid (lo, hi, step) for all its contenders, and is continuous for a contender when ``scale``
    says so for the judge, or else when that contender's run recorded a continuous scale (a mean jury), its
    family's track is continuous, or its judgments are decision judgments scored by the expected level. A contender
    on a continuous scale is compared with the raw human median, the others with the median snapped to the grid;
    the ``scale`` column of ``leaderboard`` and ``per_rubric`` says which scale each row was calibrated on, the
    leaderboard ranks within a scale, and a note names the contenders of a judge whose scales differ.
    """
    if not isinstance(judgments, pd.DataFrame):
        from scijudge.metrics.frames import Judgments

        read = Judgments.read(judgments)
        judgments, run_scales = read.originals(), read.scales if run_scales is None else run_scales
    if not isinstance(labels, pd.DataFrame):
        from scijudge.labels import labels_frame_of

        labels = labels_frame_of(labels)
    with one_blas_thread() as caller_threads, trusted_library_arguments():
        return _calibrate(judgments, labels, scale=scale, n_boot=n_boot, seed=seed, level=level, n_bins=n_bins,
                          allow_extra_labels=allow_extra_labels, specs=specs, tasks=tasks, caller_threads=caller_threads,
                          run_scales=run_scales, selective=selective)


def _calibrate(judgments: pd.DataFrame, labels: pd.DataFrame, *, scale: Any, n_boot: int, seed: int, level: float,
               n_bins: int, allow_extra_labels: bool, specs: Any, tasks: Any, caller_threads: Any,
               run_scales: Any = None, selective: Mapping[str, float] | None = None) -> CalibrationResult:
    df = prepare_judgments(judgments)
    lab = _prepare_labels(labels)
    if df.empty:
        raise InputError("no judgments to calibrate: the runs are empty")
    if lab.empty:
        raise InputError("no labels to calibrate against")
    lab = _resolve_checklist_parts(lab, df, tasks)
    if not allow_extra_labels:
        _check_unknown_items(df, lab)
    df["verdict"] = norm_verdicts(df["verdict"])

    keys = ["item_id", "judge"]  # judges with an (item, judge) in both, by hash join, not a set of Python tuples
    judged_keys = pd.MultiIndex.from_frame(df[keys])
    labelled_and_judged = pd.MultiIndex.from_frame(lab[keys]).isin(judged_keys)
    overlap_judges = sorted(set(lab.loc[labelled_and_judged, "judge"].unique().tolist()))
    if not overlap_judges:
        raise InputError(
            "no judgment matches a label on (item_id, judge): the runs judged "
            f"{sorted(df['judge'].unique())[:6]} on {df['item_id'].nunique()} items, the labels cover "
            f"{sorted(lab['judge'].unique())[:6]} on {lab['item_id'].nunique()} items",
            field="judge",
        )
    scales, continuous, partly, notes = resolve_contender_scales(df, overlap_judges, scale, specs, run_scales)
    _validate_scores(df, lab, scales, continuous, partly)
    score_cons, verdict_cons, no_consensus = _consensus(lab, scales, continuous)
    score_cons, verdict_cons, n_unjudged = _judged_units_only(judged_keys, score_cons, verdict_cons)
    if n_unjudged:
        notes.append(f"{n_unjudged} labelled unit(s) of items no run judged with that judge were left out of "
                     "coverage (allow_extra_labels)")
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
    items = sorted(_ids(ord_matched) | _ids(ver_matched) | _ids(lab) & _ids(df))
    blocks = _Blocks(items)
    ctx = _Context(scales=scales, blocks=blocks, level=level, n_bins=n_bins, notes=notes, continuous=continuous,
                   caller_threads=caller_threads, partly=partly)

    ord_groups = _ordinal_groups(ord_matched, score_cons, ctx)
    ver_groups = _verdict_groups(ver_matched, verdict_cons, ctx)
    if not any(len(g.pairs) for g in [*ord_groups, *ver_groups]):
        matched = pd.concat([ord_matched, ver_matched], ignore_index=True)
        n_abstained = int((matched["status"] == "abstained").sum())
        raise InputError(
            f"nothing to calibrate: none of the {len(matched)} judgment(s) that match a label has a usable score "
            f"or verdict ({n_abstained} abstained, {len(matched) - n_abstained} without a value); "
            "`scijudge export` shows each abstention's reason", field="status")
    ceiling_specs = _ceiling_blocks(lab, scales, ctx)
    pair_specs = _pair_blocks(ord_groups, ver_groups, ctx)
    blocks.run(n_boot, seed)
    if n_boot <= 0:
        notes.append("bootstrap disabled (n_boot=0): no intervals or paired p-values")

    per_rubric, leaderboard, conf_rows, rel_rows = _ordinal_frames(ord_groups, ctx)
    v_per_rubric, v_leaderboard, v_conf, v_rel = _verdict_frames(ver_groups, ctx)
    notes.extend(_few_units_note(pd.concat([per_rubric, v_per_rubric], ignore_index=True)))
    with ctx.caller_threads():  # its point estimates are the library's (one_blas_thread)
        ceiling = _ceiling_frame(ceiling_specs, ctx)
    paired = _paired_frame(pair_specs, ctx)
    position = position_consistency(df, verdict_cons)
    confusion = pd.DataFrame(conf_rows + v_conf, columns=["contender", "judge", "track", "human", "judge_value", "count"])
    reliability = pd.DataFrame(rel_rows + v_rel, columns=["contender", "judge", "track", "source", "strategy", "bin",
                                                          "lower", "upper", "count", "confidence", "accuracy"])
    return CalibrationResult(
        leaderboard=leaderboard, per_rubric=per_rubric, verdict_leaderboard=v_leaderboard,
        verdict_per_rubric=v_per_rubric, human_ceiling=ceiling, paired=paired, confusion=confusion,
        reliability=reliability, scales=scales, n_boot=n_boot, seed=seed, level=level, notes=notes,
        continuous=sorted(continuous), position=position,
        selective=_selective(df_rel, lab, selective),
    )


def _selective(judgments: pd.DataFrame, labels: pd.DataFrame, options: Mapping[str, float] | None) -> pd.DataFrame:
    """The selective curves of the contenders with a confidence (``scijudge.metrics.selective``)."""
    from scijudge.metrics.selective.curve import selective_curves, selective_options

    return selective_curves(judgments, labels, **selective_options(options))


def _ids(frame: pd.DataFrame) -> set[Any]:
    """The distinct item ids of a frame, as a set."""
    return set(frame["item_id"].unique().tolist())


def _judged_units_only(judged: pd.MultiIndex, *cons: pd.DataFrame) -> tuple[Any, ...]:
    """Consensus rows whose (item, judge) some run judged (``judged``: every judgment's pair; isin takes the
    distinct ones itself), and how many were dropped (extra labels)."""
    kept, dropped = [], 0
    for frame in cons:
        inside = pd.MultiIndex.from_frame(frame[["item_id", "judge"]]).isin(judged) if len(frame) else np.ones(0, bool)
        kept.append(frame[inside])
        dropped += int((~inside).sum())
    return (*kept, dropped)


def _few_units_note(per_rubric: pd.DataFrame) -> list[str]:
    """One note naming each (judge, contender) compared on fewer than ``FEW_UNITS`` labelled units."""
    if per_rubric.empty or "n" not in per_rubric:
        return []
    counts = [(f"{r['judge']} / {r['contender']}", r["n"]) for r in per_rubric.to_dict("records")]
    return few_units_note(counts, "labelled units", "read their intervals, not their points", name_at_most=4,
                          collapsed="{k} of {total} (judge, contender) pairs, {lo} to {hi} units each "
                                    "(per_rubric.csv's n)")
