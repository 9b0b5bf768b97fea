"""The runs page's numbers and the models side by side: each judge x model's mean score and interval (checked
against scipy's normal quantile on the scores written), the abstention rate, /live after a judgment stored since
start, the items x models matrix sorted by spread and by disagreement with humans, prev/next along a filter, and
the prompt rebuilt from the shipped spec."""

from __future__ import annotations

import json
import math
import re
import sqlite3

import numpy as np
import pytest
from _view_world import J1, J2, MODELS, make_world
from scipy.stats import norm
from starlette.testclient import TestClient

from scijudge.run.store import Run
from scijudge.view.app import build_app, make_viewer


@pytest.fixture
def served(tmp_path):
    world = make_world(tmp_path / "w")
    viewer = make_viewer([world.store], labels=[world.labels], token="t")
    client = TestClient(build_app(viewer), base_url="http://127.0.0.1:8000")
    assert client.get("/?token=t").status_code == 200
    return world, viewer, client


def test_runs_rows_carry_the_mean_score_with_its_interval_and_the_abstention_rate(served):
    world, _viewer, client = served
    live = client.get("/live").json()
    assert live["total"] == len(world.judgments)
    for row in live["rows"]:
        _store, judge, model = row["key"].split("|")
        mine = [j for j in world.judgments if j["judge"] == judge and j["model"] == model]
        scores = np.array([j["score"] for j in mine if j["status"] == "ok"])
        half = norm.ppf(0.975) * scores.std() / math.sqrt(scores.size)  # by hand: the normal interval
        mean = f"{scores.mean():.2f} [{scores.mean() - half:.2f}, {scores.mean() + half:.2f}] (n={scores.size}, few)"
        assert row["cells"]["mean"] == mean
        rate = sum(j["status"] == "abstained" for j in mine) / len(mine)
        assert row["cells"]["abstention"] == f"{100 * rate:.1f}%"
    page = client.get("/").text  # the means computed for /live are in the page; a changed store's come by /live
    assert live["rows"][0]["cells"]["mean"] in page and "no run is writing it" in page


def test_live_counts_a_judgment_stored_after_start(served):
    world, _viewer, client = served
    before = client.get("/live").json()
    items_page = client.get("/items").text
    assert f"const stored = {before['total']};" in items_page and 'id="live-note"' in items_page
    with Run(world.store) as run:
        run.record_dump(dict(world.judgments[0], item_id="late", model=MODELS[0]))
    after = client.get("/live").json()
    assert after["total"] == before["total"] + 1
    row = next(r for r in after["rows"] if r["key"] == f"0|{world.judgments[0]['judge']}|{MODELS[0]}")
    old = next(r for r in before["rows"] if r["key"] == row["key"])
    assert int(row["cells"]["ok"]) + int(row["cells"]["abstained"]) == \
        int(old["cells"]["ok"]) + int(old["cells"]["abstained"]) + 1
    assert client.get("/item?id=late").status_code == 200


def test_the_matrix_is_items_by_models_sorted_by_spread_or_by_humans(served):
    world, _viewer, client = served
    page = client.get("/matrix", params={"judge": J1, "sort": "spread"}).text
    items = re.findall(r'class="item-link" href="/item\?id=(\w+)"', page)
    spread = {}
    for item in {j["item_id"] for j in world.judgments}:
        scores = [j["score"] for j in world.judgments if j["item_id"] == item and j["judge"] == J1
                  and j["score"] is not None]
        spread[item] = max(scores) - min(scores) if scores else None
    expected = sorted(spread, key=lambda i: (spread[i] is None, -(spread[i] or 0), items.index(i)))
    assert items == expected and len(items) == len(spread)
    assert [th for th in re.findall(r'<th class="model">([^<]+)</th>', page)] == list(MODELS)
    by_human = re.findall(r'class="item-link" href="/item\?id=(\w+)"',
                          client.get("/matrix", params={"judge": J1, "sort": "human"}).text)
    gaps = {}
    for item, truth in world.truth.items():
        if int(item[1:]) % 4 == 0:  # the labelled items
            scores = [j["score"] for j in world.judgments if j["item_id"] == item and j["judge"] == J1
                      and j["score"] is not None]
            gaps[item] = sum(abs(s - truth) for s in scores) / len(scores)
    top = sorted(gaps.values(), reverse=True)
    assert [gaps[i] for i in by_human[: len(gaps)]] == top
    assert client.get("/matrix", params={"judge": J2}).status_code == 200


