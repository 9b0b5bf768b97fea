"""`scijudge view` on the command line: its help and example, the static export, clear errors; the server's first
line (the URL with its token) and --port 0."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from _view_world import XSS_ANSWER, XSS_RATIONALE, make_world, sha256
from typer.testing import CliRunner

SRC = Path(__file__).resolve().parents[2] / "src"


def _cli(*args: str):
    from scijudge.cli import app

    return CliRunner().invoke(app, list(args), env={"COLUMNS": "250"})


def test_help_names_the_contract_options_and_an_example_on_bundled_data():
    result = _cli("view", "--help")
    assert result.exit_code == 0
    for flag in ("--labels", "--picks", "--label-out", "--annotator", "--port", "--host", "--no-browser", "--export"):
        assert flag in result.output
    text = " ".join(result.output.split())
    assert "Example: scijudge view runs/demo.sqlite --label-out my_labels.jsonl" in text
    assert "--labels datasets/expertqa/labels.jsonl" in text


def test_export_writes_a_self_contained_read_only_site(tmp_path):
    world = make_world(tmp_path / "w", n=60)
    before = sha256(world.store)
    out = tmp_path / "site"
    result = _cli("view", str(world.store), "--export", str(out))  # with labels: test_app's calibration test
    assert result.exit_code == 0, result.output
    assert "5 items pages, 60 item pages" in result.output  # 240 judgments, 50 a page; one page per item
    pages = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.html"))
    assert {"index.html", "items-1.html", "items-5.html", "calibration.html", "matrix.html"} <= set(pages) and len(pages) == 68
    text = "".join(p.read_text() for p in out.rglob("*.html"))
    assert "<script" not in text.lower() and "http://" not in text and "https://" not in text
    assert XSS_ANSWER not in text and "&lt;img src=x onerror=" in text and XSS_RATIONALE not in text
    index = (out / "items-1.html").read_text()
    first = re.search(r'href="(items/item-[0-9a-f]+\.html)"', index).group(1)
    assert (out / first).exists() and "question 0?" in (out / first).read_text()
    assert "No labels were given" in (out / "calibration.html").read_text()
    assert sha256(world.store) == before
    again = _cli("view", str(world.store), "--export", str(out))
    assert again.exit_code == 2 and "exists already" in again.output


@pytest.mark.slow  # the picks error is pandas' first import in the process
def test_bad_input_is_one_line_naming_the_file(tmp_path):
    result = _cli("view", str(tmp_path / "missing.sqlite"), "--export", str(tmp_path / "site"))
    assert result.exit_code == 2 and "run store not found" in result.output and "Traceback" not in result.output
    world = make_world(tmp_path / "w", n=3)
    bad = tmp_path / "bad.csv"
    bad.write_text("item_id,pi\nx,0.5\n")
    result = _cli("view", str(world.store), "--picks", str(bad), "--label-out", str(tmp_path / "l.jsonl"),
                  "--no-browser")
    assert result.exit_code == 2 and "picked" in result.output and "bad.csv" in result.output
    broken = tmp_path / "labels.csv"
    broken.write_text("item_id,judge,score\ni000,j,high\n")
    result = _cli("view", str(world.store), "--labels", str(broken), "--export", str(tmp_path / "site"))
    assert result.exit_code == 2 and "labels.csv:2, field 'score'" in result.output
    result = _cli("view", str(world.store), "--label-out", str(world.labels), "--labels", str(world.labels))
    assert result.exit_code == 2 and "--label-out must be a new file" in result.output
    assert not list(tmp_path.glob("site*"))


@pytest.mark.slow
def test_the_first_line_is_the_url_with_its_token_and_port_0_picks_a_free_port(tmp_path):
    world = make_world(tmp_path / "w", n=3)
    env = dict(os.environ, PYTHONPATH=str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    process = subprocess.Popen([sys.executable, "-m", "scijudge", "view", str(world.store), "--no-browser", "--port",
                                "0", "--host", "127.0.0.1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=env)
    try:
        line = process.stdout.readline()
        match = re.fullmatch(r"scijudge view: http://127\.0\.0\.1:(\d+)/\?token=([\w-]{20,})\n", line)
        assert match and int(match.group(1)) > 0, line
        import http.cookiejar

        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        with opener.open(line.split(": ", 1)[1].strip(), timeout=20) as page:  # the token, then its cookie
            assert page.status == 200 and b"Runs" in page.read() and page.url.endswith(f":{match.group(1)}/")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"http://127.0.0.1:{match.group(1)}/items", timeout=20)
        assert refused.value.code == 401
    finally:
        process.terminate()
        process.wait(10)


def test_other_hosts_are_warned_about(capsys):
    import io

    from scijudge.view.server import is_loopback

    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.4")
    err = io.StringIO()
    from scijudge.view import server

    class _Stop(Exception):
        pass

    def no_run(self, sockets=None):
        raise _Stop

    import uvicorn

    original = uvicorn.Server.run
    uvicorn.Server.run = no_run
    try:
        out = io.StringIO()
        with pytest.raises(_Stop):
            server.serve(object(), "tok", host="0.0.0.0", port=0, open_browser=False, out=out, err=err)
    finally:
        uvicorn.Server.run = original
    assert out.getvalue().startswith("scijudge view: http://0.0.0.0:") and "reachable from other machines" in err.getvalue()
