"""Credentials never reach a store, an export, a report or the terminal (issue 11)."""

from __future__ import annotations

import json
import os

import pytest

from scijudge.redaction import MASK, redact, redact_argv, register_url_secrets
from scijudge.testing import Fault
from scijudge.testing.cli import run_commands

ENV_KEY = "sk-canaryENVkey0123456789"
URL_PASS = "canaryURLpass4567"
URL_TOKEN = "canaryURLtoken8910"
CANARIES = (ENV_KEY, URL_PASS, URL_TOKEN)
SPEC = 'name = "t.k"\nfamily = "likert"\ndescription = "d"\ninstructions = "Rate it."\n[[inputs]]\nname = "answer"\n'


def test_redact_text_patterns(monkeypatch):
    monkeypatch.setenv("MYPROVIDER_API_KEY", "plainvalue-no-prefix-42")
    text = ("GET http://bob:hunter2secret@host:8080/v1?model=x&api_key=AAA111&sig=BBB222#f "
            "Authorization: Bearer zzzTOKENzzz999 header {'authorization': 'Basic dXNlcjpwYXNz'} "
            "key sk-proj-abcdefghijklmnop and hf_abcdefghijklmnopqrs, env plainvalue-no-prefix-42 "
            "quoted plainvalue-no-prefix-42 kept: model=x")
    out = redact(text)
    for secret in ("hunter2secret", "AAA111", "BBB222", "zzzTOKENzzz999", "dXNlcjpwYXNz", "sk-proj-abcdefghijklmnop",
                   "hf_abcdefghijklmnopqrs", "plainvalue-no-prefix-42", "bob:"):
        assert secret not in out, (secret, out)
    assert "host:8080/v1?model=x&api_key=***&sig=***#f" in out and "kept: model=x" in out
    assert redact("an ordinary sentence about keys and tokens") == "an ordinary sentence about keys and tokens"


def test_argv_masker_hides_the_secret_itself():
    argv = ["judge", "items.jsonl", "--api-key", "sk-abcdefghijkl", "--hf-token=hf_secret_value_123",
            "--api-base", "http://u:pw123456@h/v1?token=T0KEN123", "--judge", "my_key_judge.toml", "--run", "r.sqlite"]
    safe = redact_argv(argv)
    assert safe == ["judge", "items.jsonl", "--api-key", MASK, f"--hf-token={MASK}", "--api-base",
                    f"http://{MASK}@h/v1?token={MASK}", "--judge", "my_key_judge.toml", "--run", "r.sqlite"]


def test_url_secrets_are_remembered_when_echoed_alone():
    register_url_secrets("https://someone:Pa55word-xyz@api.example/v1?access_token=tok-abcdef-123&model=m")
    assert redact("login failed for Pa55word-xyz / tok-abcdef-123 / m") == f"login failed for {MASK} / {MASK} / m"




@pytest.mark.slow
def test_canary_keys_never_stored_exported_reported_or_printed(loopback, tmp_path):
    def handler(body: dict) -> object:
        if "echo me" in json.dumps(body):  # a provider that repeats the credentials in its error message
            return Fault(status=400, message=f"Incorrect API key provided: {ENV_KEY}. Authorization: Bearer {ENV_KEY}",
                         error_type="invalid_request_error")
        return json.dumps({"judgment": {"rationale": "fine", "rating": 4}})

    server = loopback(handler)
    (tmp_path / "spec.toml").write_text(SPEC)
    items = [{"id": "echo", "answer": "echo me"}] + [{"id": f"ok{k}", "answer": f"answer {k}"} for k in range(3)]
    (tmp_path / "items.jsonl").write_text("\n".join(json.dumps(i) for i in items) + "\n")
    (tmp_path / "labels.jsonl").write_text(
        "\n".join(json.dumps({"item_id": f"ok{k}", "judge": "t.k", "score": 3 + k % 2}) for k in range(3)) + "\n")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(OPENAI_API_KEY=ENV_KEY, LITELLM_LOCAL_MODEL_COST_MAP="true", DSPY_CACHEDIR=str(tmp_path / "cache"))
    secret_url = server.url.replace("http://", f"http://judge:{URL_PASS}@") + f"?token={URL_TOKEN}"
    outputs = run_commands([
        # credentials in the endpoint URL: the client cannot use them; they must still never appear anywhere
        ["judge", "items.jsonl", "-j", "spec.toml", "-m", "openai/judge", "--api-base", secret_url, "--run",
         "url.sqlite", "--no-progress", "--limit", "1", "--timeout", "5"],
        ["judge", "items.jsonl", "-j", "spec.toml", "-m", "openai/judge", "--api-base", server.url, "--run",
         "run.sqlite", "--no-progress"],
    ], tmp_path, env)
    outputs += run_commands([
        ["export", "run.sqlite", "--format", "jsonl", "--out", "run.jsonl"],
        ["export", "run.sqlite", "--format", "csv", "--out", "run.csv"],
        ["calibrate", "-l", "labels.jsonl", "-r", "run.sqlite", "--out", "report", "--n-boot", "0"],
    ], tmp_path, env)
    for done in outputs:
        assert "Traceback" not in done.stderr, done.stderr
    assert outputs[1].returncode == 0 and outputs[2].returncode == 0, outputs[1].stderr
    # The canary did travel: the server received the env key and echoed it into an error that was stored.
    assert f"Bearer {ENV_KEY}" in server.auth_headers
    stored = [json.loads(line) for line in (tmp_path / "run.jsonl").read_text().splitlines()]
    echoed = next(row for row in stored if row["item_id"] == "echo")
    assert echoed["status"] == "abstained" and "Incorrect API key provided: ***" in json.dumps(echoed["attempts"])
    assert sum(row["status"] == "ok" for row in stored) == 3
    written = [p for p in tmp_path.rglob("*") if p.is_file() and "cache" not in p.parts]
    assert {"url.sqlite", "run.sqlite", "run.jsonl", "run.csv"} <= {p.name for p in written}
    assert any(p.parent.name == "report" for p in written), outputs[-1].stderr
    for path in written:
        data = path.read_bytes()
        for canary in CANARIES:
            assert canary.encode() not in data, f"{canary} leaked into {path.name}"
    for done in outputs:
        for canary in CANARIES:
            assert canary not in done.stdout + done.stderr, f"{canary} printed by {done.args[:2]}"


