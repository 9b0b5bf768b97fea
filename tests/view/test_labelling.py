"""The label file and the queue: labels that load_labels reads as they are, undo, no duplicate and no loss with
two writers at once, picks first (highest pi first), then escalated items, then the rest; a restart resumes."""

from __future__ import annotations

import json
import threading

import pytest
from _view_world import J1, J2, make_world

from scijudge.errors import InputError
from scijudge.labels import load_labels, load_labels_frame
from scijudge.view.labelling import LabelFile, Queue
from scijudge.view.stores import StoreView


def test_a_label_line_has_the_contract_keys_and_load_labels_reads_it(tmp_path):
    out = tmp_path / "new.jsonl"
    book = LabelFile(out, "ann")
    written, label = book.add(("i1", J1, ""), 4.0)
    assert written and label["labelled_at"].endswith("+00:00")
    line = json.loads(out.read_text().splitlines()[0])
    assert set(line) == {"item_id", "judge", "part", "score", "annotator", "source", "labelled_at"}
    assert (line["item_id"], line["judge"], line["score"], line["annotator"], line["source"]) == \
        ("i1", J1, 4.0, "ann", "human")
    [label] = load_labels(out)
    assert (label.item_id, label.score, label.source, label.labelled_at) == ("i1", 4.0, "human", line["labelled_at"])
    assert load_labels_frame(out)["label_source"].tolist() == ["human"]


def test_labelled_at_must_be_text_on_the_fast_and_the_slow_path(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"item_id": "i", "judge": "j", "score": 1, "labelled_at": 5}) + "\n")
    with pytest.raises(InputError, match="labelled_at"):
        load_labels(bad)
    with pytest.raises(InputError, match="labelled_at"):
        load_labels_frame(bad)


def test_the_same_annotator_cannot_label_a_unit_twice_another_can(tmp_path):
    out = tmp_path / "new.jsonl"
    mine, theirs = LabelFile(out, "ann"), LabelFile(out, "bob")
    assert mine.add(("i1", J1, ""), 4.0)[0]
    written, existing = mine.add(("i1", J1, ""), 2.0)
    assert not written and existing["score"] == 4.0
    assert theirs.add(("i1", J1, ""), 2.0)[0]
    assert [(x.annotator, x.score) for x in load_labels(out)] == [("ann", 4.0), ("bob", 2.0)]


def test_undo_removes_only_my_last_label_and_keeps_every_other_byte(tmp_path):
    out = tmp_path / "new.jsonl"
    out.write_text('{"item_id": "x", "judge": "j", "score": 1, "annotator": "ann", "source": "expert"}\n')
    mine, theirs = LabelFile(out, "ann"), LabelFile(out, "bob")
    mine.add(("i1", J1, ""), 4.0)
    mine.add(("i2", J1, ""), 3.0)
    theirs.add(("i3", J1, ""), 5.0)
    lines = out.read_text().splitlines(keepends=True)
    removed = mine.undo()
    assert removed is not None and removed["item_id"] == "i2"
    assert out.read_text() == "".join(lines[:2] + lines[3:])
    assert mine.undo()["item_id"] == "i1"
    assert mine.undo() is None  # the expert line was not written by the viewer: never undone
    assert [x.item_id for x in load_labels(out)] == ["x", "i3"]
    assert not list(tmp_path.glob("*.tmp"))


def test_two_writers_at_once_lose_and_duplicate_nothing(tmp_path):
    out = tmp_path / "new.jsonl"
    books = [LabelFile(out, "ann"), LabelFile(out, "ann"), LabelFile(out, "bob")]  # two tabs of ann, and bob
    units = [(f"i{k}", J1, "") for k in range(12)]

    def work(book: LabelFile) -> None:
        for unit in units:
            book.add(unit, 3.0)

    threads = [threading.Thread(target=work, args=(b,)) for b in books for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = [(x.item_id, x.annotator) for x in load_labels(out)]  # load_labels refuses a duplicate
    assert sorted(got) == sorted((u[0], who) for u in units for who in ("ann", "bob"))


def test_bad_label_files_are_refused_clearly(tmp_path):
    with pytest.raises(InputError, match="must end in .jsonl"):
        LabelFile(tmp_path / "labels.csv", "ann")
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"item_id": "a"}\nnot json\n')
    with pytest.raises(InputError) as caught:
        LabelFile(broken, "ann")
    assert caught.value.line == 2


