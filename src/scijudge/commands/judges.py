"""CLI command `scijudge judges`: list the shipped judge specs."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from scijudge.commands._console import out


def judges_cmd(
    family: Annotated[str | None, typer.Option(help="Only this family (likert, pairwise, checklist, ...).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """List the shipped judges: name, family, inputs and a one-line description.

    Example: scijudge judges --family likert
    """
    from scijudge.spec.judge_spec import list_specs

    shipped = list_specs()
    families = sorted({s.family for s in shipped})
    if family is not None and family not in families:
        from scijudge.errors import InputError

        raise InputError(f"unknown family {family!r}: the shipped judges' families are {', '.join(families)}",
                         field="family")
    specs = [s for s in shipped if family is None or s.family == family]
    if as_json:
        out.print_json(json.dumps([{"name": s.name, "family": s.family, "inputs": [i.name for i in s.inputs],
                                    "description": s.description} for s in specs]))
        return
    table = Table("name", "family", "inputs", "description", title=f"{len(specs)} judges")
    table.columns[0].no_wrap = True
    for s in specs:
        inputs = ", ".join(i.name + ("?" if i.optional else "") for i in s.inputs)
        table.add_row(escape(s.name), s.family, escape(inputs), escape(s.description))
    out.print(table)  # the terminal's width: long descriptions wrap in their column, names never
