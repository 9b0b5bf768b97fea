"""The viewer's SQL over run stores: pages, sorts and filters equal the same selection made in Python on the rows
written, and reading never changes a store or creates a file beside it."""

from __future__ import annotations

from pathlib import Path

import pytest

from scijudge.errors import InputError
from scijudge.run.store import Run
from scijudge.view.stores import Filters, StoreView
from _view_world import J1, J2, make_world, sha256


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return make_world(tmp_path_factory.mktemp("stores"))


def _key(row):
    return (row["item_id"], row["judge"], row["model"])


def test_pages_cover_every_current_judgment_once_in_stored_order(world):
    view = StoreView([world.store])
    seen = []
    page = view.page(Filters(), page=1, size=7)
    assert page.total == len(world.judgments) and page.pages == -(-len(world.judgments) // 7)
    for number in range(1, page.pages + 1):
        seen += [_key(r) for r in view.page(Filters(), page=number, size=7).rows]
    assert seen == [_key(j) for j in world.judgments]


def test_sort_by_score_descending_and_filters_match_python(world):
    view = StoreView([world.store])
    filters = Filters(judge=J2, status="ok", score_min=2, score_max=4, model="m/beta")
    expected = [j for j in world.judgments if j["judge"] == J2 and j["status"] == "ok" and j["model"] == "m/beta"
                and 2 <= j["score"] <= 4]
    expected.sort(key=lambda j: (-j["score"], j["item_id"], j["judge"]))
    page = view.page(filters, sort="score", descending=True, page=1, size=1000)
    assert page.total == len(expected) > 3
    assert [(r["item_id"], r["score"]) for r in page.rows] == [(j["item_id"], j["score"]) for j in expected]


def test_text_search_finds_rationales_and_reasons_literally(world):
    view = StoreView([world.store])
    refused = view.page(Filters(text="refused the"), size=1000)
    assert refused.total == sum(1 for j in world.judgments if j["reason"]) > 0
    assert view.page(Filters(text="%"), size=1000).total == 0  # a LIKE wildcard is searched as a character
    assert {r["item_id"] for r in view.page(Filters(text="<script>"), size=1000).rows} == {"i003"}


def test_disagreement_with_labels_is_the_absolute_difference_and_sorts(world):
    view = StoreView([world.store])
    view.set_labels({("i000", J1, ""): [1.0, 2.0], ("i004", J1, ""): [5.0]})
    page = view.page(Filters(labelled=True), sort="disagreement", descending=True, size=100)
    expected = []
    for j in world.judgments:
        human = {"i000": 1.5, "i004": 5.0}.get(j["item_id"]) if j["judge"] == J1 else None
        if human is not None:
            expected.append((j["item_id"], j["model"], None if j["score"] is None else abs(j["score"] - human)))
    expected.sort(key=lambda t: (t[2] is None, -(t[2] or 0), t[0]))
    assert [(r["item_id"], r["model"], r["disagreement"]) for r in page.rows] == expected
    assert all(r["n_labels"] == (2 if r["item_id"] == "i000" else 1) for r in page.rows)


def test_spread_between_models_is_max_minus_min(world):
    view = StoreView([world.store])
    rows = view.page(Filters(judge=J1, status="ok"), sort="spread", descending=True, size=1000).rows
    by_item: dict[str, list[float]] = {}
    for j in world.judgments:
        if j["judge"] == J1 and j["status"] == "ok":
            by_item.setdefault(j["item_id"], []).append(j["score"])
    assert {r["item_id"]: r["spread"] for r in rows} == {i: max(s) - min(s) for i, s in by_item.items()}
    assert rows[0]["spread"] == max(max(s) - min(s) for s in by_item.values())


def test_summary_counts_ok_abstained_pending_cost_and_tokens(world):
    view = StoreView([world.store])
    summary = {(r["judge"], r["model"]): r for r in view.summary()}
    for (judge, model), row in summary.items():
        mine = [j for j in world.judgments if j["judge"] == judge and j["model"] == model]
        assert row["ok"] == sum(j["status"] == "ok" for j in mine)
        assert row["abstained"] == sum(j["status"] == "abstained" for j in mine)
        assert row["pending"] == 0 and row["tokens_in"] == sum(j["tokens_in"] for j in mine)
        assert row["cost"] == pytest.approx(0.001 * len(mine))


def test_one_item_decodes_its_json_columns(world):
    rows = StoreView([world.store]).item("i002")
    assert len(rows) == 4 and all(isinstance(r["probs"], dict) for r in rows if r["status"] == "ok")


def test_reading_changes_no_byte_and_creates_no_file(world):
    before = sha256(world.store)
    listing = sorted(p.name for p in world.store.parent.iterdir())
    view = StoreView([world.store, world.store])
    view.page(Filters(text="reason"), sort="spread", size=10)
    view.summary()
    view.set_labels({("i000", J1, ""): [3.0]})
    list(view.units())
    view.close()
    assert sha256(world.store) == before
    assert sorted(p.name for p in world.store.parent.iterdir()) == listing


def test_a_store_being_written_is_read_through_its_wal(tmp_path):
    world = make_world(tmp_path, n=4)
    with Run(world.store) as writer:
        writer.claim_writer()
        writer.record_many([dict(world.judgments[0], item_id="new", created_at="2026-12-02T00:00:00+00:00")])
        assert world.store.with_name("run.sqlite-wal").exists()
        view = StoreView([world.store])
        assert view.page(Filters(text=None), size=100).total == len(world.judgments) + 1
        view.close()


def test_bad_paths_are_one_clear_error(tmp_path):
    with pytest.raises(InputError, match="run store not found"):
        StoreView([tmp_path / "missing.sqlite"])
    bad = tmp_path / "bad.sqlite"
    bad.write_text("not sqlite at all, just text" * 50)
    with pytest.raises(InputError, match="not a scijudge run store"):
        StoreView([bad])
    with pytest.raises(InputError, match="at most 10"):
        StoreView([Path("x")] * 11)
    with pytest.raises(InputError, match="unknown sort"):
        StoreView([make_world(tmp_path / "w", n=2).store]).page(Filters(), sort="nope")


def test_a_writer_starting_after_the_view_opened_is_seen_through_its_wal(tmp_path):
    world = make_world(tmp_path, n=4)
    view = StoreView([world.store])
    assert view.page(Filters(), size=100).total == len(world.judgments)
    with Run(world.store) as writer:
        writer.claim_writer()
        writer.record_many([dict(world.judgments[0], item_id="late", created_at="2026-12-02T00:00:00+00:00")])
        assert view.page(Filters(text="late"), size=100).total == 1
    view.close()
