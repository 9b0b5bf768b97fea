"""Done-when of the viewer's safety: with `scijudge view` open (a real server process, its pages read while the run
goes) during a real `scijudge judge` run, the `.sqlite` alone, copied after `judge` exits, holds every judgment;
and the viewer, started before the run, shows them, each with the model's raw reply (escaped)."""

from __future__ import annotations

import html
import http.cookiejar
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from scijudge.run.store import Run
from scijudge.testing.cli import stored_ok_items

pytestmark = pytest.mark.slow  # two CLI processes and a loopback model: seconds

SPEC_TOML = """
name = "test.view"
family = "likert"
description = "a rubric for the viewer's tests"
instructions = "Rate the answer."
[[inputs]]
name = "question"
[[inputs]]
name = "answer"
"""
SRC = Path(__file__).resolve().parents[2] / "src"


def test_the_store_file_alone_holds_every_judgment_of_a_run_watched_by_the_viewer(loopback, tmp_path):
    reply = json.dumps({"judgment": {"rationale": "fine <b>4</b>", "rating": 4}})
    server = loopback(lambda body: reply, latency=0.05)
    items, spec, run = tmp_path / "items.jsonl", tmp_path / "spec.toml", tmp_path / "run.sqlite"
    items.write_text("".join(json.dumps({"id": f"it{i:03d}", "question": "Q?", "answer": f"answer {i}"}) + "\n"
                             for i in range(36)))
    spec.write_text(SPEC_TOML)
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="true", DSPY_CACHEDIR=str(tmp_path / "dspy"),
               PYTHONPATH=str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""), PYTHONUNBUFFERED="1")
    judge = [sys.executable, "-m", "scijudge", "judge", str(items), "-j", str(spec), "-m", "openai/judge",
             "--api-base", server.url, "--run", str(run), "--concurrency", "2", "--no-cache", "--no-progress"]
    first = subprocess.run([*judge, "--limit", "1"], env=env, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr  # the store exists before the viewer starts: one judgment
    viewer = subprocess.Popen([sys.executable, "-m", "scijudge", "view", str(run), "--no-browser", "--port", "0"],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = re.fullmatch(r"scijudge view: (\S+)\n", viewer.stdout.readline()).group(1)
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        base = url.split("?")[0]
        opener.open(url, timeout=20).read()
        running = subprocess.Popen(judge, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        while running.poll() is None:  # the viewer's pages read the store while the run writes it
            opener.open(base + "items", timeout=20).read()
            time.sleep(0.1)
        assert running.returncode == 0, running.stderr.read()
        page = opener.open(base + "items", timeout=20).read().decode()
        assert re.search(r'id="count">(\d+) judgments', page).group(1) == "36"  # started before the run, shows it
        item = opener.open(base + "item?id=it020", timeout=20).read().decode()  # judged after the viewer started
        shown = re.findall(r'class="text raw-answer" data-attempt="1">(.*?)</div>', item, re.S)
        assert [html.unescape(x) for x in shown] == [reply] and "&lt;b&gt;" in shown[0]  # as sent, escaped
        copy = tmp_path / "copy" / "run.sqlite"
        copy.parent.mkdir()
        shutil.copyfile(run, copy)  # the store file alone, while the viewer still has it open
        with Run(copy, create=False) as copied:
            assert {r["item_id"] for r in copied.rows() if r["status"] == "ok"} == {f"it{i:03d}" for i in range(36)}
        assert stored_ok_items(run) == {f"it{i:03d}" for i in range(36)}
    finally:
        viewer.terminate()
        viewer.wait(10)
