"""CLI command `scijudge cascade`: selective judging over stored judgments, with a guaranteed agreement with humans."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

import typer

from scijudge.errors import InputError

_MEMBER_HELP = ("A member, cheapest first: MODEL, MODEL@ENDPOINT (as stored, with '://'), or either with #JUDGE; "
                "repeat for a cascade. Each needs a confidence: stored rating probabilities (--mode decision, "
                "--rating-probs, a decision endpoint, a majority / dawid-skene jury's vote shares) or a stored "
                "confidence column.")
_RULES = {
    "whole": ("decision rule: for each judge, every member's threshold is lowered together along one path fixed "
              "before the labels are seen (the members' confidences on a common scale); at each step an item is "
              "decided by the first member whose confidence reaches its threshold, and ONE fixed-sequence test at "
              "the full risk checks H0 'agreement of all trusted judgments < target' with the exact binomial p-value "
              "P(Bin(n, target) >= agreeing); it stops at the first non-rejection and keeps the last rejected step. "
              "Equal confidences are kept or left together."),
    "bonferroni": ("decision rule: for each judge, member k of K sees the items no earlier member trusted; on its "
                   "labelled ones, from the most confident down, it tests H0 'agreement of the kept < target' with the "
                   "exact binomial p-value P(Bin(n, target) >= agreeing) at level risk/K, stops at the first "
                   "non-rejection and trusts confidence >= the last rejected threshold. Equal confidences are kept or "
                   "left together."),
}
_CALIBRATED = ("confidence scale: each member's confidence mapped to its probability of agreeing (a logistic fit on "
               "{share:.0%} of the labelled items, chosen by a fixed hash of the item; the test uses only the others)")


def cascade_cmd(
    runs: Annotated[list[Path], typer.Argument(help="Run stores holding the members' judgments.")],
    member: Annotated[list[str], typer.Option("--member", "-m", help=_MEMBER_HELP)],
    labels: Annotated[Path, typer.Option("--labels", "-l", help="Human labels (JSONL or CSV); several raters per "
                                         "item -> their mean.")],
    target: Annotated[float, typer.Option(help="Agreement with humans to guarantee on the trusted judgments.")],
    name: Annotated[str, typer.Option("--name", help="The cascade's name: its judgments get model 'cascade:NAME'.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Run store (SQLite) to write the cascade's judgments to.")],
    risk: Annotated[float, typer.Option(help="Probability that the guarantee fails.")] = 0.1,
    tolerance: Annotated[float, typer.Option(help="Agreement is |score - human| <= T (0: exact match; decision mode's "
                                             "expected scores need --decision-score mode or T >= 0.5).")] = 0.0,
    seed: Annotated[int, typer.Option(help="Recorded only: ties are tested as whole groups and the calibration split "
                                      "is a fixed hash of the item, so the result is the same for every seed.")] = 0,
    split: Annotated[str, typer.Option("--split", help="whole: one test over the whole cascade at the full risk (the "
                                       "guarantee is on all trusted judgments together); bonferroni: risk/K per "
                                       "member (the guarantee holds for each member's trusted share too).")
                     ] = "whole",
    confidence: Annotated[str, typer.Option("--confidence", help="A judgment's confidence: probs (the probability "
                                            "on the level it gave), stored (its confidence column) or auto (probs "
                                            "where it has them, else stored).")] = "auto",
    calibrate: Annotated[bool, typer.Option("--calibrate/--no-calibrate", help="Map each member's confidence to its "
                                            "probability of agreeing, fitted on a share of the labels the test then "
                                            "does not use (covers more in the simulation; needs >= 10 fitting "
                                            "labels, else the raw confidences are tested on every label).")] = True,
    fit_share: Annotated[float, typer.Option("--fit-share", help="Share of the labelled items that fit the "
                                             "calibration (--calibrate).")] = 0.5,
    escalated: Annotated[Path | None, typer.Option(help="Write the escalated items as a select-labels picks CSV "
                                                   "(the labelling queue).")] = None,
    save: Annotated[Path | None, typer.Option(help="Write the thresholds (JSON) for `scijudge judge --cascade`.")] = None,
) -> Any:
    """Trust a judge where it is confident enough to meet a target agreement with humans; escalate the rest.

    Thresholds are chosen on the labelled items by fixed-sequence testing with exact binomial p-values; with
    probability >= 1 - risk the trusted judgments of each judge agree with humans on >= target of the items.
    By default (--split whole) one test runs over the whole cascade at the full risk, along a path of threshold
    vectors fixed before the labels are seen, and the guarantee is on all trusted judgments together;
    --split bonferroni tests each member at risk/K for a per-member guarantee. Items no member trusts abstain
    with reason 'escalated' in the output store, which calibrate, estimate, export and view read like any run.

    Example: scijudge cascade jury.sqlite -m jury:panel --labels datasets/yescieval_example/labels.jsonl --target 0.6 --tolerance 1 --risk 0.2 --name demo --out cascade.sqlite --save thresholds.json   (jury.sqlite from: scijudge import-judgments datasets/jury_example/panel.jsonl --run panel.sqlite; scijudge jury panel.sqlite -m judge-a -m judge-b -m judge-c --method majority --name panel --out jury.sqlite)
    """
    from scijudge.report.console import plain_console
    from rich.markup import escape

    from scijudge._files import refuse_overwrite
    from scijudge.estimation.select import PICK_COLUMNS
    from scijudge.metrics.frames import Judgments
    from scijudge.metrics.selective import cascade, escalated_picks, write_cascade
    from scijudge.metrics.selective.store import write_picks

    if not labels.exists():
        raise InputError("labels file not found", file=labels)
    refuse_overwrite(out, [labels], stores=runs, field="out")
    for path, field in ((escalated, "escalated"), (save, "save")):
        if path is not None:
            refuse_overwrite(path, [labels, out], stores=runs, field=field)
    read = Judgments.read(list(runs))
    merged = {judge: sc.meta() for judge, sc in read.recorded_scales().items()}  # the one rule: never by order
    result = cascade(read, labels, members=list(member), target=target, risk=risk, tolerance=tolerance, seed=seed,
                     name=name, split=split, confidence=confidence, calibrated=calibrate, fit_share=fit_share)
    write_cascade(out, result, runs=list(runs), labels=labels, scales=merged)
    console = plain_console(highlight=False, soft_wrap=True)
    _print_result(console, result, out=out, name=name, several=len(member) > 1, fit_share=fit_share)
    if escalated is not None:
        picks = escalated_picks(result, PICK_COLUMNS, seed=seed)
        write_picks(escalated, picks)
        console.print(f"wrote {escape(str(escalated))}: {len(picks)} escalated item(s) for the labelling queue")
    if save is not None:
        result.save(save)
        console.print(f"wrote {escape(str(save))}: scijudge judge ITEMS -j JUDGE --cascade {escape(str(save))} "
                      "--run RUN")
    return result


def _print_result(console: Any, result: Any, *, out: Path, name: str, several: bool, fit_share: float) -> None:
    """The cascade's decisions per judge and member, its test, guarantee, rule and cost, and its notes."""
    from rich.markup import escape

    from scijudge.metrics.selective import cost_per_item

    risk, split = result.definition["risk"], result.definition["risk_split"]
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
    for row in result.joint.to_dict("records") if several else []:
        console.print("  " + escape(_joint_line(row, risk)))
    console.print(f"guarantee: {escape(result.guarantee)}")
    console.print(escape(_RULES[split]))
    fitted = sorted(set(result.thresholds.loc[result.thresholds["calibrated"].astype(bool), "judge"]))
    if fitted:
        console.print(escape(_CALIBRATED.format(share=fit_share)) + " for: " + escape(", ".join(fitted)))
    for row in cost_per_item(result).to_dict("records"):
        console.print("cost per item, " + escape(_cost_line(row)))
    for note in result.notes:
        console.print(f"[yellow]note:[/] {escape(note)}")


