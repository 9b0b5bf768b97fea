"""A key written into --api-base (URL userinfo or ?api_key=) is sent as the client's key, never in the URL,
and never stored."""

from __future__ import annotations

import json

import pytest

from scijudge.lm import _split_credentials, make_lm


def test_the_key_leaves_the_url():
    assert _split_credentials("http://u:KEY1234@h:8000/v1/?api_key=Q&x=1") == ("http://h:8000/v1/?x=1", "KEY1234")
    assert _split_credentials("http://h/v1?api_key=Q9876543") == ("http://h/v1", "Q9876543")
    assert _split_credentials("http://TOKEN123@h/v1") == ("http://h/v1", "TOKEN123")
    assert _split_credentials("http://h/v1") == ("http://h/v1", None)


@pytest.mark.parametrize("form", ["query", "userinfo"])
def test_direct_judging_with_a_key_in_the_api_base(loopback, tmp_path, repo, form):
    from scijudge import Run, judge_items, load_items, load_judge

    server = loopback(lambda body: json.dumps({"judgment": {"rationale": "r", "rating": 4}}))
    secret = "SECRET-in-url-0123"
    base = f"{server.url}?api_key={secret}" if form == "query" else server.url.replace("http://", f"http://u:{secret}@")
    lm = make_lm("openai/judge", api_base=base, cache=False, timeout=5)
    assert lm.kwargs["api_base"] == server.url and lm.kwargs["api_key"] == secret
    items, _ = load_items(repo / "datasets/yescieval_example/items.jsonl")
    with Run(tmp_path / "r.sqlite") as run:
        summary = judge_items(items[:2], [load_judge("yescieval.qa.correctness", lm=lm)], run)
        rows = list(run.rows())
    assert summary.judged == 2 and server.auth_headers == [f"Bearer {secret}"] * 2
    assert {r["endpoint"] for r in rows} == {server.url} and {r["score"] for r in rows} == {4.0}
    assert secret not in json.dumps(rows)
    assert secret.encode() not in (tmp_path / "r.sqlite").read_bytes()