def test_the_fast_paths_of_redact_change_nothing_it_would_mask(monkeypatch):
    """redact() with its cached secrets and pre-check equals the plain algorithm (every secret form, then every
    pattern, on every string), and follows the environment and registered keys as they change."""
    import random
    from urllib.parse import quote, quote_plus

    from scijudge import redaction

    def plain(text: str) -> str:
        for secret in redaction.known_secrets():
            for form in {secret, quote(secret, safe=""), quote_plus(secret)}:
                text = text.replace(form, redaction.MASK)
        for pattern, replacement in redaction._PATTERNS:
            text = pattern.sub(replacement, text)
        return text

    monkeypatch.setenv("MY_SERVICE_API_KEY", "s3cr3t/value+x")
    samples = ["http://user:pw123456@host/v1?token=abc&x=1", "Authorization: Bearer abcdefghijk", "key sk-abcdefghijklmnop",
               "hf_ABCDEFGHIJKLMN in text", "AIza" + "x" * 25, "plain rationale with 3 claims", "q17", "2026-12-01T10:00",
               "got s3cr3t/value+x back", "enc s3cr3t%2Fvalue%2Bx", "form s3cr3t%2Fvalue%2Bx", "API-KEY: zzzzzz",
               "BASIC dXNlcjpwYXNz", "https://h/p;sig=abc#f", "/data/file.jsonl", "GHP_abcdefghijkl", "xoxb-123456789",
               "Proxy-Authorization: Basic abcdefgh", "e3b0c44298fc1c149afbf4c8996fb924", "SK-ABCDEFGHIJK"]
    rng = random.Random(0)
    corpus = samples + [" ".join(rng.choice(samples) for _ in range(3)) for _ in range(500)]
    assert [redaction.redact(t) for t in corpus] == [plain(t) for t in corpus]
    one = redaction.redactor()
    assert [one(t) for t in corpus] == [plain(t) for t in corpus]
    monkeypatch.setenv("OTHER_TOKEN", "freshvalue99")
    assert redaction.redact("x freshvalue99") == "x ***"
    monkeypatch.delenv("OTHER_TOKEN")
    assert redaction.redact("x freshvalue99") == "x freshvalue99"
    redaction.register_secret("registered-key-1")
    assert redaction.redact("a registered-key-1") == "a ***"


def test_the_pre_check_is_true_wherever_one_of_its_substrings_is():
    """_may_match looks for a substring only where a character of it occurs: the same answer as looking for each
    (the list it had before), on texts built from pieces of every substring, their characters and their cases."""
    import random

    from scijudge import redaction

    needles = ("authorization", "api-key", "bearer", "basic", "sk-", "pk-", "rk-", "hf_", "hf-", "ghp", "gho", "ghs",
               "github_pat", "glpat", "xox", "aiza", "=")

    def spelled_out(text: str) -> bool:
        low = text.lower()
        return ("://" in low and "@" in low) or any(n in low for n in needles)

    rng = random.Random(11)
    pieces = [*needles, "://", "@", *sorted({c for n in needles for c in n}), "Z", "X", "G", "_-", " ", "é", "İ", "\n"]
    for n in needles:  # each with one character missing, in upper case and split apart
        pieces += [n[1:], n[:-1], n.upper(), n[: len(n) // 2] + " " + n[len(n) // 2:]]
    texts = ["", *pieces] + ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 6))) for _ in range(20000)]
    assert [redaction._may_match(t) for t in texts] == [spelled_out(t) for t in texts]
    assert sum(map(redaction._may_match, texts)) not in (0, len(texts))


def test_an_echoed_authorization_header_is_masked_and_its_closing_bracket_kept():
    from scijudge.redaction import redact

    said = redact("gateway said: bad request (Authorization: Bearer sk-abc123def456ghi789) [authorization=tok123456]")
    assert said == "gateway said: bad request (Authorization: ***) [authorization=***]", said