def _threshold_line(row: dict[str, Any]) -> str:
    head = f"{row['position']}. {row['member']}: "
    if math.isnan(row["threshold"]):
        return head + f"no threshold ({row['reason']}); {row['n_reached']} item(s) passed on"
    return (head + f"trusts confidence >= {row['threshold']:.4g} at risk {row['risk_share']:.3g}: "
            f"{row['n_trusted']}/{row['n_reached']} item(s) it saw; calibration {row['n_agree']}/{row['n_kept']} "
            f"agree ({row['agreement']:.3f}, 95% CI {row['ci_low']:.3f}-{row['ci_high']:.3f}, p = {row['p_value']:.3g}) "
            f"of {row['n_calibration']} labelled")


def _joint_line(row: dict[str, Any], risk: float) -> str:
    if math.isnan(row["scale_threshold"]):
        return f"{row['judge']}: whole cascade: nothing trusted ({row['reason']})"
    return (f"{row['judge']}: whole cascade: {row['n_agree']}/{row['n_kept']} labelled trusted items agree "
            f"({row['agreement']:.3f}, 95% CI {row['ci_low']:.3f}-{row['ci_high']:.3f}, p = {row['p_value']:.3g} "
            f"<= risk {risk:g}) of {row['n_calibration']} tested")


def _cost_line(row: dict[str, Any]) -> str:
    """Calls and cost per item of the cascade at judge time (the members consulted, the escalated share going
    to humans) against always judging with the last member."""
    judge, last = row["judge"], row["last_member"]
    human = f"{row['escalated']:.1%} of the items escalated to humans"
    if row["cascade_calls"] == 0:
        return f"{judge}: no member has a threshold, so none is called; {human} (always {last}: 1 judgment per item)"
    calls = f"{row['cascade_calls']:.2f} member judgments per item and {human}"
    if not math.isnan(row["cascade_cost"]) and not math.isnan(row["last_cost"]) and row["last_cost"] > 0:
        return (f"{judge}: cascade {row['cascade_cost']:.4g} vs always {last} {row['last_cost']:.4g} "
                f"({row['cascade_cost'] / row['last_cost']:.2f}x; {calls})")
    return f"{judge}: {calls}, against 1 judgment per item and none escalated for always {last} (cost not recorded)"
