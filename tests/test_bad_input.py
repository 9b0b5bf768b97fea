"""Clumsy and hostile input ends in one line naming file, line and field, never a traceback (issue 11)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest

from scijudge.testing.cli import run_commands
from scijudge.data import load_items
from scijudge.errors import InputError
from scijudge.labels import load_labels

SPEC = 'name = "t.k"\nfamily = "likert"\ndescription = "d"\ninstructions = "Rate it."\n[[inputs]]\nname = "answer"\n'
MARKUP_ID = "[link=https://evil.example]click[/link]"


def _run_all(commands: list[list[str]], cwd: Path) -> list[subprocess.CompletedProcess]:
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="true", DSPY_CACHEDIR=str(cwd / "cache"), COLUMNS="400")
    return run_commands(commands, cwd, env)


def _items_file(path: Path) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    lines = [
        json.dumps({"id": "ok1", "answer": "fine"}),                    # 1 (after a byte-order mark)
        '{"id": "sur", "answer": "half a pair: \\ud800"}',              # 2 lone surrogate
        '{"id": "deep", "meta": {"x": ' + deep + "}}",                 # 3 too deep for the JSON reader
        json.dumps({"id": "[/x]", "answer": "a"}),                      # 4 fine, odd id
        json.dumps({"id": "[/x]", "answer": "b"}),                      # 5 duplicated odd id
        json.dumps({"id": MARKUP_ID, "question": "no answer"}),         # 6 lacks the judge's input
        json.dumps({"id": "nest", "meta": {"x": json.loads("[" * 100 + "]" * 100)}}),  # 7 deeper than any item
    ]
    path.write_bytes(b"\xef\xbb\xbf" + "\n".join(lines).encode() + b"\n")


@pytest.mark.slow
def test_bad_items_are_listed_under_skip_invalid_and_fatal_otherwise(loopback, tmp_path):
    server = loopback(lambda body: json.dumps({"judgment": {"rationale": "ok", "rating": 3}}))
    (tmp_path / "spec.toml").write_text(SPEC)
    _items_file(tmp_path / "items.jsonl")
    (tmp_path / "afile").write_text("not a folder")
    (tmp_path / "good.jsonl").write_text(json.dumps({"id": "g", "answer": "fine"}) + "\n")
    (tmp_path / "instr.toml").write_text(SPEC.replace('name = "answer"', 'name = "instructions"'))
    common = ["-m", "openai/judge", "--api-base", server.url, "--no-progress"]
    skipping, stopping, under_file, bad_spec = _run_all([
        ["judge", "items.jsonl", "-j", "spec.toml", *common, "--run", "s.sqlite", "--skip-invalid"],
        ["judge", "items.jsonl", "-j", "spec.toml", *common, "--run", "t.sqlite"],
        ["judge", "good.jsonl", "-j", "spec.toml", *common, "--run", "afile/run.sqlite"],
        ["judge", "good.jsonl", "-j", "instr.toml", *common, "--run", "u.sqlite"],
    ], tmp_path)
    for done in (skipping, stopping, under_file, bad_spec):
        assert "Traceback" not in done.stderr, done.stderr
    assert skipping.returncode == 0, skipping.stderr
    judged = sqlite3.connect(tmp_path / "s.sqlite").execute("SELECT item_id, status FROM judgments").fetchall()
    assert sorted(judged) == [("[/x]", "ok"), ("ok1", "ok")]
    listed = [line for line in skipping.stderr.splitlines() if line.startswith("skipped")]
    assert len(listed) == 5, skipping.stderr
    assert "items.jsonl:2 field 'answer': invalid text: lone surrogate '\\ud800'" in listed[0]
    assert "items.jsonl:3" in listed[1] and "nested too deeply" in listed[1]
    assert "items.jsonl:5 field 'id': duplicated id '[/x]' (first on line 4)" in listed[2]  # markup shown as text
    assert "items.jsonl:7 field 'meta.x" in listed[3] and "nested more than" in listed[3]
    assert f"item {MARKUP_ID!r} has none" in listed[4] and "items.jsonl:6" in listed[4]

    assert stopping.returncode == 2 and stopping.stderr.strip().count("\n") == 0, stopping.stderr
    assert stopping.stderr.startswith("error: items.jsonl:2, field 'answer': invalid text")
    assert under_file.returncode == 2 and "afile/run.sqlite" in under_file.stderr, under_file.stderr
    assert bad_spec.returncode == 2 and "instr.toml:5, field 'inputs.0.name'" in bad_spec.stderr, bad_spec.stderr
    assert "reserved" in bad_spec.stderr


@pytest.mark.slow
def test_rubric_weights_labels_and_corrupt_stores_are_one_line_errors(tmp_path):
    reports = tmp_path / "reports"
    reports.mkdir()
    tasks = []
    for sample, weights in (("neg", [-1, -2]), ("huge", [1e308, 1e308])):  # no valid task: nothing is judged
        (reports / f"{sample}.md").write_text("A report.")
        tasks.append({"prompt": "p", "sample_id": sample, "rubrics": [
            {"criterion": f"criterion {k}", "weight": w, "axis": "Explicit Criteria"} for k, w in enumerate(weights)]})
    (tmp_path / "tasks.jsonl").write_text("\n".join(json.dumps(t) for t in tasks) + "\n")
    (tmp_path / "garbage.sqlite").write_bytes(b"this is not SQLite at all" * 100)
    store = tmp_path / "broken.sqlite"
    db = sqlite3.connect(store)
    from scijudge.run._schema import SCHEMA_SQL as _SCHEMA

    db.executescript(_SCHEMA)
    db.execute("INSERT INTO judgments (key, item_id, judge, part, family, spec_hash, model, status, result) "
               "VALUES ('k', 'i1', 'j', '', 'likert', 'h', 'm', 'ok', '{not json')")
    db.commit()
    db.close()
    (tmp_path / "labels.jsonl").write_text(json.dumps({"item_id": "i1", "judge": "j", "score": True}) + "\n")
    checklist, garbage, broken, labels = _run_all([
        ["judge", "tasks.jsonl", "--reports", "reports", "-j", "researchrubrics.checklist", "-m", "openai/x",
         "--api-base", "http://127.0.0.1:9/v1", "--run", "c.sqlite", "--no-progress"],
        ["export", "garbage.sqlite", "--out", "g.jsonl"],
        ["export", "broken.sqlite", "--out", "b.jsonl"],
        ["calibrate", "-l", "labels.jsonl", "-r", "broken.sqlite", "--n-boot", "0"],
    ], tmp_path)
    for done in (checklist, garbage, broken, labels):
        assert "Traceback" not in done.stderr, (done.args, done.stderr)
    assert checklist.returncode == 2, checklist.stderr
    assert checklist.stderr.startswith("error: tasks.jsonl:1, field 'rubrics': all 2 criteria have negative weights")
    from scijudge.importers.researchrubrics import read_tasks

    tasks_read, skipped = read_tasks(tmp_path / "tasks.jsonl", skip_invalid=True)
    assert tasks_read == [] and [(s.line, s.field) for s in skipped] == [(1, "rubrics"), (2, "rubrics.0.weight")]
    assert "weight 1e+308 is too large" in skipped[1].reason
    assert garbage.returncode == 2 and "garbage.sqlite: not a scijudge run store" in garbage.stderr, garbage.stderr
    assert broken.returncode == 2 and "broken.sqlite, field 'result': damaged run store" in broken.stderr, broken.stderr
    assert labels.returncode == 2 and "labels.jsonl:1, field 'score': score must be a number, not true" in labels.stderr


def test_loader_level_checks(tmp_path):
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"id": "a", "answer": "x"}).encode() + b"\n")
    assert [item.id for item in load_items(path)[0]] == ["a"]
    labels = tmp_path / "l.csv"
    labels.write_text("item_id,judge,score\na,j,nan\n")
    with pytest.raises(InputError, match="finite") as caught:
        load_labels(labels)
    assert (caught.value.line, caught.value.field) == (2, "score")
    from scijudge.errors import SpecError
    from scijudge.spec.judge_spec import load_spec_file

    deep = tmp_path / "deep.toml"
    deep.write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(SpecError, match="nested too deeply"):
        load_spec_file(deep)


def test_html_page_behind_http_200_is_retried_as_a_transport_error():
    from scijudge.errors import EndpointError
    import http.server
    import threading

    from scijudge import get_spec
    from scijudge.data import Item
    from scijudge.judges.base import Judge
    from scijudge.lm import make_lm
    from scijudge.chain.chain import ChainConfig, StructuredChain

    hits = []

    class Portal(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            hits.append(self.path)
            body = b"<html><body>Please sign in to the proxy</body></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Portal)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        lm = make_lm("openai/judge", api_base=f"http://127.0.0.1:{server.server_port}/v1", cache=False)
        chain = StructuredChain(ChainConfig(transport_retries=2, backoff_base=0.01, backoff_max=0.02))
        judge = Judge(get_spec("yescieval.qa.correctness"), lm=lm, chain=chain)
        with pytest.raises(EndpointError) as stopped:
            judge.judge_one(Item(id="a", question="q", papers=[{"title": "t"}], answer="x"))
    finally:
        server.shutdown()
    # Retried like any transport error (one try and two retries); a page every time means the wrong endpoint:
    # the run stops with a message that says what came back, and nothing is stored as a judgment.
    assert len(hits) == 3
    assert "HTTP 200 text/html reply" in str(stopped.value) and "--api-base" in str(stopped.value)


def test_is_finite_and_number_text_take_integers_beyond_any_float() -> None:
    """math.isfinite raises OverflowError on 10**400 and Python refuses to turn 10**5000 into text: the shared
    checks answer and describe such a number instead, so the error is one line."""
    from scijudge.vocab import is_finite, number_text

    assert [is_finite(v) for v in (1.0, 2**1023, -(2**1023), 10**400, -(10**400), float("nan"), float("inf"))] == [
        True, True, True, False, False, False, False]
    assert number_text(10**400) == "an integer of about 401 digits"
    assert number_text(-(10**5000)) == "an integer of about 5001 digits"
    assert (number_text(2.5), number_text(7), number_text(float("nan"))) == ("2.5", "7", "nan")
