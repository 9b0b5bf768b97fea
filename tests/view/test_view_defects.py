"""The viewer's defects that lost or hid data, each checked: outputs against inputs by file identity, labels
written whole or not at all, an unwritable label file refused at start, a second tab's label answered with a
message, undo keeping the file's mode, the export folder's mode, unknown items as 404, the answer key hidden, comments
stored with labels, and a quick start with --picks and --label-out."""

from __future__ import annotations

import errno
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from _view_world import J1, make_world
from starlette.testclient import TestClient
from typer.testing import CliRunner

from scijudge.errors import InputError
from scijudge.view import labelling
from scijudge.view.app import build_app, make_viewer

SRC = Path(__file__).resolve().parents[2] / "src"


def _cli(*args: str):
    from scijudge.cli import app

    return CliRunner().invoke(app, list(args), env={"COLUMNS": "300"})


def _client(world, out, **kwargs):
    viewer = make_viewer([world.store], label_out=out, annotator="ann", token="t", **kwargs)
    client = TestClient(build_app(viewer), base_url="http://127.0.0.1:8000")
    assert client.get("/?token=t").status_code == 200
    return viewer, client


def test_label_out_that_is_an_input_by_identity_is_refused(tmp_path):
    world = make_world(tmp_path / "w", n=3)
    linked = tmp_path / "linked.jsonl"
    os.link(world.labels, linked)  # the --labels file under another name
    for args in (["--label-out", str(linked), "--labels", str(world.labels)],
                 ["--label-out", str(world.items)],  # the items file the store recorded
                 ["--label-out", str(tmp_path / "w" / ".." / "w" / "items.jsonl"), "--items", str(world.items)]):
        before = {p.name: p.read_bytes() for p in (tmp_path / "w").iterdir() if p.is_file()}
        result = _cli("view", str(world.store), "--no-browser", *args)
        assert result.exit_code == 2 and "--label-out must be a new file" in result.output, result.output
        assert len(result.output.strip().splitlines()) == 1
        assert {p.name: p.read_bytes() for p in (tmp_path / "w").iterdir() if p.is_file()} == before


