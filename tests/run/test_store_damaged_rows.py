"""Issue 45, item 4: a store in which one row's ``attempts`` text was cut short names the damaged rows the same way
from every reader, says how to judge them again or export the rest, and a resume judges exactly those again
(instead of "already done" from one command and exit 2 from another).
"""

from __future__ import annotations

import json
import sqlite3

import pytest
from typer.testing import CliRunner

from scijudge import Run, judge_items
from scijudge.errors import InputError


@pytest.fixture
def damaged(loopback, tmp_path, monkeypatch):
    from test_result_integrity import items, judges, rating_from_prompt

    monkeypatch.chdir(tmp_path)
    server = loopback(rating_from_prompt)
    batch, panel = items(3), judges(server.url)
    path = tmp_path / "run.sqlite"
    with Run(path) as run:
        assert judge_items(batch, panel, run=run).ok == 6
    db = sqlite3.connect(path)
    db.execute("UPDATE judgments SET attempts = substr(attempts, 1, 9) WHERE item_id = 'i01' AND judge = 't.a'")
    db.commit()
    db.close()
    return path, batch, panel, server


def _says_which(text: str, path) -> None:
    assert "damaged run store: 1 row cannot be read (item 'i01', judge 't.a': attempts is not readable JSON)" in text, text
    assert f"--run {path}" in text and f"scijudge export {path} --skip-damaged" in text, text
    assert "\n" not in text.strip(), text


def test_every_reader_names_the_damaged_row_and_the_ways_on(damaged):
    path, *_ = damaged
    for read in (lambda run: list(run.rows()), lambda run: run.to_pandas(), lambda run: run.export("o.jsonl"),
                 lambda run: list(run.raw_rows()) and run.export("o.csv", "csv")):
        with pytest.raises(InputError) as info, Run(path, create=False) as run:
            read(run)
        _says_which(str(info.value), path)
    with Run(path, create=False) as run:
        assert [(d.item_id, d.judge, d.column) for d in run.damaged_rows()] == [("i01", "t.a", "attempts")]


def test_export_skip_damaged_writes_the_rest_and_names_what_it_left_out(damaged):
    from scijudge.cli import app

    path, *_ = damaged
    runner = CliRunner()
    for args in (["export", str(path), "--out", "o.jsonl"], ["export", str(path), "--out", "o.csv", "--history"]):
        done = runner.invoke(app, args)
        assert done.exit_code == 2, done.output
        _says_which(" ".join(done.output.split()), path)
    done = runner.invoke(app, ["export", str(path), "--out", "o.jsonl", "--skip-damaged"])
    assert done.exit_code == 0, done.output
    assert "wrote 5 judgments" in done.output and "left out 1 damaged row: 'i01' (t.a, attempts)" in done.output
    rows = [json.loads(line) for line in (path.parent / "o.jsonl").read_text().splitlines()]
    assert len(rows) == 5 and ("i01", "t.a") not in {(r["item_id"], r["judge"]) for r in rows}


def test_a_resume_judges_the_damaged_row_again_and_the_store_reads_whole(damaged):
    path, batch, panel, server = damaged
    with Run(path) as run:
        summary = judge_items(batch, panel, run=run)
    assert summary.damaged == 1 and summary.skipped_done == 5 and server.count == 7
    with Run(path, create=False) as run:
        assert len(run.to_pandas()) == 6 and run.damaged_rows() == []


@pytest.mark.parametrize("cut", [1000, 4096])
def test_a_store_cut_short_is_refused_for_writing_whatever_page_its_tail_was(tmp_path, cut):
    """SQLite reads past a file's end as zeros, so a torn copy can pass quick_check with its last rows' text zeroed:
    opening it to judge into is refused in one line (the file's size against its pages), and nothing is written."""
    from scijudge.records import JudgeResult

    path = tmp_path / "run.sqlite"
    with Run(path) as run:
        for i in range(40):  # rows of ~1,700 bytes: the file's last 1,000 bytes are one row's text, nothing else
            run.record(JudgeResult(item_id=f"i{i:03d}", judge="j", family="likert", spec_hash="h", model="m/a",
                                   status="ok", score=3.0, rationale="r" * 1500))
    data = path.read_bytes()
    assert len(data) > 8 * 4096 and len(data) % 4096 == 0 and not (tmp_path / "run.sqlite-wal").exists()
    path.write_bytes(data[:-cut])
    with pytest.raises(InputError, match="damaged run store"), Run(path) as run:
        run.record(JudgeResult(item_id="new", judge="j", family="likert", spec_hash="h", model="m/a", status="ok",
                               score=3.0))
    assert path.read_bytes() == data[:-cut]
