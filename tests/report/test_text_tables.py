"""Terminal tables never cut an id or a number; piped output is CSV with full values; counts print as integers."""

from __future__ import annotations

import io

import pandas as pd
from rich.console import Console

from scijudge.report.text import print_frame


def _frame() -> pd.DataFrame:
    return pd.DataFrame({
        "judge": ["researchrubrics.checklist.ternary", "yescieval.qa.correctness"],
        "model": ["openai/gpt-4o-mini-2024-07-18", "hf:/models/llama-3.1-8b-yescieval-lora"],
        "item_id": ["rr-example-001-with-a-long-id", "q12"],
        **{f"stat_{k}": [12.4567891 + k, -0.000001] for k in range(8)},
        "n_items": [127.0, float("nan")],
    })


def test_terminal_tables_at_80_columns_keep_every_id_and_number_whole() -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, width=80, force_terminal=True, color_system=None)
    print_frame(_frame(), "wide", console)
    text = buffer.getvalue()
    for token in ("researchrubrics.checklist.ternary", "hf:/models/llama-3.1-8b-yescieval-lora",
                  "rr-example-001-with-a-long-id", "12.457", "19.457", "127"):
        assert token in text, token
    assert "…" not in text and "127.000" not in text and "-0.000" not in text
    assert max(len(line) for line in text.splitlines()) <= 80


def test_piped_tables_are_csv_with_full_values() -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, width=80)
    print_frame(_frame(), "wide", console)
    lines = buffer.getvalue().splitlines()
    assert lines[0] == "# wide"
    parsed = pd.read_csv(io.StringIO("\n".join(lines[1:])))
    assert parsed["stat_0"].iloc[0] == 12.4567891 and parsed["judge"].iloc[1] == "yescieval.qa.correctness"