def test_a_full_disk_leaves_no_torn_line_and_answers_507(tmp_path, monkeypatch):
    world = make_world(tmp_path / "w", n=6)
    out = tmp_path / "new.jsonl"
    _viewer, client = _client(world, out)
    assert client.post("/label", json={"item_id": "i000", "judge": J1, "score": 3}).status_code == 200
    before = out.read_bytes()
    real_write = os.write

    def full(fd, data):  # half the line goes to disk, then the disk is full
        real_write(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(labelling.os, "write", full)
    answer = client.post("/label", json={"item_id": "i001", "judge": J1, "score": 4})
    assert answer.status_code == 507 and "No space left" in answer.json()["message"]
    assert "\n" not in answer.json()["message"]
    assert out.read_bytes() == before  # cut back: nothing of the failed label is left
    monkeypatch.setattr(labelling.os, "write", real_write)  # space freed
    assert client.post("/label", json={"item_id": "i001", "judge": J1, "score": 4}).status_code == 200
    from scijudge.labels import load_labels

    assert [(x.item_id, x.score) for x in load_labels(out)] == [("i000", 3.0), ("i001", 4.0)]


def test_an_unwritable_label_file_is_refused_at_start_in_one_line(tmp_path):
    world = make_world(tmp_path / "w", n=3)
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    result = _cli("view", str(world.store), "--label-out", str(blocker / "labels.jsonl"), "--no-browser")
    assert result.exit_code == 2 and "cannot write the label file" in result.output
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output
    if os.geteuid() != 0:  # root writes into a read-only folder anyway
        folder = tmp_path / "ro"
        folder.mkdir()
        folder.chmod(stat.S_IRUSR | stat.S_IXUSR)
        try:
            with pytest.raises(InputError, match="cannot write the label file"):
                labelling.LabelFile(folder / "labels.jsonl", "ann")
        finally:
            folder.chmod(stat.S_IRWXU)


def test_a_second_tab_labelling_the_same_unit_gets_a_visible_message(tmp_path):
    world = make_world(tmp_path / "w", n=6)
    _viewer, client = _client(world, tmp_path / "new.jsonl")
    first = client.post("/label", json={"item_id": "i002", "judge": J1, "score": 2})
    second = client.post("/label", json={"item_id": "i002", "judge": J1, "score": 5})
    assert first.status_code == 200 and second.status_code == 409
    message = second.json()["message"]
    assert "another tab" in message and "not saved" in message
    page = client.get("/label", params={"note": message}).text
    assert 'id="flash"' in page and "not saved: i002" in page
    assert "if (!r.ok)" in page  # the page's script turns any refusal into that note


def test_undo_keeps_the_label_files_mode_and_export_folders_get_the_usual_mode(tmp_path):
    world = make_world(tmp_path / "w", n=6)
    out = tmp_path / "new.jsonl"
    out.write_text("")
    out.chmod(0o640)
    _viewer, client = _client(world, out)
    for item, score in (("i000", 2), ("i001", 3)):
        assert client.post("/label", json={"item_id": item, "judge": J1, "score": score}).status_code == 200
    assert client.post("/label/undo", json={}, headers={"content-type": "application/json"}).json()["removed"]
    assert stat.S_IMODE(out.stat().st_mode) == 0o640
    assert len(out.read_text().splitlines()) == 1
    mask = os.umask(0)
    os.umask(mask)
    result = _cli("view", str(world.store), "--export", str(tmp_path / "site"))
    assert result.exit_code == 0, result.output
    assert stat.S_IMODE((tmp_path / "site").stat().st_mode) == 0o777 & ~mask


def test_an_unknown_item_is_404(tmp_path):
    world = make_world(tmp_path / "w", n=3)
    _viewer, client = _client(world, tmp_path / "new.jsonl")
    assert client.get("/item", params={"id": "nonexistent"}).status_code == 404
    assert client.get("/item", params={"id": "i001"}).status_code == 200


def test_the_answer_key_stays_hidden_and_comments_are_stored_and_read(tmp_path):
    world = make_world(tmp_path / "w", n=3)
    world.items.write_text("".join(json.dumps({
        "id": f"i{i:03d}", "question": f"question {i}?", "answer": f"answer {i}",
        "meta": {"intended_quality": "poor-secret", "flaws": ["invented-citation-secret"]}}) + "\n" for i in range(3)))
    out = tmp_path / "new.jsonl"
    _viewer, client = _client(world, out, judges=[J1])
    page = client.get("/label").text
    shown, hidden = page.split('id="hidden-judgments"', 1)
    assert "question 0?" in shown and "poor-secret" not in shown and "invented-citation-secret" not in shown
    assert "poor-secret" in hidden
    assert client.post("/label", json={"item_id": "i000", "judge": J1, "score": 2, "comment": "  cites [4], which is "
                       "not a source ", "rationale": "misses the main result"}).status_code == 200
    line = json.loads(out.read_text())
    assert line["comment"] == "cites [4], which is not a source" and line["rationale"] == "misses the main result"
    from scijudge.labels import load_labels

    (label,) = load_labels(out)
    assert label.comment == "cites [4], which is not a source" and label.rationale == "misses the main result"
    assert client.post("/label", json={"item_id": "i001", "judge": J1, "score": 2, "comment": 5}).status_code == 400


@pytest.mark.slow  # a subprocess: the imports of a cold start
def test_start_up_with_picks_and_label_out_imports_no_pandas_before_serving(tmp_path):
    world = make_world(tmp_path / "w", n=3)
    code = ("import sys; from pathlib import Path; from scijudge.view.app import build_app, make_viewer; "
            f"v = make_viewer([Path({str(world.store)!r})], picks=[Path({str(world.picks)!r})], "
            f"label_out=Path({str(tmp_path / 'l.jsonl')!r}), annotator='a'); build_app(v); "
            "print(sorted(m for m in ('pandas', 'scipy', 'dspy') if m in sys.modules))")
    env = dict(os.environ, PYTHONPATH=str(SRC))
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip() == "[]"


@pytest.mark.slow  # calibrate and estimate, in the viewer and on the command line
def test_the_calibration_page_warns_about_labels_outside_the_picks_as_estimate_does(tmp_path):
    world = make_world(tmp_path / "w", n=24)  # labels on every 4th item; picks on every 3rd: 4 labels unpicked
    viewer, client = _client(world, tmp_path / "new.jsonl", labels=[world.labels], picks=[world.picks])
    viewer.n_boot = 50
    page = client.get("/calibration").text
    cli = _cli("estimate", "--run", str(world.store), "--labels", str(world.labels), "--picks", str(world.picks))
    assert cli.exit_code == 0, cli.output
    cli_text = " ".join(cli.output.split())
    assert "4 items the design did not pick have labels" in cli_text
    import html

    shown = [html.unescape(w) for w in __import__("re").findall(r"<p class='warn'>warning: ([^<]+)</p>", page)]
    assert any(w.startswith("4 items the design did not pick have labels") and " ".join(w.split()) in cli_text
               for w in shown), (shown, cli_text)
    assert "table{display:block;overflow-x:auto" in page


def test_annotators_sharing_a_label_file_get_shares_of_the_queue_not_duplicates(tmp_path, monkeypatch):
    import re

    world = make_world(tmp_path / "w", n=8)
    out = tmp_path / "shared.jsonl"

    def shown(client):
        return re.search(r'id="unit-item">([^<]+)<', client.get("/label").text).group(1)

    clients = {}
    for name in ("ann", "bob", "ann"):
        viewer = make_viewer([world.store], label_out=out, annotator=name, token="t", judges=[J1])
        client = TestClient(build_app(viewer), base_url="http://127.0.0.1:8000")
        client.get("/?token=t")
        clients.setdefault(name, []).append(client)
    first_ann, first_bob = shown(clients["ann"][0]), shown(clients["bob"][0])
    assert first_ann != first_bob  # each annotator has a unit of its own
    assert shown(clients["ann"][1]) == first_ann  # a second viewer (or tab) of the same annotator: the same unit
    assert clients["ann"][0].post("/label", json={"item_id": first_ann, "judge": J1, "score": 3}).status_code == 200
    after = shown(clients["ann"][0])
    assert after not in (first_ann, first_bob)
    assert shown(clients["bob"][0]) == first_bob  # bob keeps his unit
    assert first_bob < after  # the queue's order: bob's unit comes first
    monkeypatch.setattr(labelling, "CLAIM_TTL_S", 0.0)  # an abandoned claim expires: its unit is free again
    assert shown(clients["ann"][0]) == first_bob
