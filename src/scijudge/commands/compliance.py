"""CLI command `scijudge compliance RUN`: checklist compliance per report and per axis, coverage, tokens, cost."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Any

import typer

from scijudge.errors import InputError


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _interval(lo: float, hi: float) -> str:
    if math.isnan(lo) or math.isnan(hi):
        return "-"
    return _fmt(lo) if abs(hi - lo) < 1e-12 else f"{lo:.3f}–{hi:.3f}"


def _contender(row: Any) -> str:
    return f"{row['judge']} · {row['model']} · {row['spec_hash'][:8]}"


def _records(frame: Any) -> list[dict[str, Any]]:
    """A frame as JSON-safe records (NaN → null)."""
    out = []
    for record in frame.to_dict(orient="records"):
        out.append({k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in record.items()})
    return out


def compliance_cmd(
    run: Annotated[Path, typer.Argument(help="Run store written by `scijudge judge` with a checklist judge.")],
    judge: Annotated[str | None, typer.Option("--judge", "-j", help="Only this checklist judge (default: every one in the run).")] = None,
    policy: Annotated[str, typer.Option(help="Missing criteria: 'judged-only' (renormalise over judged criteria), 'bounds' (a value only for fully judged reports) or 'zero' (source-compatible: unjudged criteria score 0, as ResearchRubrics does; never the default).")] = "judged-only",
    axes: Annotated[bool, typer.Option("--axes/--no-axes", help="Also print compliance per axis.")] = True,
    labels: Annotated[Path | None, typer.Option("--labels", "-l", help="Human verdicts JSONL {sample_id, criterion, verdict}: adds agreement (macro-F1, accuracy, kappa).")] = None,
    tasks: Annotated[Path | None, typer.Option(help="Task file: checks that labelled criteria exist, and supplies domain/complexity for runs that lack them.")] = None,
    allow_unknown_axes: Annotated[bool, typer.Option(help="Accept task files whose axes are outside ResearchRubrics' seven (kept as written).")] = False,
    ternary: Annotated[bool, typer.Option(help="Agreement over three classes (default: binary, partially counted as not satisfied).")] = False,
    annotator: Annotated[str | None, typer.Option(help="Use this annotator's verdicts when several labelled a criterion.")] = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Also write every number to this JSON file.")] = None,
) -> dict[str, Any]:
    """Print checklist compliance per report and per axis, with coverage, tokens and cost.

    Compliance = sum(weight x score) / sum(positive weights); abstained criteria are never scored 0: coverage
    shows how many were judged and lo-hi is the range the missing ones could produce.

    Example: scijudge compliance runs/rr.sqlite --labels datasets/researchrubrics_example/human_verdicts.jsonl
    """
    from rich.console import Console
    from rich.table import Table

    from scijudge.metrics.compliance import (
        FACETS,
        POLICY_LABELS,
        axis_summary,
        checklist_agreement,
        compliance_by_axis,
        compliance_by_report,
        compliance_summary,
        facet_summary,
        facets_from_tasks,
    )
    from scijudge.run.store import Run

    if not Path(run).exists():
        raise InputError("run store not found", file=run)
    frame = Run(run, create=False).to_pandas()
    per_report = compliance_by_report(frame, judge=judge, policy=policy)  # type: ignore[arg-type]
    task_list = None
    if tasks is not None:
        from scijudge.importers.researchrubrics import load_tasks

        task_list = load_tasks(tasks, any_axis=allow_unknown_axes)
        per_report = facets_from_tasks(per_report, task_list)
    summary = compliance_summary(per_report)
    console = Console()

    table = Table(title=f"Compliance per report (policy: {POLICY_LABELS.get(policy, policy)})")
    for name, justify in (("judge · model · spec", "left"), ("report", "left"), ("compliance", "right"),
                          ("lo–hi", "right"), ("coverage", "right"), ("judged/total", "right"),
                          ("abstained", "right"), ("tokens in", "right"), ("tokens out", "right"), ("cost", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for _, row in per_report.iterrows():
        table.add_row(_contender(row), str(row["item_id"]), _fmt(row["compliance"]),
                      _interval(row["compliance_lo"], row["compliance_hi"]), _fmt(row["coverage"], 2),
                      f"{row['n_judged']}/{row['n_criteria']}", str(row["n_abstained"]), f"{row['tokens_in']:,}",
                      f"{row['tokens_out']:,}", _fmt(row["cost"], 4))
    for _, row in summary.iterrows():
        table.add_row(_contender(row), f"[bold]mean of {row['reports']}[/]", _fmt(row["compliance"]),
                      _interval(row["compliance_lo"], row["compliance_hi"]), _fmt(row["coverage"], 2),
                      f"{row['complete_reports']} complete", str(row["n_abstained"]), f"{row['tokens_in']:,}",
                      f"{row['tokens_out']:,}", _fmt(row["cost"], 4), end_section=True)
    console.print(table)

    result: dict[str, Any] = {"policy": policy, "reports": _records(per_report), "summary": _records(summary)}
    for facet in FACETS:
        by_facet = facet_summary(per_report, facet)
        if by_facet.empty:
            continue
        facet_table = Table(title=f"Compliance by {facet.replace('_', ' ')} (mean over reports)")
        for name in ("judge · model · spec", facet, "reports", "compliance", "lo–hi", "coverage"):
            facet_table.add_column(name, justify="left" if name in ("judge · model · spec", facet) else "right")
        for _, row in by_facet.iterrows():
            facet_table.add_row(_contender(row), str(row[facet]), str(row["reports"]), _fmt(row["compliance"]),
                                _interval(row["compliance_lo"], row["compliance_hi"]), _fmt(row["coverage"], 2))
        console.print(facet_table)
        result.setdefault("by_facet", {})[facet] = _records(by_facet)
    if axes:
        per_axis = compliance_by_axis(frame, judge=judge, policy=policy)  # type: ignore[arg-type]
        by_axis = axis_summary(per_axis)
        axis_table = Table(title="Compliance per axis (mean over reports)")
        for name in ("judge · model · spec", "axis", "compliance", "lo–hi", "coverage", "judged/total"):
            axis_table.add_column(name, justify="left" if name in ("judge · model · spec", "axis") else "right")
        for _, row in by_axis.iterrows():
            axis_table.add_row(_contender(row), str(row["axis"]), _fmt(row["compliance"]),
                               _interval(row["compliance_lo"], row["compliance_hi"]), _fmt(row["coverage"], 2),
                               f"{row['n_judged']}/{row['n_criteria']}")
        console.print(axis_table)
        result["axes"] = _records(per_axis)
        result["axis_summary"] = _records(by_axis)

    if labels is not None:
        from scijudge.importers.researchrubrics import load_human_verdicts

        human = load_human_verdicts(labels, tasks=task_list)
        mode = "ternary" if ternary else "binary"
        agreements = checklist_agreement(frame, human, mode=mode, judge=judge, annotator=annotator)
        agree_table = Table(title=f"Agreement with human verdicts ({mode})")
        for name in ("judge · model · spec", "tasks", "pairs", "abstained", "unjudged", "macro-F1 (per task)",
                     "accuracy", "kappa"):
            agree_table.add_column(name, justify="left" if name.startswith("judge") else "right")
        for a in agreements:
            agree_table.add_row(f"{a.judge} · {a.model} · {a.spec_hash[:8]}", str(a.n_tasks), str(a.n_pairs),
                                str(a.n_abstained), str(a.n_unjudged), _fmt(a.macro_f1), _fmt(a.accuracy),
                                _fmt(a.kappa))
        console.print(agree_table)
        for a in agreements:
            console.print(f"confusion ({a.judge} · {a.model}; rows human, columns judge):")
            console.print(a.confusion_frame().to_string())
        result["agreement"] = [json.loads(a.model_dump_json()) for a in agreements]

    if out is not None:
        out = Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2, default=str), encoding="utf-8")
        console.print(f"numbers written to {out}")
    return result
