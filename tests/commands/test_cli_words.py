"""What the CLI prints is in the user's words and never claims what it does not know (issue 35, items 8, 14, 15)."""

from __future__ import annotations

from pathlib import Path

import pytest

from scijudge.report.text import fmt_cost


def test_an_unknown_price_is_said_unknown_not_zero() -> None:
    assert fmt_cost(0.0, 0, 12).startswith("unknown")
    assert fmt_cost(None).startswith("unknown")
    assert fmt_cost(float("nan")).startswith("unknown")
    assert fmt_cost(0.0123, 12, 12) == "0.0123"
    assert fmt_cost(0.01, 4, 12) == "0.0100 for 4 of 12 answers (the rest: price unknown)"
    assert fmt_cost(0.0, 0, 0) == "0.0000"  # nothing judged: nothing spent


def test_the_run_summary_says_the_cost_is_unknown(capsys: pytest.CaptureFixture[str]) -> None:
    from scijudge.commands import _console
    from scijudge.commands._progress import print_summary
    from scijudge.run.summary import RunSummary

    summary = RunSummary(planned=3, judged=3, ok=3, tokens_in=300, tokens_out=30)  # a model with no price
    with _console.out.capture() as captured:
        print_summary(summary, Path("run.sqlite"))
    text = captured.get()
    assert "unknown" in text and "0.0000" not in text
