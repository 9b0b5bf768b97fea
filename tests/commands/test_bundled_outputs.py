"""Every number and file of the bundled examples stays what it was: the regression net of the read-side refactor.

The golden file ``tests/data/bundled_outputs.json.gz`` holds the outputs of the code as it stood before a
structural change, never numbers the changed code computed: the read-side change (one ``Judgments`` value,
``Scale`` and labels coercion) was checked against outputs recorded by main at 7316e13, before it landed; since
then the file is re-recorded, by main before the next structural change, whenever another change means to change
these outputs (main at 670980a, 2026-12-06, where other changes had altered the report page and the printed number
format; then the calibration figures' legends moved off the axes, which changes only the two report.html files).
The commands are the examples of the help texts and of ``datasets/jury_example/CARD.md`` on the bundled
data (copied into a fresh folder) -- import the panel, a majority jury of its three judges, calibrate (the panel;
the panel beside the jury), estimate (the panel; the panel and the jury), the cascade over the jury, drift between
the panel and its rerun -- with relative paths.

Compared: each command's printed output and exit code, every file it writes (CSV and JSON verbatim, except
report.json's ``generated_at``; HTML by its SHA-256, its numbers being those of the JSON and CSV beside it), and
every stored row of every store written (all columns but ``created_at``) with the store's meta.

A change that is meant to change these outputs re-records them, says so in its commit, and keeps the diff:
``SCIJUDGE_RECORD_GOLDEN=1 python -m pytest tests/commands/test_bundled_outputs.py``.
"""

from __future__ import annotations

import difflib
import gzip
import hashlib
import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests/data/bundled_outputs.json.gz"
DATA = {"labels.jsonl": REPO / "datasets/yescieval_example/labels.jsonl",
        "panel.jsonl": REPO / "datasets/jury_example/panel.jsonl",
        "panel_rerun.jsonl": REPO / "datasets/jury_example/panel_rerun.jsonl"}
LABELS, PANEL, RERUN = DATA  # copied into the working folder: stores record the paths they were given

COMMANDS: list[tuple[str, list[str]]] = [
    ("import", ["import-judgments", PANEL, "--run", "panel.sqlite"]),
    ("import_rerun", ["import-judgments", RERUN, "--run", "rerun.sqlite"]),
    ("jury", ["jury", "panel.sqlite", "-m", "judge-a", "-m", "judge-b", "-m", "judge-c", "--method", "majority",
              "--name", "panel", "--out", "jury.sqlite"]),
    ("calibrate_panel", ["calibrate", "--labels", LABELS, "--run", "panel.sqlite", "--out", "cal_panel"]),
    ("calibrate_jury", ["calibrate", "--labels", LABELS, "--run", "panel.sqlite", "--run", "jury.sqlite",
                        "--out", "cal_jury"]),
    ("estimate_panel", ["estimate", "--run", "panel.sqlite", "--labels", LABELS, "--compare", "judge-a", "judge-b",
                        "--out", "est_panel"]),
    ("estimate_jury", ["estimate", "--run", "panel.sqlite", "--run", "jury.sqlite", "--labels", LABELS,
                       "--out", "est_jury"]),
    ("cascade", ["cascade", "jury.sqlite", "-m", "jury:panel", "--labels", LABELS, "--target", "0.6", "--tolerance",
                 "1", "--risk", "0.2", "--name", "demo", "--out", "cascade.sqlite", "--save", "thresholds.json"]),
    ("drift", ["drift", "panel.sqlite", "rerun.sqlite"]),
]


def _store_text(path: Path) -> str:
    """Every row of a store (sorted by key, ``created_at`` left out) and its meta, as JSON lines."""
    from scijudge.run.store import Run

    with Run(path, create=False) as store:
        frame = store.to_pandas()
        meta = store.meta()
    frame = frame.drop(columns=["created_at"]).sort_values("key")
    rows = json.loads(frame.to_json(orient="records", default_handler=str))
    return "\n".join([json.dumps(meta, sort_keys=True), *(json.dumps(r, sort_keys=True) for r in rows)])


def _file_text(path: Path) -> str:
    if path.suffix == ".sqlite":
        return _store_text(path)
    data = path.read_bytes()
    if path.suffix == ".html":
        return f"sha256 {hashlib.sha256(data).hexdigest()}, {len(data)} bytes"
    if path.name == "report.json":
        report = json.loads(data)
        report.pop("generated_at", None)
        return json.dumps(report, indent=1, sort_keys=True)
    return data.decode()


def _outputs(folder: Path) -> dict[str, str]:
    """Each command's exit code and output, then every file the commands left in ``folder``."""
    from scijudge.cli import app

    runner = CliRunner()
    outputs: dict[str, str] = {}
    for name, args in COMMANDS:
        result = runner.invoke(app, args, catch_exceptions=False)
        outputs[f"$ {name}"] = f"exit {result.exit_code}\n{result.output}"
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.name not in DATA and not path.name.endswith(("-wal", "-shm", ".lock")):
            outputs[str(path.relative_to(folder))] = _file_text(path)
    return outputs


def test_bundled_examples_give_the_recorded_numbers_and_files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "200")
    for name, source in DATA.items():
        (tmp_path / name).write_bytes(source.read_bytes())
    got = _outputs(tmp_path)
    if os.environ.get("SCIJUDGE_RECORD_GOLDEN"):
        GOLDEN.write_bytes(gzip.compress(json.dumps(got, indent=0, sort_keys=True).encode(), mtime=0))
        pytest.skip("golden outputs recorded")
    want = json.loads(gzip.decompress(GOLDEN.read_bytes()))
    assert sorted(got) == sorted(want), "the commands wrote other files than recorded"
    for name in want:
        if got[name] != want[name]:
            diff = "\n".join(list(difflib.unified_diff(want[name].splitlines(), got[name].splitlines(), "recorded",
                                                       "now", lineterm="", n=1))[:40])
            pytest.fail(f"{name} differs from the recorded output:\n{diff}")
