"""Each attempt keeps the model's reply as it came back (a reply that did not parse too), through the real DSPy client
against a loopback server, into the run store and back; a served cache hit keeps the cached reply; a runaway reply is
cut to ``REPLY_CHARS`` around a line that says so; stores written before replies were kept still read."""

from __future__ import annotations

import json

import dspy

from scijudge import ChainConfig, Item, Judge, StructuredChain, make_lm
from scijudge.chain import cache
from scijudge.records import REPLY_CHARS, JudgeResult, reply_text
from scijudge.run.store import Run
from scijudge.spec.judge_spec import JudgeSpec

SPEC = JudgeSpec(name="test.reply", family="likert", description="test rubric", instructions="Rate it.",
                 inputs=[{"name": "question"}, {"name": "answer"}])
ITEM = Item(id="i1", question="Why is the sky blue?", answer="Rayleigh scattering.")
BROKEN = "Sure! Here is my rating: {not json"
GOOD = '```json\n{"judgment": {"rationale": "fine", "rating": 4}}\n```'


def judge_for(server, *, cache_on: bool = False) -> Judge:
    lm = make_lm("openai/judge", api_base=server.url, cache=cache_on, timeout=5.0)
    return Judge(SPEC, lm=lm, chain=StructuredChain(ChainConfig(backoff_base=0.01)))


def test_each_attempt_keeps_its_reply_also_one_that_did_not_parse(loopback, tmp_path):
    server = loopback(lambda body: BROKEN if body["temperature"] == 0.0 else GOOD)
    result = judge_for(server).judge_one(ITEM)
    assert [(a.outcome, a.reply) for a in result.attempts] == [("parse_error", BROKEN), ("ok", GOOD)]
    with Run(tmp_path / "run.sqlite") as run:
        run.record(result)
    with Run(tmp_path / "run.sqlite", create=False) as run:
        stored = next(iter(run.rows()))["attempts"]
    assert [a["reply"] for a in stored] == [BROKEN, GOOD]


def test_a_cache_hit_keeps_the_cached_reply(loopback, tmp_path):
    dspy.configure_cache(enable_disk_cache=True, enable_memory_cache=False, disk_cache_dir=str(tmp_path / "dspy"))
    server = loopback(lambda body: GOOD)
    first = judge_for(server, cache_on=True).judge_one(ITEM)
    cache.flush()
    again = judge_for(server, cache_on=True).judge_one(ITEM)
    assert server.count == 1 and again.attempts[0].cached
    assert first.attempts[0].reply == again.attempts[0].reply == GOOD


def test_a_runaway_reply_keeps_its_start_and_end():
    text = "a" * 30_000 + "b" * 10_000
    kept = reply_text(text)
    assert reply_text(GOOD) == GOOD and reply_text("x" * REPLY_CHARS) == "x" * REPLY_CHARS
    # 20,000 kept: the first 15,000 characters and the last 5,000; 40,000 - 20,000 = 20,000 left out
    assert kept == "a" * 15_000 + "\n[... 20000 characters of the reply not kept ...]\n" + "b" * 5_000


def test_an_attempt_stored_before_replies_were_kept_still_reads():
    old = {"item_id": "i", "judge": "j", "family": "likert", "spec_hash": "h", "model": "m", "status": "ok",
           "attempts": [json.loads('{"strategy": "json_schema", "temperature": 0.0, "outcome": "ok"}')]}
    assert JudgeResult.model_validate(old).attempts[0].reply is None
