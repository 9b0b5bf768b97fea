"""The label page stops its queue when the anytime-valid interval is certain enough, in a real headless Chromium:
`scijudge view --label-out F --target-width W` shows the judge's current interval above the queue, and after
the labels that make its confidence sequence W wide the queue shows "certain enough: ±W/2 at 90%" and no unit."""

from __future__ import annotations

import json

import numpy as np
import pytest
from _view_world import running_viewer
from test_browser import SRC, _wait, browser  # noqa: F401  (the module's headless Chromium fixture)

from scijudge.records import JudgeResult
from scijudge.run.store import Run

pytestmark = [pytest.mark.slow, pytest.mark.needs_extra("chromium", "chromedriver")]
JUDGE = "yescieval.qa.correctness"
N, PRE = 150, 40


def _truth(i: int) -> float:
    return float(1 + (i * 7) % 5)


def _score(i: int) -> float:
    return float(min(5, max(1, _truth(i) + (1 if i % 4 == 0 else 0) - (1 if i % 9 == 0 else 0))))


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    folder = tmp_path_factory.mktemp("certain")
    store = folder / "run.sqlite"
    with Run(store) as run:
        for i in range(N):
            run.record(JudgeResult(item_id=f"i{i:03d}", judge=JUDGE, family="likert", spec_hash="h", model="m",
                                   status="ok", score=_score(i)))
    (folder / "items.jsonl").write_text("".join(json.dumps({"id": f"i{i:03d}", "answer": f"answer {i}"}) + "\n"
                                                for i in range(N)))
    pre = folder / "pre.jsonl"
    pre.write_text("".join(json.dumps({"item_id": f"i{i:03d}", "judge": JUDGE, "score": _truth(i)}) + "\n"
                           for i in range(PRE)))
    picks = folder / "picks.csv"  # the queue's order: i040, i041, ... (highest pi first)
    picks.write_text("item_id,pi,picked\n" + "".join(f"i{i:03d},{0.9 - 0.001 * (i - PRE):.3f},true\n"
                                                      for i in range(PRE, PRE + 20)))
    # the target: between the sequence's width after 41 and after 42 labels (labels given in the queue's order)
    from scijudge.estimation.anytime import ppi_sequence

    order = list(range(PRE + 2))
    f_all = np.array([_score(i) for i in range(N)])
    seq = ppi_sequence(np.array([_truth(i) for i in order]), f_all[order], f_all.mean(), 0.1, bounds=(1.0, 5.0))
    widths = seq.hi - seq.lo
    assert widths[PRE] > widths[PRE + 1] and widths[PRE - 1] > widths[PRE + 1]
    target = float((widths[PRE] + widths[PRE + 1]) / 2)
    return {"store": store, "items": folder / "items.jsonl", "pre": pre, "picks": picks, "target": target,
            "out": folder / "new.jsonl"}


@pytest.fixture(scope="module")
def server(world):
    with running_viewer([str(world["store"]), "--items", str(world["items"]), "--labels", str(world["pre"]),
                         "--picks", str(world["picks"]), "--label-out", str(world["out"]), "--annotator", "ann",
                         "--target-width", repr(world["target"])], SRC) as running:
        yield running


def test_the_queue_stops_when_certain_enough(server, browser, world):  # noqa: F811
    from selenium.webdriver.common.action_chains import ActionChains

    browser.get(server["base"] + "?token=" + server["token"])
    browser.get(server["base"] + "label")
    for k, expected in enumerate(("i040", "i041")):
        _wait(browser, lambda d: d.find_elements("id", "unit-item"))
        notes = browser.find_element("id", "stop-notes").text
        assert f"{JUDGE} / m: not yet:" in notes and f"at n = {PRE + k} labels" in notes, notes
        assert not browser.find_elements("id", "certain-enough")
        item = browser.find_element("id", "unit-item").text
        assert item == expected
        ActionChains(browser).send_keys(str(int(_truth(int(item[1:]))))).perform()
        _wait(browser, lambda d, item=item: not d.find_elements("id", "unit-item")
              or d.find_element("id", "unit-item").text != item)
    _wait(browser, lambda d: d.find_elements("id", "certain-enough"))
    assert browser.find_element("id", "certain-enough").text == f"certain enough: ±{world['target'] / 2:g} at 90%"
    assert not browser.find_elements("id", "unit-item")  # the queue has stopped: no unit to label
    assert f"certain enough at n = {PRE + 2} of {PRE + 2} labels" in browser.find_element("id", "stop-notes").text
    written = [json.loads(line) for line in world["out"].read_text().splitlines()]
    assert [(x["item_id"], x["score"]) for x in written] == [("i040", _truth(40)), ("i041", _truth(41))]
