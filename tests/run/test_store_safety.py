"""Issue 35, items 1-4, in the library: damaged, foreign and read-only stores, and outputs written whole or not at all.

Every store here is a real file: judged through the loopback server (requests counted there), cut, edited by
SQL, left by a killed writer, on a read-only mount (where the machine allows one) or not a store at all.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from scijudge import Item, Run, judge_items
from scijudge._files import atomic_output, refuse_overwrite
from scijudge.errors import InputError, StoreWriteError
from scijudge.records import JudgeResult


def _files(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir() if p.is_file()}


def _judged(loopback, path: Path, n: int) -> tuple[list[Item], list, object]:
    from test_result_integrity import items, judges, rating_from_prompt

    server = loopback(rating_from_prompt)
    batch, panel = items(n), judges(server.url)
    with Run(path) as run:
        summary = judge_items(batch, panel, run=run, concurrency=8)
    assert summary.ok == 2 * n and server.count == 2 * n
    return batch, panel, server


@pytest.mark.slow  # 240 judgments through the loopback server: seconds
def test_a_cut_store_is_refused_when_opened_to_write_and_nothing_is_bought_or_written(loopback, tmp_path):
    path = tmp_path / "run.sqlite"
    batch, panel, server = _judged(loopback, path, 120)  # 240 judgments
    data = path.read_bytes()
    path.write_bytes(data[:-1000])  # the last 1,000 bytes lost (a copy cut short, a disk that lied)
    before = path.read_bytes()
    with pytest.raises(InputError, match="damaged run store .SQLite's quick_check") as info:
        with Run(path) as run:
            judge_items(batch, panel, run=run)
    assert info.value.file == str(path) and "\n" not in str(info.value)
    assert server.count == 240, "a damaged store is never resumed as done, nor asked again on top of the damage"
    assert path.read_bytes() == before, "nothing was written into the damaged file"
    with pytest.raises(InputError, match="damaged run store: [0-9]+ rows? cannot be read .item .*: [a-z_]+ None, not text"), \
            Run(path, create=False) as run:
        run.to_pandas()  # what calibrate reads: one line, not an AttributeError further on
    out = tmp_path / "out.jsonl"
    out.write_text("the previous export\n")
    with pytest.raises(InputError, match="damaged run store"), Run(path, create=False) as run:
        run.export(out)
    assert out.read_text() == "the previous export\n", "a failed export leaves the old file, not 239 of 240 lines"
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".out.jsonl")], "no temporary file left"


def test_a_row_whose_status_is_not_ok_or_abstained_is_not_done_and_is_asked_again(loopback, tmp_path):
    path = tmp_path / "run.sqlite"
    batch, panel, server = _judged(loopback, path, 3)  # 6 judgments
    db = sqlite3.connect(path)
    db.execute("UPDATE judgments SET status = '', score = 0.0 WHERE item_id = 'i01' AND judge = 't.a'")
    db.commit()
    db.close()
    with Run(path) as run:
        summary = judge_items(batch, panel, run=run)
        assert summary.skipped_done == 5 and server.count == 7, "only the damaged row is asked again"
        row = [r for r in run.rows() if r["item_id"] == "i01" and r["judge"] == "t.a"]
        assert [(r["status"], r["score"]) for r in row] == [("ok", 4.0)]


def _killed_writer(folder: Path, n: int) -> Path:
    """A store whose writer was killed after ``n`` judgments: every one of them is still in ``run.db-wal``."""
    path = folder / "run.db"
    code = ("import os, sys; from scijudge.run.store import Run; from scijudge.records import JudgeResult\n"
            "run = Run(sys.argv[1])\n"
            f"for n in range({n}):\n"
            "    run.record(JudgeResult(item_id=f'q{n}', judge='j', family='likert', spec_hash='h', model='m',"
            " status='ok', score=3.0, created_at='2026-12-01T10:00:00+00:00'))\n"
            "os._exit(0)\n")
    subprocess.run([sys.executable, "-c", code, str(path)], check=True, timeout=120)
    assert (folder / "run.db-wal").stat().st_size > 0
    return path


def _copy_without_shm(store: Path, folder: Path) -> Path:
    folder.mkdir()
    for name in ("run.db", "run.db-wal"):
        (folder / name).write_bytes((store.parent / name).read_bytes())
    return folder / "run.db"


def test_a_killed_writers_wal_without_its_shm_file_is_read_whole_and_no_file_is_added(tmp_path):
    killed = tmp_path / "killed"
    killed.mkdir()
    store = _killed_writer(killed, 40)
    path = _copy_without_shm(store, tmp_path / "copy")
    for file in path.parent.iterdir():
        file.chmod(0o444)
    path.parent.chmod(0o555)  # (root writes anyway: the assertions below hold for every user)
    try:
        before = _files(path.parent)
        with Run(path, create=False) as run:
            assert len(run) == 40 and len(run.to_pandas()) == 40
            assert run.export(tmp_path / "out.jsonl") == 40
        assert _files(path.parent) == before, "no -shm file (or any other) created beside the store"
    finally:
        path.parent.chmod(0o755)


@pytest.fixture
def read_only_mount(tmp_path):
    """A tmpfs mounted at a folder, filled by the test, then ``freeze()``-d read-only (skipped where no mount can be
    made: not root, or no mount permission in this container)."""
    from scijudge.testing.mounts import mount_unavailable, tmpfs

    if (why := mount_unavailable()) is not None:
        pytest.skip(why)
    mounted = tmpfs(tmp_path / "ro")
    try:
        mount = mounted.__enter__()
    except OSError as exc:
        pytest.skip(str(exc))
    try:
        yield mount.folder, mount.freeze  # (an OSError of the test itself fails it: it is not caught here)
    finally:
        mounted.__exit__(None, None, None)


def test_a_killed_writers_store_on_a_read_only_mount_reads_every_committed_judgment(tmp_path, read_only_mount):
    folder, freeze = read_only_mount
    killed = tmp_path / "killed"
    killed.mkdir()
    store = _killed_writer(killed, 40)
    for name in ("run.db", "run.db-wal"):  # as a copy onto read-only media has it: no -shm
        (folder / name).write_bytes((killed / name).read_bytes())
    freeze()
    path = folder / "run.db"
    with Run(path, create=False) as run:
        assert len(run) == 40, "immutable=1 alone would read 0: every judgment is still in run.db-wal"
        assert run.export(tmp_path / "out.jsonl") == 40
        assert run.has_table("batches") is False
    with pytest.raises(StoreWriteError, match="cannot write the run store"):
        Run(path).claim_writer()
    assert sorted(p.name for p in folder.iterdir()) == ["run.db", "run.db-wal"]
    assert store.exists()


@pytest.mark.parametrize(("content", "reason"), [
    (b"", "an empty file"), (b'{"id": "x", "answer": "y"}\n', "it looks like JSON or JSONL"),
    (b"item_id,score\nq1,3\n", "it looks like text"), (b"\x89PNG\r\n\x1a\n" + bytes(200), "other bytes"),
    (b"SQLite format 3\x00" + b"\xff" * 200, "file is not a database"),
])
def test_a_file_that_is_not_a_store_is_one_line_and_no_file_is_created(tmp_path, content, reason):
    folder = tmp_path / "f"
    folder.mkdir()
    path = folder / "items.jsonl"
    path.write_bytes(content)
    with pytest.raises(InputError, match=f"not a scijudge run store .*{reason}") as info:
        Run(path, create=False)
    assert info.value.file == str(path)
    if content:  # an empty file may become a new store when it is named to be written to; nothing else may
        with pytest.raises(InputError, match="not a scijudge run store"):
            Run(path).claim_writer()
    assert sorted(p.name for p in folder.iterdir()) == ["items.jsonl"]
    assert path.read_bytes() == content


def test_another_programs_sqlite_file_is_not_a_store_and_gets_no_table(tmp_path):
    path = tmp_path / "app.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE users (name TEXT)")
    db.commit()
    db.close()
    before = path.read_bytes()
    for create in (False, True):
        with pytest.raises(InputError, match="not a scijudge run store .an SQLite file without a judgments table; "
                                             "its tables: users"):
            Run(path, create=create)
    assert path.read_bytes() == before


def test_an_empty_file_named_to_be_written_becomes_a_store(tmp_path):
    path = tmp_path / "new.sqlite"
    path.touch()
    with Run(path) as run:
        assert len(run) == 0
        run.record(JudgeResult(item_id="q", judge="j", family="likert", spec_hash="h", model="m", status="ok",
                               score=3.0))
    with Run(path, create=False) as run:
        assert len(run) == 1


def test_export_refuses_its_own_store_by_any_name(tmp_path):
    path = tmp_path / "run.sqlite"
    with Run(path) as run:
        run.record(JudgeResult(item_id="q", judge="j", family="likert", spec_hash="h", model="m", status="ok",
                               score=3.0))
    (tmp_path / "link.sqlite").symlink_to(path)
    os.link(path, tmp_path / "hard.sqlite")
    before = path.read_bytes()
    with Run(path, create=False) as run:
        for out in (path, tmp_path / "link.sqlite", tmp_path / "hard.sqlite", tmp_path / "." / "run.sqlite",
                    tmp_path / "run.sqlite-wal", tmp_path / "run.sqlite.lock"):
            with pytest.raises(InputError, match="is the run store"):
                run.export(out, "csv")
    assert path.read_bytes() == before


def test_refuse_overwrite_names_the_input_and_passes_other_paths(tmp_path):
    labels = tmp_path / "labels.jsonl"
    labels.write_text("{}\n")
    with pytest.raises(InputError, match=f"the output {labels} is the input {labels}"):
        refuse_overwrite(labels, [None, labels])
    refuse_overwrite(tmp_path / "other.csv", [labels], stores=[tmp_path / "run.sqlite"])  # not existing: fine


def test_atomic_output_replaces_the_file_only_when_the_block_succeeds(tmp_path):
    out = tmp_path / "sub" / "table.csv"
    with atomic_output(out) as handle:
        handle.write("a\n")
    assert out.read_text() == "a\n"
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~umask, "the mode open() gives a new file, not mkstemp's 0600"
    out.chmod(0o640)
    for error in (ValueError("a bad row"), KeyboardInterrupt()):
        with pytest.raises(type(error)), atomic_output(out) as handle:
            handle.write("half a tab")
            raise error
        assert out.read_text() == "a\n"
        assert sorted(p.name for p in out.parent.iterdir()) == ["table.csv"], "no temporary file left"
    with atomic_output(out, "wb") as handle:
        handle.write(b"b\n")
    assert out.read_bytes() == b"b\n" and out.stat().st_mode & 0o777 == 0o640
    link = tmp_path / "link.csv"
    link.symlink_to(out)
    with atomic_output(link) as handle:
        handle.write("c\n")
    assert link.is_symlink() and out.read_text() == "c\n", "the file a link names is written, the link kept"
    with atomic_output("/dev/null") as handle:  # not a regular file: written in place, never renamed over
        handle.write("x")
    assert Path("/dev/null").is_char_device()
