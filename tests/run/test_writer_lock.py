"""The writer lock file goes when the writer is done, and removing it never lets two writers in at once."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from scijudge.errors import RunBusyError
from scijudge.run._writer_lock import WriterLock, _same_file
from scijudge.run.store import Run


def test_a_clean_run_leaves_no_lock_file(tmp_path: Path) -> None:
    store = tmp_path / "r.sqlite"
    with Run(store) as run:
        run.claim_writer()
        assert (tmp_path / "r.sqlite.lock").read_text() == str(os.getpid())
        run.release_writer()
    assert not (tmp_path / "r.sqlite.lock").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.sqlite"]


def test_the_lock_is_exclusive_while_held(tmp_path: Path) -> None:
    held = WriterLock(tmp_path / "r.sqlite")
    with pytest.raises(RunBusyError, match=f"pid {os.getpid()}"):
        WriterLock(tmp_path / "r.sqlite")
    held.release()
    WriterLock(tmp_path / "r.sqlite").release()  # free again


def test_a_writer_that_opened_the_file_before_it_was_removed_does_not_share_the_lock(tmp_path: Path) -> None:
    store = tmp_path / "r.sqlite"
    first = WriterLock(store)
    late = os.open(first.path, os.O_RDWR)  # a second writer opened the lock file, then the first one finished
    first.release()
    assert not first.path.exists()
    fcntl.flock(late, fcntl.LOCK_EX | fcntl.LOCK_NB)  # it gets the lock, but on the removed file ...
    assert not _same_file(late, first.path)  # ... which its check sees, so it starts over on the path
    third = WriterLock(store)  # a writer arriving now locks the file at the path
    with pytest.raises(RunBusyError):
        WriterLock(store)  # and is the only one
    os.close(late)
    third.release()
    assert not third.path.exists()
