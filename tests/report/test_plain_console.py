"""Data printed to the terminal stays as it is: a rationale's "[citation needed]" is not markup and ":x:" not emoji."""

from __future__ import annotations

import io

import pandas as pd

from scijudge.report.console import plain_console
from scijudge.report.text import print_frame

TRICKY = "see [citation needed] and [/] :x: [bold]"


def test_a_table_of_judgments_prints_markup_and_emoji_codes_as_text() -> None:
    console = plain_console(file=io.StringIO(), force_terminal=True, width=200, color_system=None)
    print_frame(pd.DataFrame({"rationale": [TRICKY], "score": [3.0]}), "t", console, piped=False)
    assert TRICKY in console.file.getvalue()


def test_the_clis_consoles_leave_emoji_codes_alone() -> None:
    from scijudge.commands._console import console, out

    for shown in (out, console):
        buffer = io.StringIO()
        shown.file = buffer
        try:
            shown.print("answer :x: :smile:", markup=False)
        finally:
            shown.file = None  # type: ignore[assignment]
        assert ":x: :smile:" in buffer.getvalue()