def test_item_pages_step_along_the_items_tables_filter(served):
    world, _viewer, client = served
    query = {"judge": J2, "status": "ok", "sort": "score", "desc": "1"}
    listed = re.findall(r'class="item-link" href="/item\?id=(\w+)', client.get("/items", params=query).text)
    order = list(dict.fromkeys(listed))
    page = client.get("/item", params={"id": order[1], **query}).text
    prev = re.search(r'id="prev-item" href="/item\?id=(\w+)&amp;([^"]+)"', page)
    after = re.search(r'id="next-item" href="/item\?id=(\w+)', page)
    assert prev.group(1) == order[0] and after.group(1) == order[2]
    assert "judge=" in prev.group(2) and "sort=score" in prev.group(2)  # the filter goes with the link


@pytest.mark.slow  # builds a judge (DSPy's import)
def test_the_prompt_is_rebuilt_from_the_shipped_spec(tmp_path):
    from scijudge.spec.judge_spec import list_specs

    world = make_world(tmp_path / "w", n=3)
    spec_hash = next(s.spec_hash() for s in list_specs() if s.name == J1)
    db = sqlite3.connect(world.store)
    with db:
        db.execute("UPDATE judgments SET spec_hash = ? WHERE judge = ?", (spec_hash, J1))
    db.close()
    world.items.write_text("".join(json.dumps({"id": f"i{i:03d}", "question": f"question {i}?", "answer": f"answer {i}",
                                               "papers": [{"title": f"title {i}", "abstract": "abstract"}]}) + "\n"
                                   for i in range(3)))
    client = TestClient(build_app(make_viewer([world.store], token="t")), base_url="http://127.0.0.1:8000")
    client.get("/?token=t")
    page = client.get("/prompt", params={"id": "i002", "judge": J1}).text
    assert 'data-role="system"' in page and 'data-role="user"' in page
    assert "[[ ## question ## ]]" in page and "question 2?" in page and "title 2" in page
    unknown = client.get("/prompt", params={"id": "i002", "judge": J2}).text
    assert "is not one scijudge ships" in unknown
    assert client.get("/prompt", params={"id": "nope", "judge": J1}).status_code == 404


@pytest.mark.slow  # a decision judgment through the real client against a loopback server
def test_a_decision_judgments_prompt_is_the_rating_only_request_it_sent(tmp_path, loopback):
    import html

    from scijudge import Item, load_judge
    from scijudge.testing.openai_server import Reply, level_logprobs

    def answer(body):
        if body.get("logprobs"):
            return Reply("4", finish_reason="length", completion_tokens=1,
                         logprobs=level_logprobs({"3": 0.3, "4": 0.6}, lead=" "))
        return json.dumps({"judgment": {"rationale": "fine", "rating": 4}})

    server = loopback(answer)
    world = make_world(tmp_path / "w", n=2)
    item = Item(id="d1", question="Why is the sky blue?", answer="Rayleigh scattering.",
                papers=[{"title": "Scattering", "abstract": "Short waves scatter more."}])
    world.items.write_text(json.dumps(item.model_dump(mode="json")) + "\n")
    generated = load_judge(J1, model="openai/gen", api_base=server.url, cache=False).judge_one(item)
    sent_generated = server.requests[-1]["messages"]
    decided = load_judge(J1, model="openai/judge", api_base=server.url, cache=False, mode="decision").judge_one(item)
    sent_decided = server.requests[-1]["messages"]
    with Run(world.store) as run:
        run.record(generated)
        run.record(decided)
    client = TestClient(build_app(make_viewer([world.store], items=[world.items], token="t")))
    client.get("/?token=t")
    for model, sent in (("openai/gen", sent_generated), ("openai/judge", sent_decided)):
        # the prompt link of this model's judgment on the item page
        link = [u for u in re.findall(r'class="prompt-link" href="([^"]+)"', client.get("/item?id=d1").text)]
        page = client.get(html.unescape(link[[j["model"] for j in viewer_rows(world.store, "d1")].index(model)])).text
        shown = [html.unescape(m) for m in re.findall(r'data-role="(?:system|user)">(.*?)</div>', page, re.S)]
        assert shown == [m["content"] for m in sent], model  # exactly as sent
    assert "rating only" in shown[-1] and "rating-only request" in page


def viewer_rows(store, item_id):
    """The item's judgments in the order its page lists them (judge, part, model, store)."""
    from scijudge.view.stores import StoreView

    return StoreView([store]).item(item_id)
