"""`scijudge view` in a real headless Chromium (Debian's chromium and chromedriver, driven by Selenium): browse,
filter, open an item, label three items by keyboard, undo one, read the labels file back; no token, no page; XSS
payloads stay text; the store's bytes never change. One server (the real CLI, in a subprocess) and one browser
for the whole module, so the tests take seconds.

Skipped with a reason without chromium and chromedriver (``needs_extra``); ``.ci/run`` sets SCIJUDGE_REQUIRE_EXTRAS=1,
which turns the skip into a failure. Selenium comes with the dev extra."""

from __future__ import annotations

import re
import shutil
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from _view_world import GOOD_REPLY, J1, REPLIED, XSS_ANSWER, XSS_REPLY, make_world, running_viewer, sha256

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver") or ("/usr/bin/chromedriver" if Path("/usr/bin/chromedriver").exists() else None)
# a server process and a browser start (a few seconds), shared by the module
pytestmark = [pytest.mark.slow, pytest.mark.needs_extra("chromium", "chromedriver")]
SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    import json
    import sqlite3

    from scijudge.spec.judge_spec import list_specs

    world = make_world(tmp_path_factory.mktemp("browser"))
    hashes = {spec.name: spec.spec_hash() for spec in list_specs()}
    db = sqlite3.connect(world.store)  # the shipped specs' hashes: the item pages can rebuild the prompts
    with db:
        for judge in {j["judge"] for j in world.judgments}:
            db.execute("UPDATE judgments SET spec_hash = ? WHERE judge = ?", (hashes[judge], judge))
        db.execute("UPDATE judgments SET result = json_object('rating', score, 'rationale', rationale) "
                   "WHERE status = 'ok'")  # the stored answer, as the chain stores it
    db.execute("PRAGMA journal_mode = DELETE")
    db.close()
    lines = [json.loads(line) for line in world.items.read_text().splitlines()]
    world.items.write_text("".join(json.dumps({**x, "papers": [{"title": f"paper of {x['id']}", "abstract": "an "
                                                                "abstract"}]}) + "\n" for x in lines))
    return world


@pytest.fixture(scope="module")
def server(world):
    out = world.store.parent / "new_labels.jsonl"
    before = (sha256(world.store), sorted(p.name for p in world.store.parent.iterdir()))
    with running_viewer([str(world.store), "--labels", str(world.labels), "--picks", str(world.picks), "--label-out",
                         str(out), "--annotator", "ann", "--judge", J1], SRC) as running:
        yield {**running, "labels": out, "before": before}


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,900"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=DRIVER), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def _wait(driver, condition, timeout=15):
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    ignored = (NoSuchElementException, StaleElementReferenceException)  # the page reloads under the check
    return WebDriverWait(driver, timeout, ignored_exceptions=ignored).until(condition)


def _no_xss(driver):
    assert not driver.title.startswith("pwned"), driver.title
    assert driver.execute_script("return window.__xss === undefined")


