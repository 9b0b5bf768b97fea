"""`scijudge view` in a real headless Chromium (Debian's chromium and chromedriver, driven by Selenium): browse,
filter, open an item, label three items by keyboard, undo one, read the labels file back; no token, no page; XSS
payloads stay text; the store's bytes never change. One server (the real CLI, in a subprocess) and one browser
for the whole module, so the tests take seconds.

Skipped with a reason without chromium and chromedriver (``needs_extra``); ``.ci/run`` sets SCIJUDGE_REQUIRE_EXTRAS=1,
which turns the skip into a failure. Selenium comes with the dev extra."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from _view_world import J1, XSS_ANSWER, make_world, sha256

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver") or ("/usr/bin/chromedriver" if Path("/usr/bin/chromedriver").exists() else None)
# a server process and a browser start (a few seconds), shared by the module
pytestmark = [pytest.mark.slow, pytest.mark.needs_extra("chromium", "chromedriver")]
SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return make_world(tmp_path_factory.mktemp("browser"))


@pytest.fixture(scope="module")
def server(world):
    out = world.store.parent / "new_labels.jsonl"
    env = dict(os.environ, PYTHONPATH=str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    before = (sha256(world.store), sorted(p.name for p in world.store.parent.iterdir()))
    process = subprocess.Popen(
        [sys.executable, "-m", "scijudge", "view", str(world.store), "--labels", str(world.labels), "--picks",
         str(world.picks), "--label-out", str(out), "--annotator", "ann", "--judge", J1, "--no-browser", "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        first = process.stdout.readline()
        match = re.fullmatch(r"scijudge view: (http://127\.0\.0\.1:(\d+)/)\?token=([\w-]+)\n", first)
        assert match, (first, process.stderr.read() if process.poll() is not None else "")
        yield {"base": match.group(1), "token": match.group(3), "labels": out, "before": before,
               "process": process}
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()


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


def test_the_store_is_unchanged_after_browsing_and_labelling(server, world):
    sha, listing = server["before"]
    time.sleep(0.1)
    assert sha256(world.store) == sha
    assert sorted(p.name for p in world.store.parent.iterdir() if not p.name.startswith("new_labels")) == listing