def test_the_queue_is_picks_by_pi_then_escalated_and_ends_there_and_skips_what_is_done(tmp_path):
    world = make_world(tmp_path, n=12)
    escalated = tmp_path / "escalated.csv"
    escalated.write_text("item_id,pi,picked\ni001,1,true\ni003,1,true\ni002,1,false\n")
    view = StoreView([world.store])
    queue = Queue(view, [world.picks, escalated], judges=[J1])
    # the picks file: picked are i000, i003, i006, i009 with pi 0.2 + 0.03 * (i % 7): i006 0.38, i003 0.29, ...
    order = [(e.unit[0], e.why.split(" ")[0]) for e in queue.entries(set(), set())]
    assert order[:5] == [("i006", "picks.csv"), ("i003", "picks.csv"), ("i009", "picks.csv"), ("i000", "picks.csv"),
                         ("i001", "escalated.csv")]  # i003 escalated too: it counts once, first
    assert order[5:] == []  # the queue ends with the picks: estimate --picks leaves unpicked labels out
    assert [e.unit[0] for e in Queue(view, [], judges=[J1]).entries(set(), set())] == [f"i{k:03d}" for k in range(12)]
    assert all(e.unit[1] == J1 for e in queue.entries(set(), set()))
    done = {("i006", J1, "")}
    assert queue.next(done, {("i003", J1, "")}).unit == ("i009", J1, "")
    both = Queue(view, [world.picks])
    assert [e.unit for e in both.entries(set(), set())][:2] == [("i006", J2, ""), ("i006", J1, "")]  # judge order


def test_a_cascades_escalation_queue_queues_only_the_units_it_escalated(tmp_path):
    """Labels are per (item, judge, part), and a cascade escalates units: the queue takes the judge a row names (not
    the item's other judges, which a member trusted); a row naming no judge still means the whole item."""
    world = make_world(tmp_path, n=6)
    queue_file = tmp_path / "escalated.csv"
    queue_file.write_text("item_id,pi,picked,design,judge,part\n"
                          f"i001,1,true,cascade-escalation,{J1},\ni002,1,true,cascade-escalation,{J2},\n"
                          f"i002,1,true,cascade-escalation,{J1},\ni001,1,true,cascade-escalation,{J1},\n")
    plain = tmp_path / "plain.csv"
    plain.write_text("item_id,pi,picked\ni004,1,true\n")
    queue = Queue(StoreView([world.store]), [queue_file, plain])
    assert [e.unit for e in queue.entries(set(), set())] == [("i001", J1, ""), ("i002", J2, ""), ("i002", J1, ""),
                                                             ("i004", J2, ""), ("i004", J1, "")]
    assert queue.remaining_picks({("i002", J2, "")}) == 4


def test_a_restart_resumes_the_queue_from_the_label_file(tmp_path):
    world = make_world(tmp_path, n=6)
    out = tmp_path / "new.jsonl"
    view = StoreView([world.store])
    first = Queue(view, [world.picks], judges=[J1])
    book = LabelFile(out, "ann")
    head = first.next(set(), set())
    book.add(head.unit, 2.0)
    again = Queue(StoreView([world.store]), [world.picks], judges=[J1])
    done = {(x["item_id"], x["judge"], x["part"]) for x in LabelFile(out, "ann").labels()}
    assert again.next(done, set()).unit != head.unit
    assert again.next(done, set()).unit == list(first.entries({head.unit}, set()))[0].unit


def test_the_label_pages_scales_are_calibrates(tmp_path):
    """A scale the store records, the shipped spec of a stored hash, a family default: as ``resolve_scales`` (the
    rule calibrate runs) resolves them, without the calibration stack."""
    import pandas as pd

    from scijudge.metrics.calibration.scales import resolve_scales
    from scijudge.run.store import Run
    from scijudge.spec.judge_spec import get_spec
    from scijudge.view.app import make_viewer

    world = make_world(tmp_path / "w", n=4)
    linking = get_spec("lematerial.linking")
    rows = [dict(world.judgments[0], judge=linking.name, family=linking.family, spec_hash=linking.spec_hash(),
                 item_id=f"x{i}") for i in range(2)]
    rows.append(dict(world.judgments[0], judge="mine", family="checklist", spec_hash="unknown", item_id="x9"))
    with Run(world.store) as run:
        run.record_many(rows)
        run.set_meta(scales={J2: "0,10,2"})
    viewer = make_viewer([world.store], label_out=tmp_path / "new.jsonl", annotator="a")
    judges = [J1, J2, linking.name, "mine"]
    frame = pd.DataFrame(viewer.site.view.scale_rows())
    want = resolve_scales(frame, judges, {J2: "0,10,2"})[0]
    assert {j: viewer.scale_of(j) for j in judges} == {j: tuple(float(x) for x in want[j]) for j in judges}
    assert viewer.scale_of(J2) == (0.0, 10.0, 2.0) and viewer.scale_of(linking.name)[2] == 0.5
