"""CLI command `scijudge compliance RUN`: checklist compliance per report and per axis, coverage, tokens, cost."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Any, Literal

import typer



def _records(frame: Any) -> list[dict[str, Any]]:
    """A frame as JSON-safe records (NaN → null)."""
    out = []
    for record in frame.to_dict(orient="records"):
        out.append({k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in record.items()})
    return out


def compliance_cmd(
    run: Annotated[Path, typer.Argument(help="Run store written by `scijudge judge` with a checklist judge.")],
    judge: Annotated[list[str] | None, typer.Option("--judge", "-j", help="Only these checklist judges: name, prefix or glob; repeatable (default: every one in the run).")] = None,
    policy: Annotated[Literal["judged-only", "bounds", "zero"], typer.Option(help="Missing criteria: 'judged-only' (renormalise over judged criteria), 'bounds' (a value only for fully judged reports) or 'zero' (source-compatible: unjudged criteria score 0, as ResearchRubrics does; never the default).")] = "judged-only",
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

    Example: scijudge compliance runs/rr.sqlite --labels datasets/researchrubrics_example/human_verdicts.jsonl   (runs/rr.sqlite from: scijudge judge datasets/researchrubrics_example/tasks.jsonl --reports datasets/researchrubrics_example/reports -j researchrubrics.checklist -m openai/gpt-4o-mini --run runs/rr.sqlite)
    """
    import pandas as pd

    from scijudge.commands._console import console, out as stdout
    from scijudge.metrics.compliance import (
        FACETS,
        POLICY_LABELS,
        axis_summary,
        compliance_by_axis,
        compliance_by_report,
        compliance_summary,
        facet_summary,
        facets_from_tasks,
    )
    from scijudge.metrics.frames import Judgments
    from scijudge.report.text import print_frame

    frame = Judgments.read(run, judges=judge).frame
    judge = None  # selected above
    per_report = compliance_by_report(frame, judge=judge, policy=policy)
    task_list = None
    if tasks is not None:
        from scijudge.importers.researchrubrics import load_tasks

        task_list = load_tasks(tasks, any_axis=allow_unknown_axes)
        per_report = facets_from_tasks(per_report, task_list)
    summary = compliance_summary(per_report)
    result: dict[str, Any] = {"policy": policy, "reports": _records(per_report), "summary": _records(summary)}
    shown: list[tuple[pd.DataFrame, str]] = [(_report_rows(per_report, summary), "Compliance per report (policy: "
                                              f"{POLICY_LABELS.get(policy, policy)})")]  # printed after the file
    contender = ["judge", "model", "spec_hash"]
    for facet in FACETS:
        by_facet = facet_summary(per_report, facet)
        if by_facet.empty:
            continue
        shown.append((by_facet[[*contender, facet, "reports", "compliance", "compliance_lo", "compliance_hi",
                                "coverage"]], f"Compliance by {facet.replace('_', ' ')} (mean over reports)"))
        result.setdefault("by_facet", {})[facet] = _records(by_facet)
    if axes:
        per_axis = compliance_by_axis(frame, judge=judge, policy=policy)
        by_axis = axis_summary(per_axis)
        shown.append((by_axis[[*contender, "axis", "compliance", "compliance_lo", "compliance_hi", "coverage",
                               "n_judged", "n_criteria"]], "Compliance per axis (mean over reports)"))
        result["axes"] = _records(per_axis)
        result["axis_summary"] = _records(by_axis)
    confusions: list[tuple[pd.DataFrame, str]] = []
    if labels is not None:
        shown += _agreement(frame, labels, task_list, "ternary" if ternary else "binary", annotator, result,
                            confusions)

    if out is not None:
        from scijudge._files import refuse_overwrite, write_text

        out = Path(out)
        refuse_overwrite(out, [labels, tasks], stores=[run])
        write_text(out, json.dumps(result, indent=2, default=str))  # whole or not at all
        console.print(f"numbers written to {out}")
    for table, title in shown + confusions:
        print_frame(table, title, stdout)
    return result


def _report_rows(per_report: Any, summary: Any) -> Any:
    """The per-report table: one row per report, then the mean of each contender's reports."""
    import pandas as pd

    contender = ["judge", "model", "spec_hash"]
    rows = [{"report": r["item_id"], **{k: r[k] for k in contender}, "compliance": r["compliance"],
             "lo": r["compliance_lo"], "hi": r["compliance_hi"], "coverage": r["coverage"],
             "judged": r["n_judged"], "criteria": r["n_criteria"], "abstained": r["n_abstained"],
             "tokens_in": r["tokens_in"], "tokens_out": r["tokens_out"], "cost": r["cost"]}
            for _, r in per_report.iterrows()]
    rows += [{"report": f"mean of {r['reports']}", **{k: r[k] for k in contender}, "compliance": r["compliance"],
              "lo": r["compliance_lo"], "hi": r["compliance_hi"], "coverage": r["coverage"],
              "judged": f"{r['complete_reports']} complete", "criteria": None, "abstained": r["n_abstained"],
              "tokens_in": r["tokens_in"], "tokens_out": r["tokens_out"], "cost": r["cost"]}
             for _, r in summary.iterrows()]
    return pd.DataFrame(rows)


def _agreement(frame: Any, labels: Path, task_list: Any, mode: str, annotator: str | None, result: dict[str, Any],
               confusions: list[tuple[Any, str]]) -> list[tuple[Any, str]]:
    """Agreement with the human verdicts (its table, and each contender's confusion matrix into ``confusions``)."""
    import pandas as pd

    from scijudge.importers.researchrubrics import load_human_verdicts
    from scijudge.metrics.compliance import checklist_agreement

    human = load_human_verdicts(labels, tasks=task_list)
    agreements = checklist_agreement(frame, human, mode=mode, judge=None,  # type: ignore[arg-type]
                                     annotator=annotator)
    for a in agreements:
        matrix = a.confusion_frame().reset_index(names="rows: human, columns: judge")
        confusions.append((matrix, f"confusion ({a.judge} · {a.model})"))
    result["agreement"] = [json.loads(a.model_dump_json()) for a in agreements]
    return [(pd.DataFrame([{"judge": a.judge, "model": a.model, "spec_hash": a.spec_hash, "tasks": a.n_tasks,
                            "pairs": a.n_pairs, "abstained": a.n_abstained, "unjudged": a.n_unjudged,
                            "macro_f1_per_task": a.macro_f1, "accuracy": a.accuracy, "kappa": a.kappa}
                           for a in agreements]), f"Agreement with human verdicts ({mode})")]
