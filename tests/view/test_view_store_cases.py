"""The viewer opens stores as every command does: a damaged, truncated, newer-schema or read-only-with-WAL store
gets the answer `scijudge export` gives it (the same one line, or the same judgments), never a traceback; a viewer
holds no read transaction between requests and shows what a writer stored after it started."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat

import pytest
from _view_world import make_world
from typer.testing import CliRunner

from scijudge.run.store import Run
from scijudge.view.stores import Filters, StoreView


def _cli(*args: str):
    from scijudge.cli import app

    return CliRunner().invoke(app, list(args), env={"COLUMNS": "400"})


def _error(output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in output, output
    return lines[0]


def _big_store(folder):
    world = make_world(folder, n=80)
    with Run(world.store) as run:  # long rationales: a store of many pages, whose middle pages can be damaged
        run.record_many(dict(j, item_id="z" + j["item_id"], rationale="r" * 900) for j in world.judgments)
    return world


def _damaged(tmp_path):
    world = _big_store(tmp_path / "damaged")
    data = bytearray(world.store.read_bytes())
    data[10 * 4096:12 * 4096] = b"\xa5" * (2 * 4096)
    world.store.write_bytes(bytes(data))
    return world.store


def _truncated(tmp_path):
    world = make_world(tmp_path / "truncated", n=24)
    data = world.store.read_bytes()
    world.store.write_bytes(data[: len(data) - 2048])  # half the last page (an index's): export reads every row
    return world.store


def _newer(tmp_path):
    world = make_world(tmp_path / "newer", n=4)
    db = sqlite3.connect(world.store)
    with db:
        db.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    db.execute("PRAGMA journal_mode=DELETE")
    db.close()
    return world.store


def _readonly_with_wal(tmp_path):
    world = make_world(tmp_path / "walsrc", n=4)
    folder = tmp_path / "ro"
    folder.mkdir()
    writer = sqlite3.connect(world.store)  # a killed writer: its judgments still in the -wal
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    with writer:
        writer.execute("UPDATE judgments SET rationale = 'in the wal' WHERE item_id = 'i000'")
    shutil.copyfile(world.store, folder / "run.sqlite")
    shutil.copyfile(world.store.with_name("run.sqlite-wal"), folder / "run.sqlite-wal")
    writer.close()
    folder.chmod(stat.S_IRUSR | stat.S_IXUSR)
    return folder / "run.sqlite"


@pytest.mark.slow  # CLI runs of export and view --export on four stores
@pytest.mark.parametrize("case", [_damaged, _truncated, _newer, _readonly_with_wal])
def test_view_answers_each_store_as_export_does(tmp_path, case):
    store = case(tmp_path)
    try:
        beside = sorted(p.name for p in store.parent.iterdir())
        exported = _cli("export", str(store), "--out", str(tmp_path / "out.jsonl"))
        viewed = _cli("view", str(store), "--export", str(tmp_path / "site"))
        assert sorted(p.name for p in store.parent.iterdir()) == beside  # no -shm (or any file) added beside it
        if exported.exit_code == 0:
            assert viewed.exit_code == 0, viewed.output
            n = sum(1 for _ in (tmp_path / "out.jsonl").open())
            assert f"{-(-n // 50)} items pages" in viewed.output
            if case is _readonly_with_wal:
                assert "in the wal" in "".join(p.read_text() for p in (tmp_path / "site").rglob("*.html"))
        else:
            assert exported.exit_code == viewed.exit_code == 2, (exported.output, viewed.output)
            assert _error(viewed.output) == _error(exported.output)
    finally:
        store.parent.chmod(stat.S_IRWXU)


def test_a_viewer_started_before_a_run_shows_its_judgments_and_holds_no_read_transaction(tmp_path):
    world = make_world(tmp_path / "w", n=4)
    view = StoreView([world.store])
    try:
        assert view.page(Filters()).total == len(world.judgments)
        with Run(world.store) as run:  # a whole run between two requests
            run.record_many(dict(j, item_id="run1-" + j["item_id"]) for j in world.judgments)
        assert view.page(Filters()).total == 2 * len(world.judgments)
        assert len(view.item("run1-i000")) == 4
        with Run(world.store) as run:
            run.claim_writer()
            for j in world.judgments:
                run.record_dump(dict(j, item_id="new-" + j["item_id"]))
                # between requests the viewer holds no snapshot: a writer's checkpoint copies every page
                busy, _log, _done = run._db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                assert busy == 0
                assert view.page(Filters()).total > len(world.judgments)
        assert view.page(Filters()).total == 3 * len(world.judgments)
        assert json.loads(json.dumps(view.summary()))[0]["ok"] > 0
    finally:
        view.close()
    assert not os.path.exists(str(world.store) + "-journal")


def test_a_store_damaged_while_served_is_one_line_not_a_traceback(tmp_path):
    from starlette.testclient import TestClient

    from scijudge.view.app import build_app, make_viewer

    world = _big_store(tmp_path / "served")
    client = TestClient(build_app(make_viewer([world.store], token="t")), base_url="http://127.0.0.1:8000",
                        raise_server_exceptions=False)
    assert client.get("/?token=t").status_code == 200
    data = bytearray(world.store.read_bytes())
    data[10 * 4096:12 * 4096] = b"\xa5" * (2 * 4096)
    world.store.write_bytes(bytes(data))
    for path in ("/", "/items", "/matrix", "/live"):
        answer = client.get(path)
        assert answer.status_code == 500, (path, answer.text[:200])
        assert len(answer.text.strip().splitlines()) == 1 and "Traceback" not in answer.text
        assert str(world.store) in answer.text and ("corrupt" in answer.text or "damaged" in answer.text)
