"""`scijudge drift`: exit 1 above --fail-above, 0 below, CSV when piped, bad input as one line (exit 2)."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from scijudge.cli import app
from scijudge.records import JudgeResult
from scijudge.run.store import Run


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """100 items; the new run changes 20 of them (flip rate 0.20), 5 by 2 points (beyond +-1: 0.05)."""
    base = tmp_path_factory.mktemp("driftcli")
    rng = np.random.default_rng(3)
    old = rng.integers(2, 5, 100).astype(float)
    new = old.copy()
    new[:15] += 1
    new[15:20] = np.where(old[15:20] <= 3, old[15:20] + 2, old[15:20] - 2)
    for name, scores in (("old", old), ("new", new)):
        with Run(base / f"{name}.sqlite") as run:
            for i, s in enumerate(scores):
                run.record(JudgeResult(item_id=f"i{i}", judge="yescieval.qa.cohesion", family="likert",
                                       spec_hash="s", model="m", status="ok", score=float(s)))
    return base


@pytest.mark.parametrize(("args", "code"), [(["--fail-above", "0.15"], 1), (["--fail-above", "0.25"], 0),
                                            (["--fail-above", "0.04", "--on", "beyond1"], 1),
                                            (["--fail-above", "0.06", "--on", "beyond1"], 0), ([], 0)])
def test_exit_codes_on_a_known_flip_rate(stores, args, code):
    done = CliRunner().invoke(app, ["drift", str(stores / "old.sqlite"), str(stores / "new.sqlite"), *args])
    assert done.exit_code == code, done.output
    table = pd.read_csv(io.StringIO(done.stdout))  # CliRunner's stdout is not a terminal: CSV
    assert table.loc[0, "flip_rate"] == pytest.approx(0.20) and table.loc[0, "flip_rate_beyond1"] == pytest.approx(0.05)
    assert table.loc[0, "n_paired"] == 100


def test_bad_input_is_one_line_with_exit_2(tmp_path, stores):
    done = CliRunner().invoke(app, ["drift", str(tmp_path / "nope.sqlite"), str(stores / "new.sqlite")])
    assert done.exit_code == 2 and "run store not found" in done.output and "Traceback" not in done.output
