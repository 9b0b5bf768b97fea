"""The calibration page: the figures and tables ``calibrate`` and ``estimate`` compute, by the same library calls
(``metrics.calibration.calibrate``, ``estimation.match_units`` / ``estimate_units`` / ``conformal_units``) and
the same renderers (``report.calibration.render_html``, ``report.estimate.estimate_section_html``): the viewer
never computes a number of its own. Reading the judgments for them loads the stores' score columns, as
``calibrate`` does, so the page is built when it is first opened, not at start."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scijudge.errors import ScijudgeError

def judgments_frame(runs: Sequence[Path]) -> tuple[Any, Any, dict[str, dict[str, Any]]]:
    """The stores read as calibrate reads them (``Judgments.read``, the score columns only): the current judgments
    without perturbed variants, the ``Judgments`` value (its ``recorded_scales()``: one scale per judge, as
    estimate reads them) and the scales per run (as calibrate reads them: each contender on its own run's scale)."""
    from scijudge.metrics.frames import CALIBRATE_COLUMNS, Judgments

    read = Judgments.read(list(runs), columns=CALIBRATE_COLUMNS)
    return read.originals(), read, read.scales


def labels_frame(paths: Sequence[Path]) -> Any:
    """Every labels file as one labels frame (``load_labels_frame`` each, then the duplicate check of
    ``labels_to_frame`` across files)."""
    import pandas as pd

    from scijudge.labels import load_labels_frame

    frames = [load_labels_frame(p) for p in paths]
    frame = pd.concat(frames, ignore_index=True)
    keys = frame[["item_id", "judge", "part"]].assign(annotator=frame["annotator"].fillna(""))
    if keys.duplicated().any():
        row = frame[keys.duplicated()].iloc[0]
        from scijudge.errors import InputError

        raise InputError(f"duplicate label: annotator {row['annotator']!r} labelled item {row['item_id']!r}, judge "
                         f"{row['judge']!r} in two of the labels files", file=row["source_file"],
                         line=int(row["source_line"]))
    return frame


def calibration_result(judgments: Any, labels: Any, run_scales: dict[str, dict[str, Any]], *, n_boot: int,
                       seed: int = 0) -> Any:
    """``calibrate`` as the command runs it: each contender on its own run's recorded scale (a jury's continuous
    scale never changes its members' figures)."""
    from scijudge.metrics.calibration import calibrate

    return calibrate(judgments, labels, n_boot=n_boot, seed=seed, allow_extra_labels=True, run_scales=run_scales)


def calibration_page(runs: Sequence[Path], label_paths: Sequence[Path], picks: Path | None, *, n_boot: int,
                     seed: int = 0, alpha: float = 0.05, coverage: float = 0.9) -> str:
    """The calibration report (``render_html``) with the estimates section, as one HTML page."""
    from scijudge.estimation import conformal_units, estimate_units, match_units
    from scijudge.labels import provenance_note
    from scijudge.report.calibration import render_html
    from scijudge.report.estimate import design_warnings, estimate_section_html

    judgments, read, run_scales = judgments_frame(runs)
    labels = labels_frame(label_paths)
    result = calibration_result(judgments, labels, run_scales, n_boot=n_boot, seed=seed)
    page = render_html(result, title="scijudge view: calibration")
    extra = []
    warnings: list[str] = []
    try:
        design = None
        if picks is not None:
            from scijudge.estimation.select import read_picks

            design = read_picks(picks)
        scales = {judge: sc.meta() for judge, sc in read.recorded_scales().items()}  # disagreeing runs: refused
        units = match_units(judgments, labels, scale=scales or None)
        table = estimate_units(units, alpha=alpha, picks=design)
        warnings += [*(units.notes or []), *design_warnings(table)]  # the words `estimate` prints
        _sets, cover = conformal_units(units, 1 - coverage, seed=seed)
        extra.append(estimate_section_html(table, cover))
    except ScijudgeError as exc:
        import html

        extra.append(f"<h2>Estimates</h2><p class='note'>not computed: {html.escape(str(exc))}</p>")
    import html

    note, from_model = provenance_note(labels)
    extra.append(f"<p class='note'>{html.escape(note)}" + (" (some labels come from a model: agreement with them is "
                                                           "not calibration against humans)" if from_model else "")
                 + "</p>")
    top = "".join(f"<p class='warn'>warning: {html.escape(w)}</p>" for w in warnings)
    page = page.replace("</style>", _READABLE + "</style>", 1)
    return page.replace("</h1>", "</h1>" + top, 1).replace("</body>", "\n".join(extra) + "</body>")


_READABLE = ("body{max-width:1360px}table{display:block;overflow-x:auto;max-width:100%}"
             ".warn{background:#fff6d6;border:1px solid #e6cf7a;padding:.3em .6em;color:#6b4a00}")
"""The viewer's additions to the report's style: readable at 1,400 px, every table scrolling inside itself."""
