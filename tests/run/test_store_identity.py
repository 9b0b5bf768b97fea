"""Issue 45, item 4: a ``-wal`` left by another store (a killed writer's, then this file restored or copied over it)
is refused in one line by every reader and writer, nothing read from it, nothing bought, nothing written; a store's
own WAL, and stores written before ids, read as before.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scijudge import Run
from scijudge.errors import InputError
from scijudge.records import JudgeResult

JUDGE = "yescieval.qa.correctness"
_WRITER = ("import os, sys; from scijudge.run.store import Run; from scijudge.records import JudgeResult\n"
           "run = Run(sys.argv[1])\n"
           "for n in range(int(sys.argv[2])):\n"
           "    run.record(JudgeResult(item_id=f'q{n:03d}', judge=sys.argv[3], family='likert', spec_hash='h',"
           " model=sys.argv[4], status='ok', score=float(n % 5 + 1), created_at='2026-12-01T10:00:00+00:00'))\n"
           "os._exit(0) if sys.argv[5] == 'kill' else run.close()\n")


def _write(path: Path, n: int, model: str, *, kill: bool) -> None:
    """``n`` judgments into ``path`` by another process; ``kill``: it dies without closing (all in the ``-wal``)."""
    subprocess.run([sys.executable, "-c", _WRITER, str(path), str(n), JUDGE, model, "kill" if kill else "close"],
                   check=True, timeout=120)


def _digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.fixture
def foreign(tmp_path, monkeypatch) -> Path:
    """``S.sqlite``: the file of a store of 5 judgments (model m-own), beside the ``-wal`` a killed writer of
    another store (40 judgments, model m-other) left: the other store's file was replaced by this one."""
    monkeypatch.chdir(tmp_path)
    _write(tmp_path / "S.sqlite", 40, "m-other", kill=True)
    _write(tmp_path / "own.sqlite", 5, "m-own", kill=False)
    assert (tmp_path / "S.sqlite-wal").stat().st_size > 0 and not (tmp_path / "own.sqlite-wal").exists()
    (tmp_path / "S.sqlite-shm").unlink(missing_ok=True)
    (tmp_path / "S.sqlite").write_bytes((tmp_path / "own.sqlite").read_bytes())
    (tmp_path / "labels.jsonl").write_text("".join(json.dumps({"item_id": f"q{k:03d}", "judge": JUDGE,
                                                               "score": k % 5 + 1}) + "\n" for k in range(5)))
    return tmp_path / "S.sqlite"


def test_a_foreign_wal_is_refused_by_every_library_reader_and_writer_and_nothing_changes(foreign):
    before = _digest(foreign.parent)
    for use in (lambda run: len(run), lambda run: run.to_pandas(), lambda run: run.export("o.jsonl"),
                lambda run: run.claim_writer()):
        with pytest.raises(InputError, match="belongs to another store") as info:
            with Run(foreign, create=False) as run:
                use(run)
        assert info.value.file == str(foreign) and "\n" not in str(info.value)
    with pytest.raises(InputError, match="belongs to another store"):
        Run(foreign)  # opened to judge into
    assert _digest(foreign.parent) == before, "nothing written into the store, no file added beside it"


def test_a_foreign_wal_is_refused_with_a_shm_beside_it_and_through_a_raw_write_connection(foreign):
    from scijudge.run._open import check_owner

    (foreign.parent / "S.sqlite-shm").touch()  # as a live writer leaves it: read in place
    with pytest.raises(InputError, match="belongs to another store"):
        Run(foreign, create=False)
    db = sqlite3.connect(foreign)
    try:
        with pytest.raises(InputError, match="S.sqlite-wal beside this run store belongs to another store"):
            check_owner(db, foreign, foreign)
    finally:
        db.close()


@pytest.mark.slow  # six commands, the first imports of pandas and scipy among them: seconds
def test_a_foreign_wal_is_one_line_from_every_command_and_the_viewer(foreign):
    from scijudge.cli import app
    from scijudge.view.stores import StoreView

    before = _digest(foreign.parent)
    runner = CliRunner()
    for args in (["export", "S.sqlite", "--out", "o.jsonl"], ["batches", "S.sqlite"],
                 ["calibrate", "--run", "S.sqlite", "--labels", "labels.jsonl", "--n-boot", "0"],
                 ["estimate", "--run", "S.sqlite", "--labels", "labels.jsonl"],
                 ["select-labels", "--run", "S.sqlite", "-j", JUDGE, "--budget", "2", "--out", "p.csv"]):
        done = runner.invoke(app, args)
        text = done.output.strip()
        assert done.exit_code == 2 and text.startswith("error: S.sqlite") and "\n" not in text, (args, text)
        assert "belongs to another store" in text, text
    assert _digest(foreign.parent) == before
    with pytest.raises(InputError, match="belongs to another store"):
        StoreView([foreign])


def test_a_judge_resume_onto_a_foreign_wal_buys_nothing(foreign, loopback):
    from test_result_integrity import items, judges, rating_from_prompt

    from scijudge import judge_items

    server = loopback(rating_from_prompt)
    before = _digest(foreign.parent)
    with pytest.raises(InputError, match="belongs to another store"):
        with Run(foreign) as run:
            judge_items(items(3), judges(server.url), run=run)
    assert server.count == 0 and _digest(foreign.parent) == before


def test_a_stores_own_wal_and_a_store_without_an_id_still_open(tmp_path):
    own = tmp_path / "own.sqlite"
    _write(own, 30, "m", kill=True)  # its own killed writer's WAL: every judgment read
    with Run(own, create=False) as run:
        assert len(run) == 30
    old = tmp_path / "old.sqlite"
    _write(old, 3, "m", kill=False)
    db = sqlite3.connect(old)
    db.execute("PRAGMA user_version = 0")  # as a store written before ids
    db.commit()
    db.close()
    with Run(old, create=False) as run:
        assert len(run) == 3
    with Run(old) as run:
        run.record(JudgeResult(item_id="new", judge=JUDGE, family="likert", spec_hash="h", model="m", status="ok",
                               score=2.0))
    head = sqlite3.connect(f"{old.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
    assert head.execute("PRAGMA user_version").fetchone()[0] != 0, "the migration wrote an id into the file"
    head.close()
    with Run(old, create=False) as run:
        assert len(run) == 4
