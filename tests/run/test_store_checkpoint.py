"""A run store closed while a reader has it open (a viewer watching the run) holds every judgment in its own file:
copying the ``.sqlite`` alone after the writer closed loses nothing."""

from __future__ import annotations

import shutil
import sqlite3

from scijudge.records import JudgeResult
from scijudge.run.store import Run


def _result(n: int) -> JudgeResult:
    return JudgeResult(item_id=f"i{n}", judge="j", family="likert", spec_hash="h", model="m", status="ok",
                       score=float(1 + n % 5))


def test_closing_a_writer_checkpoints_its_wal_while_a_reader_has_the_store_open(tmp_path):
    store = tmp_path / "run.sqlite"
    with Run(store) as run:
        run.record(_result(0))
    reader = sqlite3.connect(f"{store.resolve().as_uri()}?mode=ro", uri=True)  # how a viewer reads it
    try:
        assert reader.execute("SELECT COUNT(*) FROM judgments").fetchone() == (1,)
        run = Run(store).claim_writer()
        for n in range(1, 36):
            run.record(_result(n))
        assert reader.execute("SELECT COUNT(*) FROM judgments").fetchone() == (36,)  # idle between reads
        run.close()
        copy = tmp_path / "copy" / "run.sqlite"
        copy.parent.mkdir()
        shutil.copyfile(store, copy)  # the store file alone, without its -wal
        with Run(copy, create=False) as copied:
            assert sorted(r["item_id"] for r in copied.rows()) == sorted(f"i{n}" for n in range(36))
        wal = store.with_name(store.name + "-wal")
        assert not wal.exists() or wal.stat().st_size == 0
    finally:
        reader.close()
