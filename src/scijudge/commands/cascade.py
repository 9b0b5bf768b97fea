"""CLI command `scijudge cascade`: selective judging over stored judgments, with a guaranteed agreement with humans."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

import typer

from scijudge.errors import InputError

_MEMBER_HELP = ("A member, cheapest first: MODEL, MODEL@ENDPOINT (as stored, with '://'), or either with #JUDGE; "
                "repeat for a cascade. Each needs stored rating probabilities (--mode decision, --rating-probs, "
                "or a majority / dawid-skene jury).")
_RULE = ("decision rule: for each judge, member k of K sees the items no earlier member trusted; on its labelled "
         "ones, from the most confident down (starting at 10% of them, or at the fewest a test can reject with), it "
         "tests H0 'agreement of the kept < target' with the exact binomial p-value P(Bin(n, target) >= agreeing) "
         "at level risk/K, stops at the first non-rejection and trusts confidence >= the last rejected threshold")


def cascade_cmd(
    runs: Annotated[list[Path], typer.Argument(help="Run stores holding the members' judgments.")],
    member: Annotated[list[str], typer.Option("--member", "-m", help=_MEMBER_HELP)],
    labels: Annotated[Path, typer.Option("--labels", "-l", help="Human labels (JSONL or CSV); several raters per "
                                         "item -> their mean.")],
    target: Annotated[float, typer.Option(help="Agreement with humans to guarantee on the trusted judgments.")],
    name: Annotated[str, typer.Option("--name", help="The cascade's name: its judgments get model 'cascade:NAME'.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Run store (SQLite) to write the cascade's judgments to.")],
    risk: Annotated[float, typer.Option(help="Probability that the guarantee fails (split over the members).")] = 0.1,
    tolerance: Annotated[float, typer.Option(help="Agreement is |score - human| <= T (0: exact match; decision mode's "
                                             "expected scores need --decision-score mode or T >= 0.5).")] = 0.0,
    seed: Annotated[int, typer.Option(help="Orders judgments of equal confidence (a seeded hash of the item).")] = 0,
    escalated: Annotated[Path | None, typer.Option(help="Write the escalated items as a select-labels picks CSV "
                                                   "(the labelling queue).")] = None,
    save: Annotated[Path | None, typer.Option(help="Write the thresholds (JSON) for `scijudge judge --cascade`.")] = None,
) -> Any:
    """Trust a judge where it is confident enough to meet a target agreement with humans; escalate the rest.

    Thresholds are chosen on the labelled items by fixed-sequence testing with exact binomial p-values; with
    probability >= 1 - risk the trusted judgments of each judge agree with humans on >= target of the items
    (risk split equally over the members, Bonferroni). Items no member trusts abstain with reason 'escalated'
    in the output store, which calibrate, estimate, export and view read like any run.

    Example: scijudge cascade jury.sqlite -m jury:panel --labels datasets/yescieval_example/labels.jsonl --target 0.6 --tolerance 1 --risk 0.2 --name demo --out cascade.sqlite --save thresholds.json   (jury.sqlite from: scijudge import-judgments datasets/jury_example/panel.jsonl --run panel.sqlite; scijudge jury panel.sqlite -m judge-a -m judge-b -m judge-c --method majority --name panel --out jury.sqlite)
    """
    from rich.console import Console
    from rich.markup import escape

    from scijudge._files import refuse_overwrite
    from scijudge.estimation.select import PICK_COLUMNS
    from scijudge.metrics.jury.api import read_runs
    from scijudge.metrics.selective import cascade, cost_per_item, escalated_picks, write_cascade
    from scijudge.metrics.selective.store import write_picks

    if not labels.exists():
        raise InputError("labels file not found", file=labels)
    refuse_overwrite(out, [labels], stores=runs, field="out")
    for path, field in ((escalated, "escalated"), (save, "save")):
        if path is not None:
            refuse_overwrite(path, [labels, out], stores=runs, field=field)
    frame, scales = read_runs(list(runs))
    result = cascade(frame, labels, members=list(member), target=target, risk=risk,
                     tolerance=tolerance, seed=seed, name=name)
    merged: dict[str, Any] = {}
    for stored in scales.values():
        merged.update(stored)
    write_cascade(out, result, runs=list(runs), labels=labels, scales=merged)
    console = Console(highlight=False, soft_wrap=True)
    d = result.decisions
    console.print(f"{len(d)} cascade judgments ({int(d['trusted'].sum())} trusted, {int((~d['trusted']).sum())} "
                  f"escalated) -> {escape(str(out))} as model cascade:{escape(name)}")
    for judge, group in result.thresholds.groupby("judge", sort=True):
        console.print(f"  {escape(str(judge))}:")
        for row in group.to_dict("records"):
            console.print("    " + escape(_threshold_line(row)))
        esc = d[(d["judge"] == judge) & ~d["trusted"]]
        console.print(f"    escalated to humans: {len(esc)}/{int((d['judge'] == judge).sum())}")
    share = result.coverage()
    total = share.groupby("member")["n"].sum()
    console.print("coverage: " + ", ".join(f"{escape(m or 'escalated')} {n / total.sum():.1%}"
                                         for m, n in total.items()))
    cal = d[d["trusted"] & d["labelled"]]
    if len(cal):
        console.print(f"trusted labelled items: {int(cal['agree'].sum())}/{len(cal)} agree "
                      f"({cal['agree'].mean():.3f})")
    console.print(f"guarantee: {escape(result.guarantee)}")
    console.print(escape(_RULE))
    for row in cost_per_item(result).to_dict("records"):
        console.print("cost per item, " + escape(_cost_line(row)))
    for note in result.notes:
        console.print(f"[yellow]note:[/] {escape(note)}")
    if escalated is not None:
        picks = escalated_picks(result, PICK_COLUMNS, seed=seed)
        write_picks(escalated, picks)
        console.print(f"wrote {escape(str(escalated))}: {len(picks)} escalated item(s) for the labelling queue")
    if save is not None:
        result.save(save)
        console.print(f"wrote {escape(str(save))}: scijudge judge ITEMS -j JUDGE --cascade {escape(str(save))} "
                      "--run RUN")
    return result


def _threshold_line(row: dict[str, Any]) -> str:
    head = f"{row['position']}. {row['member']}: "
    if math.isnan(row["threshold"]):
        return head + f"no threshold ({row['reason']}); {row['n_reached']} item(s) passed on"
    return (head + f"trusts confidence >= {row['threshold']:.4g} at risk {row['risk_share']:.3g}: "
            f"{row['n_trusted']}/{row['n_reached']} item(s) it saw; calibration {row['n_agree']}/{row['n_kept']} "
            f"agree ({row['agreement']:.3f}, 95% CI {row['ci_low']:.3f}-{row['ci_high']:.3f}, p = {row['p_value']:.3g}) "
            f"of {row['n_calibration']} labelled")


def _cost_line(row: dict[str, Any]) -> str:
    judge, last = row["judge"], row["last_member"]
    if not math.isnan(row["cascade_cost"]) and not math.isnan(row["last_cost"]) and row["last_cost"] > 0:
        return (f"{judge}: cascade {row['cascade_cost']:.4g} vs always {last} {row['last_cost']:.4g} "
                f"({row['cascade_cost'] / row['last_cost']:.2f}x; {row['cascade_calls']:.2f} judgments per item)")
    return f"{judge}: {row['cascade_calls']:.2f} judgments per item against 1 of always {last} (cost not recorded)"
