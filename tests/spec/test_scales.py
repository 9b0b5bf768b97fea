"""A spec's own [scale] drives the prompt, the JSON schema sent and validation, for Likert and pairwise judges."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys

import pytest

from scijudge.errors import SpecError
from scijudge.spec.judge_spec import load_spec_file
from scijudge.chain.chain import strict_schema
from scijudge.testing.openai_server import all_text
from scijudge.vocab import ScaleTuple, consensus_score, majority_verdict, norm_verdict, scale_of, score_scale_of

SCALES = {"t.ten": (1, 10, 1), "t.half": (0, 4, 0.5), "t.seven": (1, 7, 1)}


def _spec(name: str, lo: float, hi: float, step: float, *, pairwise: bool = False) -> str:
    return (f'name = "{name}"\nfamily = "likert"\ndescription = "d"\ninstructions = "Rate it."\n'
            + ("pairwise = true\n" if pairwise else "")
            + f"[scale]\nmin = {lo}\nmax = {hi}\nstep = {step}\n[[inputs]]\nname = \"answer\"\n")


def _schema_scale(body: dict) -> tuple[float, float, float, dict]:
    """The scale the request's JSON schema states (read back from what was sent, not from our code)."""
    schema = body["response_format"]["json_schema"]["schema"]
    output = next(iter(schema["$defs"].values()))
    name = "rating" if "rating" in output["properties"] else "rating_a"
    field = output["properties"][name]
    enum = field.get("enum")
    step = (enum[1] - enum[0]) if enum else field.get("multipleOf", 1)
    return field["minimum"], field["maximum"], step, output


def _answer(body: dict) -> str:
    lo, hi, step, output = _schema_scale(body)
    near_top = hi - step  # in scale, above the old 1..5 ceiling for 1-10 and 1-7, a half step for 0-4
    if "preference" in output["properties"]:
        return json.dumps({"judgment": {"rationale": "r", "rating_a": near_top, "rating_b": lo, "preference": "A"}})
    return json.dumps({"judgment": {"rationale": "r", "rating": near_top}})


@pytest.mark.slow
def test_user_scales_are_honoured_end_to_end(loopback, tmp_path):
    server = loopback(_answer)
    judges = []
    for name, (lo, hi, step) in SCALES.items():
        (tmp_path / f"{name}.toml").write_text(_spec(name, lo, hi, step))
        judges += ["-j", f"{name}.toml"]
    (tmp_path / "pair.toml").write_text(
        'name = "t.pair"\nfamily = "pairwise"\noutput = "pairwise"\ndescription = "d"\ninstructions = "Compare."\n'
        '[scale]\nmin = 1\nmax = 10\n[[inputs]]\nname = "answer_a"\n[[inputs]]\nname = "answer_b"\n')
    judges += ["-j", "pair.toml"]
    (tmp_path / "items.jsonl").write_text(
        "\n".join(json.dumps({"id": f"i{k}", "answer": f"answer {k}", "answer_b": f"other {k}"}) for k in range(2)) + "\n")
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="true", DSPY_CACHEDIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-m", "scijudge", "judge", "items.jsonl", *judges, "-m", "openai/judge",
                           "--api-base", server.url, "--run", "run.sqlite", "--no-progress"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    rows = sqlite3.connect(tmp_path / "run.sqlite").execute(
        "SELECT judge, part, status, score, verdict, result FROM judgments").fetchall()
    assert len(rows) == 2 * 3 + 2 * 2  # three Likert judges, and the pairwise one in both orders
    assert {row[2] for row in rows} == {"ok"}, rows
    scores = {(judge, part): (score, verdict) for judge, part, _, score, verdict, _ in rows}
    assert scores == {("t.ten", ""): (9.0, None), ("t.half", ""): (3.5, None), ("t.seven", ""): (6.0, None),
                      ("t.pair", "AB"): (8.0, "A"), ("t.pair", "BA"): (-8.0, "B")}
    # What was sent: the schema's bounds and step, and the prompt's field description, follow each spec.
    seen = {}
    for body in server.requests:
        lo, hi, step, _ = _schema_scale(body)
        seen[(lo, hi, step)] = all_text(body)
    assert set(seen) == {(1, 10, 1), (0, 4, 0.5), (1, 7, 1)}
    assert "from 1 (worst) to 10 (best)" in seen[(1, 10, 1)]
    assert "from 0 (worst) to 4 (best) in steps of 0.5" in seen[(0, 4, 0.5)]
    meta = dict(sqlite3.connect(tmp_path / "run.sqlite").execute("SELECT key, value FROM meta").fetchall())
    assert json.loads(meta["scales"]) == {"t.ten": [1, 10, 1], "t.half": [0, 4, 0.5], "t.seven": [1, 7, 1],
                                          "t.pair": [-9, 9, 1]}  # what calibration reads the scales from
    results = {judge: json.loads(result) for judge, _, _, _, _, result in rows}
    assert isinstance(results["t.ten"]["rating"], int) and isinstance(results["t.pair"]["rating_a"], int)
    assert results["t.half"]["rating"] == 3.5


