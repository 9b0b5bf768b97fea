"""Issue 35, "done when" (a new user's tour): every command, given a file that is not a run store, a wrong path or
an output equal to an input, answers in one line naming the file, exits non-zero and changes nothing."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scijudge.cli import app


def _digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def _one_line_error(result, *needles: str) -> None:
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    text = result.output.strip()
    assert text.startswith("error: ") and "\n" not in text and "Traceback" not in text, text
    for needle in needles:
        assert needle in text, text


def _foreign(folder: Path) -> None:
    (folder / "empty.jsonl").write_bytes(b"")
    (folder / "items.jsonl").write_text('{"id": "q1", "inputs": {}}\n')
    (folder / "notes.txt").write_text("hello\n")
    db = sqlite3.connect(folder / "other.db")
    db.execute("CREATE TABLE foo (x)")
    db.commit()
    db.close()


@pytest.mark.parametrize(("name", "needle"), [("empty.jsonl", "an empty file"), ("items.jsonl", "JSON or JSONL"),
                                              ("notes.txt", "looks like text"), ("other.db", "its tables: foo")])
def test_view_refuses_a_file_that_is_not_a_store_before_serving(tmp_path, monkeypatch, name, needle):
    pytest.importorskip("starlette")
    monkeypatch.chdir(tmp_path)
    _foreign(tmp_path)
    before = _digest(tmp_path)
    result = CliRunner().invoke(app, ["view", name, "--no-browser", "--export", "site"])
    _one_line_error(result, name, "not a scijudge run store", needle)
    assert _digest(tmp_path) == before and not (tmp_path / "site").exists()