def test_without_the_token_nothing_is_served(server, browser):
    for path in ("", "items", "label"):
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(server["base"] + path, timeout=10)
        assert refused.value.code == 401
    request = urllib.request.Request(server["base"] + "label", data=b'{"item_id": "i000"}', method="POST",
                                     headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 401
    with pytest.raises(urllib.error.HTTPError) as wrong:
        urllib.request.urlopen(server["base"] + "?token=not-it", timeout=10)
    assert wrong.value.code == 403
    browser.get(server["base"] + "items")
    assert "token" in browser.find_element("tag name", "body").text


def test_browse_filter_and_open_an_item(server, browser, world):
    from selenium.webdriver.support.ui import Select

    browser.get(server["base"] + "?token=" + server["token"])
    assert "token=" not in browser.current_url  # the cookie carries it from here on
    assert len(browser.find_elements("css selector", "#runs tbody tr")) == 4  # 2 judges x 2 models
    browser.find_element("link text", "Items").click()
    Select(browser.find_element("name", "judge")).select_by_visible_text(J1)
    Select(browser.find_element("name", "status")).select_by_visible_text("ok")
    browser.find_element("name", "min").send_keys("4")
    browser.find_element("id", "apply").click()
    _wait(browser, lambda d: "judge=" in d.current_url)
    expected = sum(1 for j in world.judgments if j["judge"] == J1 and j["status"] == "ok" and j["score"] >= 4)
    assert browser.find_element("id", "count").text.startswith(f"{expected} judgments")
    scores = [float(e.text) for e in browser.find_elements("css selector", "#items td.score")]
    assert scores and min(scores) >= 4
    link = browser.find_elements("css selector", "a.item-link")[0]
    item_id = link.text
    link.click()
    _wait(browser, lambda d: d.title.startswith(f"Item {item_id}"))
    assert f"question {int(item_id[1:])}?" in browser.find_element("css selector", ".input").text
    assert len(browser.find_elements("css selector", ".judgment")) == 4
    _no_xss(browser)


def test_xss_in_an_answer_and_a_rationale_stays_text(server, browser):
    browser.get(server["base"] + "item?id=i001")
    assert XSS_ANSWER in browser.find_element("css selector", ".input[data-name=answer]").text
    _no_xss(browser)
    browser.get(server["base"] + "item?id=i003")
    assert "<script>document.title='pwned-rationale'</script>" in browser.find_element("css selector", ".rationale").text
    _no_xss(browser)
    assert not browser.find_elements("css selector", ".rationale b")  # the markup is not markup


def _unit(browser):
    return browser.find_element("id", "unit-item").text, browser.find_element("id", "unit-judge").text


def _press(browser, key, before):
    from selenium.webdriver.common.action_chains import ActionChains

    ActionChains(browser).send_keys(key).perform()
    _wait(browser, lambda d: _unit(d) != before)


def test_label_three_by_keyboard_undo_one_and_read_the_file_back(server, browser):
    import json

    browser.get(server["base"] + "label")
    hidden = browser.find_element("id", "hidden-judgments")
    assert not hidden.is_displayed()  # judgments hidden until labelled
    browser.find_element("id", "show-judgments").click()
    assert hidden.is_displayed()
    browser.find_element("id", "show-judgments").click()
    labelled = []
    for key in ("4", "2", "5"):
        unit = _unit(browser)
        labelled.append((unit, float(key)))
        _press(browser, key, unit)
    # picks, highest pi first; i012 (pi 0.35) has a label in --labels already
    assert [u for (u, _) in labelled] == [("i006", J1), ("i018", J1), ("i003", J1)]
    third = _unit(browser)
    _press(browser, "u", third)
    assert _unit(browser) == labelled[2][0]  # undone: back at the head of the queue
    lines = [json.loads(line) for line in server["labels"].read_text().splitlines()]
    assert [(x["item_id"], x["judge"], x["score"], x["annotator"], x["source"]) for x in lines] == \
        [(u[0], u[1], s, "ann", "human") for u, s in labelled[:2]]
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", x["labelled_at"]) for x in lines)
    from scijudge.labels import load_labels

    assert [(x.item_id, x.score) for x in load_labels(server["labels"])] == [(u[0], s) for u, s in labelled[:2]]
    _press(browser, "s", labelled[2][0])  # skip
    assert _unit(browser) != labelled[2][0]
    _no_xss(browser)


def test_the_calibration_page_fits_1400_px_and_carries_the_label_selection_warning(server, browser):
    browser.set_window_size(1400, 900)
    try:
        browser.get(server["base"] + "calibration")
        _wait(browser, lambda d: d.find_elements("tag name", "h1"), timeout=60)
        width = browser.execute_script("return document.documentElement.scrollWidth")
        inner = browser.execute_script("return window.innerWidth")
        assert width <= inner, (width, inner)  # wide tables scroll inside themselves
        shown = browser.execute_script("return [...document.images].map(i => [i.alt, i.naturalWidth, i.clientWidth])")
        assert shown and all(natural == client for _, natural, client in shown), shown  # figures unscaled: readable
        assert "the design did not pick have labels" in browser.find_element("tag name", "body").text
    finally:
        browser.set_window_size(1280, 900)


def test_the_store_is_unchanged_after_browsing_and_labelling(server, world):  # runs before the late judgments
    sha, listing = server["before"]
    time.sleep(0.1)
    assert sha256(world.store) == sha
    assert sorted(p.name for p in world.store.parent.iterdir() if not p.name.startswith("new_labels")) == listing


def test_the_matrix_shows_every_model_coloured_and_sorts_by_disagreement(server, browser, world):
    from selenium.webdriver.support.ui import Select

    browser.get(server["base"] + "matrix")
    Select(browser.find_element("name", "judge")).select_by_visible_text(J1)
    Select(browser.find_element("name", "sort")).select_by_value("spread")
    browser.find_element("id", "matrix-apply").click()
    _wait(browser, lambda d: "sort=spread" in d.current_url)
    headers = [e.text for e in browser.find_elements("css selector", "#matrix th.model")]
    assert headers == ["m/alpha", "m/beta"]
    rows = browser.find_elements("css selector", "#matrix tbody tr")
    assert len(rows) == len({j["item_id"] for j in world.judgments if j["judge"] == J1})
    spreads = [float(e.text) for e in browser.find_elements("css selector", "#matrix td.spread") if e.text]
    assert spreads == sorted(spreads, reverse=True) and spreads[0] > 0
    colours = {e.value_of_css_property("background-color") for e in browser.find_elements("css selector", "td.cell")}
    assert len(colours) >= 3  # scores on the scale: several colours


def test_an_items_prompt_its_stored_answer_and_each_attempts_raw_reply(server, browser):
    browser.get(server["base"] + "item?id=" + REPLIED[0])
    replies = browser.find_elements("css selector", ".judgment .raw-answer")
    assert [e.text for e in replies] == [XSS_REPLY, GOOD_REPLY]  # the unparsed reply too, as text
    _no_xss(browser)
    browser.get(server["base"] + "items?judge=" + J1 + "&sort=score&desc=1")
    first = browser.find_elements("css selector", "a.item-link")[1]
    item_id = first.text
    first.click()
    _wait(browser, lambda d: d.title.startswith(f"Item {item_id}"))
    assert browser.find_elements("id", "prev-item") and browser.find_elements("id", "next-item")
    answers = browser.find_elements("css selector", ".stored-answer")
    assert answers and '"rating":' in answers[0].text
    browser.find_elements("css selector", "a.prompt-link")[0].click()
    _wait(browser, lambda d: d.title.startswith("Prompt"))
    roles = [e.get_attribute("data-role") for e in browser.find_elements("css selector", ".prompt-message")]
    assert roles[0] == "system" and "user" in roles, browser.find_element("tag name", "main").text
    user = browser.find_elements("css selector", ".prompt-message[data-role=user]")[0].text
    assert f"question {int(item_id[1:])}?" in user and f"paper of {item_id}" in user
    _no_xss(browser)


def test_label_with_a_comment_and_a_second_tab_gets_a_message(server, browser):
    import json

    browser.get(server["base"] + "label")
    unit = _unit(browser)
    browser.find_element("id", "comment").send_keys("the second paragraph contradicts [1]")
    browser.find_element("id", "rationale").send_keys("mostly right")
    browser.find_element("css selector", "button.level[data-score='3']").click()
    _wait(browser, lambda d: _unit(d) != unit)
    line = json.loads(server["labels"].read_text().splitlines()[-1])
    assert (line["item_id"], line["judge"], line["score"]) == (unit[0], unit[1], 3.0)
    assert line["comment"] == "the second paragraph contradicts [1]" and line["rationale"] == "mostly right"
    shown = _unit(browser)  # another tab labels the unit this page shows, then this page presses a key
    browser.execute_script("return fetch('/label', {method: 'POST', headers: {'Content-Type': 'application/json'}, "
                           "body: JSON.stringify({item_id: arguments[0], judge: arguments[1], part: '', score: 2})})",
                           shown[0], shown[1])
    time.sleep(0.3)
    from selenium.webdriver.common.action_chains import ActionChains

    ActionChains(browser).send_keys("4").perform()
    _wait(browser, lambda d: d.find_elements("id", "flash"))
    assert "not saved" in browser.find_element("id", "flash").text and "another tab" in browser.find_element(
        "id", "flash").text


def test_a_judgment_stored_after_the_viewer_started_shows_without_a_reload(server, browser, world):
    from scijudge.run.store import Run

    browser.get(server["base"])
    cell = 'tr[data-key="0|' + J1 + '|m/gamma"]'
    assert not browser.find_elements("css selector", cell)
    before = browser.find_element("css selector", "#progress").text
    new = dict(world.judgments[0], model="m/gamma", item_id="late-item", score=5.0, status="ok")
    with Run(world.store) as run:
        run.record_dump(new)
    _wait(browser, lambda d: d.find_elements("css selector", cell), timeout=20)
    assert browser.find_element("css selector", cell + " td[data-col=ok]").text == "1"
    browser.execute_script("window.__marker = 1")  # a new row reloads the page; a new count is put in place
    with Run(world.store) as run:
        run.record_dump(dict(new, item_id="later-item"))
    _wait(browser, lambda d: d.find_element("css selector", cell + " td[data-col=ok]").text == "2", timeout=20)
    assert browser.execute_script("return window.__marker") == 1  # updated in place by the poll, not reloaded
    assert browser.find_element("css selector", "#progress").text != before
    browser.get(server["base"] + "item?id=later-item")
    assert "m/gamma" in browser.find_element("css selector", ".judgment").text
