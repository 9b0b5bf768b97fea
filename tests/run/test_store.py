"""The run store and judgment records: migration of a v1 store, no DSPy to open a store, DSPy internals checked."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

from scijudge.records import JudgeResult, judgment_key, safe_endpoint

# The schema and a row exactly as the previous release (schema v1) wrote them.
V1_SCHEMA = """
CREATE TABLE IF NOT EXISTS judgments (
    key TEXT PRIMARY KEY, item_id TEXT NOT NULL, judge TEXT NOT NULL, part TEXT NOT NULL DEFAULT '',
    family TEXT NOT NULL, spec_hash TEXT NOT NULL, model TEXT NOT NULL, status TEXT NOT NULL,
    score REAL, verdict TEXT, confidence REAL, probs TEXT, result TEXT, rationale TEXT, reason TEXT,
    attempts TEXT, tokens_in INTEGER, tokens_out INTEGER, cost REAL, latency_s REAL, created_at TEXT
);
CREATE INDEX IF NOT EXISTS judgments_item ON judgments(item_id, judge);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
"""
V1_COLUMNS = ["key", "item_id", "judge", "part", "family", "spec_hash", "model", "status", "score", "verdict",
              "confidence", "probs", "result", "rationale", "reason", "attempts", "tokens_in", "tokens_out", "cost",
              "latency_s", "created_at"]


def _v1_store(path, url: str, spec_hash: str, rows: list[tuple[str, float]]) -> None:
    db = sqlite3.connect(path)
    db.executescript(V1_SCHEMA)
    db.execute("INSERT INTO meta VALUES ('api_base', ?)", (json.dumps(url.replace("http://", "http://u:SECRET@")),))
    for n, (item_id, score) in enumerate(rows):
        key = judgment_key(item_id, "t.a", "", spec_hash, "openai/judge")  # the v1 key: five fields
        values = [key, item_id, "t.a", "", "likert", spec_hash, "openai/judge", "ok", score, None, None, None,
                  json.dumps({"rating": score}), "r", None, "[]", 50, 20, None, 0.1, f"2026-01-01T00:00:0{n}+00:00"]
        db.execute(f"INSERT INTO judgments ({', '.join(V1_COLUMNS)}) VALUES ({', '.join('?' * len(values))})", values)
    db.commit()
    db.close()


def test_a_v1_store_is_migrated_and_resumes_without_judging_again(loopback, tmp_path):
    from test_result_integrity import items, judges, rating_from_prompt

    from scijudge import Run, judge_items

    server = loopback(rating_from_prompt)
    judge = judges(server.url, names=("t.a",))[0]
    path = tmp_path / "old.sqlite"
    _v1_store(path, server.url, judge.spec_hash, [("i00", 2.0), ("i01", 3.0)])
    before = path.read_bytes()
    with Run(path) as run:  # read as the current schema, without migrating: reading never writes
        rows = list(run.rows())
        assert [(r["item_id"], r["score"], r["endpoint"], r["current"]) for r in rows] == [
            ("i00", 2.0, server.url, True), ("i01", 3.0, server.url, True)]
        assert "SECRET" not in json.dumps(rows)
        assert "schema_version" not in run.meta() and run.readonly
    assert path.read_bytes() == before
    with Run(path) as run:
        summary = judge_items(items(3), [judge], run=run)  # writing migrates first
        assert run.meta()["schema_version"] == 2
        frame = run.to_pandas()
    assert summary.skipped_done == 2 and summary.judged == 1 and server.count == 1
    assert dict(zip(frame.item_id, frame.score)) == {"i00": 2.0, "i01": 3.0, "i02": 4.0}
    with Run(path) as reopened:  # opening a migrated store again changes nothing
        assert len(reopened) == 3


def test_opening_and_reading_a_store_imports_no_dspy(tmp_path):
    from scijudge import Run

    with Run(tmp_path / "r.sqlite") as run:
        run.record(JudgeResult(item_id="a", judge="j", family="likert", spec_hash="s", model="m", status="ok", score=1))
    code = ("import sys; from scijudge.run.store import Run; r = Run(sys.argv[1]); rows = list(r.rows()); "
            "r.export(sys.argv[1] + '.jsonl'); "
            "print(len(rows), sorted(m for m in ('dspy', 'litellm', 'torch', 'pandas') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "r.sqlite")], capture_output=True, text=True,
                          timeout=60)
    assert done.stdout.strip() == "1 []", done.stderr


def test_the_key_covers_content_endpoint_and_decoding():
    base = judgment_key("i", "j", "", "s", "m", "http://a/v1", "h1", '{"max_tokens":1024}')
    assert base != judgment_key("i", "j", "", "s", "m", "http://b/v1", "h1", '{"max_tokens":1024}')
    assert base != judgment_key("i", "j", "", "s", "m", "http://a/v1", "h2", '{"max_tokens":1024}')
    assert base != judgment_key("i", "j", "", "s", "m", "http://a/v1", "h1", '{"max_tokens":2048}')
    assert judgment_key("i", "j", "", "s", "m") == judgment_key("i", "j", "", "s", "m", "", "", "")


def test_endpoints_are_stored_without_credentials():
    assert safe_endpoint("http://user:KEY@host:8000/v1/?api_key=KEY&token=T#frag") == "http://host:8000/v1"
    assert safe_endpoint(None) == ""


def test_the_dspy_internals_we_use_are_still_there():
    from scijudge.lm import dspy_compat, _speedups

    assert dspy_compat.check() == []
    assert _speedups.install() is True and dspy_compat.model_info_patched()
