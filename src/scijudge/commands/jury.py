"""CLI command `scijudge jury`: aggregate several judges' stored judgments into a run store of jury judgments."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from scijudge.errors import InputError

_MEMBER_HELP = ("A member: MODEL, MODEL@ENDPOINT (the endpoint as stored, with '://'), or either with #JUDGE to "
                "narrow it to a judge (name, dotted prefix or glob), e.g. 'gpt-4o#yescieval.qa'; repeat, at least two.")
_METHOD_HELP = ("mean | median (of the members that answered, at least --quorum), majority (strict majority of all "
                "members: abstentions count), weighted (weights fitted on --labels, cross-fitted by item), "
                "dawid-skene (unsupervised EM over categorical ratings or verdicts).")
_QUORUM_HELP = "Fewest answering members for a jury judgment (default: a strict majority of the members)."
_SCALE_HELP = ("The members' scale when their stores and specs do not say: 'lo,hi,step' for all, or "
               "'MEMBER=lo,hi,step' / 'JUDGE=lo,hi,step'; repeatable.")
_MAP_HELP = ("Map a member's scores linearly from its own scale onto another: 'MEMBER=lo,hi,step' (members on "
             "different scales are refused otherwise); repeatable.")


def _pairs(texts: list[str] | None, option: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for text in texts or []:
        key, sep, value = text.rpartition("=")
        if not sep or not key.strip():
            raise InputError(f"expected NAME=lo,hi,step, got {text!r}", field=option)
        out[key.strip()] = value.strip()
    return out


def jury_cmd(
    runs: Annotated[list[Path], typer.Argument(help="Run stores holding the members' judgments.")],
    member: Annotated[list[str], typer.Option("--member", "-m", help=_MEMBER_HELP)],
    name: Annotated[str, typer.Option("--name", help="The jury's name: its judgments get model 'jury:NAME'.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Run store (SQLite) to write the jury's judgments to.")],
    method: Annotated[str, typer.Option("--method", help=_METHOD_HELP)] = "mean",
    quorum: Annotated[int | None, typer.Option("--quorum", min=1, help=_QUORUM_HELP)] = None,
    labels: Annotated[Path | None, typer.Option("--labels", "-l", help="Development labels (JSONL or CSV) for "
                                                "--method weighted.")] = None,
    fit: Annotated[str, typer.Option(help="weighted: inverse_mse (weights 1/MSE) or ridge.")] = "inverse_mse",
    folds: Annotated[int, typer.Option(min=2, help="weighted: folds by item for cross-fitting.")] = 5,
    seed: Annotated[int, typer.Option(help="weighted: seed of the fold assignment.")] = 0,
    scale: Annotated[list[str] | None, typer.Option("--scale", help=_SCALE_HELP)] = None,
    map_scale: Annotated[list[str] | None, typer.Option("--map-scale", help=_MAP_HELP)] = None,
    ds_max_iter: Annotated[int, typer.Option("--ds-max-iter", min=1, help="dawid-skene: the most EM iterations; "
                                             "stopping short of convergence is reported in one line.")] = 10_000,
    ds_tol: Annotated[float, typer.Option("--ds-tol", min=0.0, help="dawid-skene: converged when the marginal "
                                          "log-likelihood improves by less than this.")] = 1e-8,
) -> Any:
    """Aggregate several judges into a jury, stored as a run (model jury:NAME) that calibrate, estimate and export read.

    Each jury row keeps its members' scores and which of them abstained; below the quorum, or without a strict
    majority, the jury abstains with its reason. A weighted jury never scores an item with weights fitted on that
    item (cross-fitted; the store's meta lists the held-out items).

    Example: scijudge jury panel.sqlite --member judge-a --member judge-b --member judge-c --name panel --out jury.sqlite   (panel.sqlite from: scijudge import-judgments datasets/jury_example/panel.jsonl --run panel.sqlite)
    """
    from scijudge.report.console import plain_console
    from rich.markup import escape

    from scijudge.metrics.jury import jury

    if labels is not None and not labels.exists():
        raise InputError("labels file not found", file=labels)
    given: Any = None
    if scale:
        plain = [s for s in scale if "=" not in s]
        if plain and len(plain) < len(scale):
            raise InputError("--scale: give one 'lo,hi,step' for all, or NAME=lo,hi,step values, not both",
                             field="scale")
        given = plain[-1] if plain else _pairs(list(scale), "scale")
    result = jury(list(runs), list(member), name=name, method=method, out=out, quorum=quorum, labels=labels,
                  scale=given, scale_map=_pairs(map_scale, "map-scale") or None, fit=fit, folds=folds, seed=seed,
                  ds_max_iter=ds_max_iter, ds_tol=ds_tol)
    console = plain_console(highlight=False, soft_wrap=True)
    rows = result.rows
    console.print(f"{len(rows)} jury judgments ({result.n_ok} ok, {len(rows) - result.n_ok} abstained) -> "
                  f"{escape(str(out))} as model jury:{escape(name)}")
    for judge, group in rows.groupby("judge", sort=True):
        ok = group[group["status"] == "ok"]
        mean = f", mean score {ok['score'].mean():.3f}" if len(ok) and ok["score"].notna().any() else ""
        console.print(f"  {escape(str(judge))}: {len(ok)}/{len(group)} ok{mean}")
    for note in result.notes:
        console.print(f"[yellow]note:[/] {escape(note)}")
    return result