def test_pairwise_variant_uses_the_spec_scale(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text(_spec("t.p", 1, 10, 1, pairwise=True))
    pair = load_spec_file(path).as_pairwise()
    output = pair.output_type()
    judged = output.model_validate({"rationale": "r", "rating_a": 9, "rating_b": "2", "preference": "a"})
    assert judged.run_fields().score == 7 and judged.run_fields().verdict == "A"
    with pytest.raises(ValueError, match="outside the scale 1..10"):
        output.model_validate({"rationale": "r", "rating_a": 11, "rating_b": 2, "preference": "A"})
    schema = strict_schema(output)["$defs"]["PairwiseJudgment"]["properties"]
    assert (schema["rating_b"]["minimum"], schema["rating_b"]["maximum"], schema["rating_b"]["type"]) == (1, 10, "integer")
    assert score_scale_of(pair) == ScaleTuple(-9, 9, 1) and scale_of(pair) == ScaleTuple(1, 10, 1)


def test_half_steps_validate_and_off_steps_are_rejected(tmp_path):
    path = tmp_path / "h.toml"
    path.write_text(_spec("t.h", 0, 4, 0.5))
    output = load_spec_file(path).output_type()
    assert output.model_validate({"rationale": "r", "rating": "2.5"}).rating == 2.5
    with pytest.raises(ValueError, match="not on the scale's 0.5 steps"):
        output.model_validate({"rationale": "r", "rating": 2.3})
    wide = tmp_path / "w.toml"
    wide.write_text(_spec("t.w", 0, 100, 1))
    schema = strict_schema(load_spec_file(wide).output_type())["$defs"]["LikertRating"]["properties"]["rating"]
    assert (schema["maximum"], "enum" not in schema) == (100, True)
    fine = tmp_path / "f.toml"
    fine.write_text(_spec("t.f", 0, 10, 0.25))
    schema = strict_schema(load_spec_file(fine).output_type())["$defs"]["LikertRating"]["properties"]["rating"]
    assert schema["multipleOf"] == 0.25 and "enum" not in schema  # 41 levels: the step, not a list


def test_consensus_and_verdicts_hand_computed():
    scale = ScaleTuple(0, 4, 0.5)
    assert consensus_score([1, 2, 4], scale) == 2.0  # median 2
    assert consensus_score([1.0, 1.5], scale) == 1.0  # median 1.25 -> tie between 1.0 and 1.5 -> even step (1.0)
    assert consensus_score([1.5, 2.0], scale) == 2.0  # median 1.75 -> between 1.5 and 2.0 -> even step (2.0)
    assert consensus_score([], scale) is None
    assert norm_verdict("  Partially   Satisfied ") == "partially" and norm_verdict(None) is None  # canonical form
    assert majority_verdict(["A", "a ", "B"]) == "a" and majority_verdict(["A", "B"]) is None


def test_bad_scale_is_a_spec_error(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text(_spec("t.bad", 5, 1, 1))
    with pytest.raises(SpecError, match="scale.max must be greater") as caught:
        load_spec_file(path)
    assert caught.value.line is not None and caught.value.file == str(path)
