"""The viewer app through Starlette's test client: the token gate, escaped text, labelling by POST, and labels
that `estimate --picks` reads to the same interval as the same labels written by hand."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from _view_world import GOOD_REPLY, J1, XSS_ANSWER, XSS_RATIONALE, XSS_REPLY, make_world, sha256
from starlette.testclient import TestClient
from typer.testing import CliRunner

from scijudge.view.app import build_app, cookie_name, make_viewer
from scijudge.view.stores import Filters


@pytest.fixture
def served(tmp_path):
    world = make_world(tmp_path / "w")
    viewer = make_viewer([world.store], labels=[world.labels], picks=[world.picks], label_out=tmp_path / "new.jsonl",
                         annotator="ann", token="secret-token")
    viewer.n_boot = 50
    client = TestClient(build_app(viewer), base_url="http://127.0.0.1:8000")
    return world, viewer, client


def _in(client: TestClient) -> TestClient:
    first = client.get("/?token=secret-token", follow_redirects=False)
    assert first.status_code == 303 and first.headers["location"] == "/"
    assert "httponly" in first.headers["set-cookie"].lower() and "samesite=strict" in first.headers["set-cookie"].lower()
    return client


def test_no_token_is_401_a_wrong_one_403_and_the_cookie_lets_in(served):
    _world, _viewer, client = served
    for path in ("/", "/items", "/item?id=i001", "/label", "/calibration"):
        assert client.get(path).status_code == 401
    assert client.post("/label", json={"item_id": "i000", "judge": J1, "score": 3}).status_code == 401
    assert client.get("/items?token=wrong").status_code == 403
    client.cookies.set(cookie_name("secret-token"), "wrong")
    assert client.get("/items").status_code == 403
    client.cookies.clear()
    _in(client)
    assert client.get("/items").status_code == 200
    assert client.get("/items?token=secret-token&judge=" + J1, follow_redirects=False).headers["location"] == \
        "/items?judge=" + J1  # the token leaves the address bar, the other parameters stay


def test_text_from_stores_and_items_is_escaped_and_scripts_are_forbidden(served):
    _world, _viewer, client = _in_served(served)
    page = client.get("/item?id=i001")
    assert XSS_ANSWER not in page.text and "&lt;img src=x onerror=" in page.text
    assert "script-src 'none'" in page.headers["content-security-policy"]
    listing = client.get("/items?q=script").text
    assert XSS_RATIONALE not in listing and "&lt;script&gt;document.title=" in listing


def test_the_item_page_shows_each_attempts_raw_reply_escaped(served):
    import html

    _world, _viewer, client = _in_served(served)
    page = client.get("/item?id=i002").text
    replies = [html.unescape(x.split(">", 1)[1]) for x in page.split('<div class="text raw-answer"')[1:]]
    assert [r.split("</div>", 1)[0] for r in replies] == [XSS_REPLY, GOOD_REPLY]  # the failed attempt's reply too
    assert "<svg onload" not in page and "&lt;svg onload=" in page
    assert "No raw reply is kept" in client.get("/item?id=i004").text  # a judgment stored without replies


def _in_served(served):
    world, viewer, client = served
    _in(client)
    return world, viewer, client


def test_label_skip_undo_by_post(served):
    world, viewer, client = _in_served(served)
    page = client.get("/label")
    assert "i006" in page.text and "nonce-" in page.headers["content-security-policy"]  # the first pick, pi 0.38 (then i012, 0.35)
    assert client.post("/label", json={"item_id": "i006", "judge": J1, "part": "", "score": 4}).status_code == 200
    assert client.post("/label", json={"item_id": "i006", "judge": J1, "part": "", "score": 2}).status_code == 409
    assert client.post("/label", json={"item_id": "i006", "judge": J1, "score": 4.5}).status_code == 400  # off-scale
    assert client.post("/label", json={"item_id": "nope", "judge": J1, "score": 4}).status_code == 400
    assert client.post("/label", content=b"[1]", headers={"content-type": "application/json"}).status_code == 400
    assert client.post("/label/skip", json={"item_id": "i006", "judge": "yescieval.qa.completeness"}).status_code == 200
    assert "i012" in client.get("/label").text.split("id=\"unit\"")[1][:200]
    assert client.post("/label/undo", json={}).json()["removed"]["item_id"] == "i006"
    assert (viewer.labelling.file.path.read_text()) == ""


def test_pages_answer_and_the_store_is_unchanged(served):
    world, _viewer, client = _in_served(served)
    before = sha256(world.store)
    for path in ("/", "/items?sort=disagreement&desc=1&judge=" + J1, "/items?min=2&max=3&status=ok&page=2",
                 "/item?id=i003", "/label", "/drift"):
        assert client.get(path).status_code == 200, path
    assert "drift needs two run stores" in client.get("/drift").text
    assert client.get("/items?sort=bogus").status_code == 400
    assert sha256(world.store) == before


@pytest.mark.slow
def test_the_calibration_page_shows_what_calibrate_computes(served):
    world, viewer, client = _in_served(served)
    page = client.get("/calibration")
    assert page.status_code == 200 and "Leaderboard" in page.text and "Estimates of the mean human score" in page.text
    from scijudge.labels import load_labels_frame
    from scijudge.metrics.calibration import calibrate
    from scijudge.run.store import Run

    with Run(world.store, create=False) as run:
        judgments = run.to_pandas()
    judgments["source"] = "run"
    result = calibrate(judgments, load_labels_frame(world.labels), n_boot=50, seed=0, allow_extra_labels=True)
    kappa = result.leaderboard["kappa_w"].iloc[0]
    assert f"{kappa:.3f}" in page.text  # calibrate's own number, as its report prints it
    assert client.get("/calibration").text == page.text  # cached until a labels file changes


def _cli(*args: str):
    from scijudge.cli import app

    return CliRunner().invoke(app, list(args), env={"COLUMNS": "250"})


@pytest.mark.slow  # two estimate runs
def test_labels_from_the_app_give_estimate_picks_the_same_interval_as_labels_written_by_hand(tmp_path):
    world = make_world(tmp_path / "w", n=24)
    out = tmp_path / "new.jsonl"
    viewer = make_viewer([world.store], picks=[world.picks], label_out=out, annotator="ann", judges=[J1], token="t")
    client = TestClient(build_app(viewer), base_url="http://127.0.0.1:8000")
    client.get("/?token=t")
    picked = pd.read_csv(world.picks, dtype={"item_id": str})
    picked = picked[picked["picked"]]["item_id"].tolist()
    for item_id in picked:
        response = client.post("/label", json={"item_id": item_id, "judge": J1, "score": world.truth[item_id]})
        assert response.status_code == 200, response.text
    hand = tmp_path / "hand.jsonl"
    hand.write_text("".join(json.dumps({"item_id": i, "judge": J1, "score": world.truth[i]}) + "\n" for i in picked))
    tables = []
    for labels in (out, hand):
        result = _cli("estimate", "--run", str(world.store), "--labels", str(labels), "--picks", str(world.picks),
                      "-j", J1, "--out", str(tmp_path / labels.stem))
        assert result.exit_code == 0, result.output
        tables.append(pd.read_csv(tmp_path / labels.stem / "estimate.csv"))
    ours, theirs = (t[t["method"] == "ppi"][["model", "estimate", "lo", "hi", "n_labeled"]].reset_index(drop=True)
                    for t in tables)
    scored = [sum(1 for j in world.judgments if j["judge"] == J1 and j["model"] == model and j["item_id"] in picked
                  and j["status"] == "ok") for model in ours["model"]]
    assert ours["n_labeled"].tolist() == scored and min(scored) >= len(picked) - 1  # an abstention is not a label
    pd.testing.assert_frame_equal(ours, theirs)


def test_two_tabs_labelling_the_same_unit_at_once_write_it_once(served):
    import threading

    world, viewer, client = _in_served(served)
    other = TestClient(build_app(viewer), base_url="http://127.0.0.1:8000")
    _in(other)
    codes: list[int] = []

    def post(tab: TestClient) -> None:
        codes.append(tab.post("/label", json={"item_id": "i009", "judge": J1, "score": 2}).status_code)

    tabs = [threading.Thread(target=post, args=(tab,)) for tab in (client, other, client, other)]
    for tab in tabs:
        tab.start()
    for tab in tabs:
        tab.join()
    assert sorted(codes) == [200, 409, 409, 409]
    assert len(viewer.labelling.file.path.read_text().splitlines()) == 1


def test_an_item_page_shows_probabilities_jury_members_and_labels(tmp_path):
    from scijudge.run.store import Run

    world = make_world(tmp_path / "w", n=4)
    jury = {"item_id": "i002", "judge": J1, "part": "", "family": "likert", "spec_hash": "h", "model": "jury:panel",
            "endpoint": "", "input_hash": "k", "decoding": "", "status": "ok", "score": 3.0, "verdict": None,
            "confidence": None, "probs": {"1": 0.1, "3": 0.7, "5": 0.2}, "rationale": None, "reason": None,
            "result": {"jury": {"method": "mean"}, "members": [
                {"member": "m/alpha", "status": "ok", "score": 2.0}, {"member": "<i>m/x</i>", "status": "abstained",
                                                                        "reason": "refused <b>"}]},
            "attempts": [], "tokens_in": 0, "tokens_out": 0, "cost": None, "latency_s": 0.0,
            "created_at": "2026-12-02T00:00:00+00:00"}
    with Run(world.store) as run:
        run.record_many([jury])
    viewer = make_viewer([world.store], labels=[world.labels], token="t")
    client = TestClient(build_app(viewer), base_url="http://127.0.0.1:8000")
    client.get("/?token=t")
    page = client.get("/item?id=i002").text
    members = page.split('class="members"')[1].split("</table>")[0]
    assert "m/alpha" in members and "&lt;i&gt;m/x&lt;/i&gt;" in members and "refused &lt;b&gt;" in members
    ok = sum(1 for j in world.judgments if j["item_id"] == "i002" and j["probs"])
    assert page.count('class="bar"') == 5 * ok + 3  # a bar per level of each stored distribution (5 levels; the jury 3)
    labels = client.get("/item?id=i000").text.split('id="labels"')[1]
    assert "expert" in labels and "given" in labels  # the label, its annotator and its source


def test_the_drift_page_between_two_stores_is_the_drift_commands_table(tmp_path):
    import shutil

    from scijudge.metrics.drift import drift_stores

    world = make_world(tmp_path / "w", n=12)
    again = tmp_path / "again.sqlite"
    shutil.copy(world.store, again)
    viewer = make_viewer([world.store, again], token="t")
    client = TestClient(build_app(viewer), base_url="http://127.0.0.1:8000")
    client.get("/?token=t")
    assert "Drift between run and again" in client.get("/").text
    page = client.get("/drift").text
    table = drift_stores(world.store, again)
    assert len(table) == 4 and page.count("<tr") == len(table) + 1
    assert all(f"<td>{model}</td>" in page for model in table["model"])


def test_labels_in_csv_are_shown_beside_the_judgments(tmp_path):
    world = make_world(tmp_path / "w", n=4)
    labels = tmp_path / "labels.csv"
    labels.write_text(f"item_id,judge,score,annotator\ni001,{J1},2,csv-ann\n")
    viewer = make_viewer([world.store], labels=[labels], token="t")
    client = TestClient(build_app(viewer), base_url="http://127.0.0.1:8000")
    client.get("/?token=t")
    rows = viewer.site.view.page(Filters(labelled=True), size=10).rows
    assert {(r["item_id"], r["judge"], r["human"]) for r in rows} == {("i001", J1, 2.0)}
    assert "csv-ann" in client.get("/item?id=i001").text
