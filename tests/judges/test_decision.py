"""Decision mode through the chain (an OpenAI-compatible loopback server returning logprobs), the store,
calibrate and estimate; refusals and errors."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pandas as pd
import pytest

from scijudge import Item, Run, judge_items, load_judge
from scijudge.errors import EndpointError, InputError
from scijudge.chain.decision import level_distribution
from scijudge.testing.openai_server import last_user_text, level_logprobs

PAPERS = [{"title": "A study", "abstract": "It found things."}]
ITEMS = [Item(id=f"m{i}", question="Q?", papers=PAPERS, answer=f"SCORE={1 + i % 5}") for i in range(40)]


def _dist(marker: int) -> dict[str, float]:
    """A distribution peaked at the item's marker (the server's stand-in for a model)."""
    weights = {str(k): math.exp(-abs(k - marker)) for k in range(1, 6)}
    total = sum(weights.values()) / 0.9  # the levels hold 90% of the mass; the rest is elsewhere
    return {k: w / total for k, w in weights.items()}


def _handler(body: dict) -> object:
    from scijudge.testing.openai_server import Reply

    marker = int(re.search(r"SCORE=(\d)", last_user_text(body)).group(1))
    if body.get("logprobs"):  # a decision request: the rating only, with its top alternatives
        return Reply(str(marker), finish_reason="length", completion_tokens=1,
                     logprobs=level_logprobs(_dist(marker), lead=" "))
    return json.dumps({"judgment": {"rationale": "marker", "rating": marker}})


def test_decision_request_reads_the_distribution_at_the_rating_token(loopback, tmp_path: Path) -> None:
    server = loopback(_handler)
    judge = load_judge("yescieval.qa.correctness", model="openai/judge", api_base=server.url, cache=False,
                       mode="decision")
    result = judge.judge_one(ITEMS[3])  # marker 4
    body = server.requests[-1]
    assert body["logprobs"] is True and body["top_logprobs"] == 20 and "response_format" not in body
    assert (body.get("max_completion_tokens") or body.get("max_tokens")) == 3
    assert "rating only" in last_user_text(body)
    want = _dist(4)
    total = sum(want.values())
    assert result.status == "ok" and result.rationale is None
    assert result.probs == pytest.approx({k: v / total for k, v in want.items()}, abs=1e-12)
    assert result.score == pytest.approx(sum(int(k) * v / total for k, v in want.items()), abs=1e-10)
    assert result.result["coverage"] == pytest.approx(0.9, abs=1e-9)
    assert json.loads(result.decoding)["mode"] == "decision"
    assert [a.reply for a in result.attempts] == ["4"]  # the reply as sent, kept on its attempt


def test_a_provider_without_logprobs_stops_the_run_naming_the_model(loopback, tmp_path: Path) -> None:
    server = loopback(lambda body: "4")
    judge = load_judge("yescieval.qa.correctness", model="openai/nologprobs", api_base=server.url, cache=False,
                       mode="decision")
    with Run(tmp_path / "r.sqlite") as run, pytest.raises(EndpointError, match="openai/nologprobs.*no token logprobs"):
        judge_items(ITEMS[:3], [judge], run=run, concurrency=1)
    with Run(tmp_path / "r.sqlite") as run:
        assert len(run.to_pandas()) == 0  # nothing stored as final


def test_materials_judges_and_unknown_modes_are_refused_in_one_line() -> None:
    with pytest.raises(InputError, match="lematerial.synthesis.*cannot be decided"):
        load_judge("lematerial.synthesis", mode="decision")
    with pytest.raises(InputError, match="unknown mode"):
        load_judge("yescieval.qa.correctness", mode="guess")


def test_label_distribution_by_first_token_and_chained_digits() -> None:
    labels = ["satisfied", "partially", "not_satisfied"]
    content = [{"token": "sat", "logprob": math.log(0.5),
                "top_logprobs": [{"token": "sat", "logprob": math.log(0.5)}, {"token": "not", "logprob": math.log(0.3)},
                                 {"token": " part", "logprob": math.log(0.1)}, {"token": "Hello", "logprob": -5}]}]
    dist, coverage = level_distribution(content, labels)
    assert dist == pytest.approx({"satisfied": 5 / 9, "partially": 1 / 9, "not_satisfied": 3 / 9})
    assert coverage == pytest.approx(0.9)
    # "1" then "0" with split digits: P(10) = P("1") * P("0" | "1"), P(1) = P("1") * P(end | "1") (hand-computed)
    digits = [{"token": "1", "logprob": math.log(0.6),
               "top_logprobs": [{"token": "1", "logprob": math.log(0.6)}, {"token": "9", "logprob": math.log(0.4)}]},
              {"token": "0", "logprob": math.log(0.75),
               "top_logprobs": [{"token": "0", "logprob": math.log(0.75)}, {"token": "<eos>", "logprob": math.log(0.25)}]}]
    dist, _ = level_distribution(digits, [str(k) for k in range(1, 11)])
    assert dist["10"] == pytest.approx(0.45) and dist["1"] == pytest.approx(0.15) and dist["9"] == pytest.approx(0.4)


@pytest.mark.slow
def test_decision_and_generated_runs_side_by_side_in_calibrate_and_estimate(loopback, tmp_path: Path) -> None:
    from scijudge import calibrate, estimate

    server = loopback(_handler)
    options = dict(model="openai/judge", api_base=server.url, cache=False)
    runs = {}
    for name, mode in (("generated", "generate"), ("decision", "decision")):
        judge = load_judge("yescieval.qa.correctness", mode=mode, decision_score="mode", **options)
        with Run(tmp_path / f"{name}.sqlite") as run:
            judge_items(ITEMS, [judge], run=run, concurrency=4)
            frame = run.to_pandas()
        frame["source"] = name
        runs[name] = frame
    both = pd.concat(list(runs.values()), ignore_index=True)
    human = [1 + (i + (i % 3 == 0)) % 5 for i in range(len(ITEMS))]  # mostly the marker, sometimes one off
    labels = pd.DataFrame({"item_id": [i.id for i in ITEMS], "judge": "yescieval.qa.correctness", "part": "",
                           "score": human, "annotator": "a1"})
    result = calibrate(both, labels, n_boot=50)
    rows = result.per_rubric.set_index("contender")
    assert set(rows.index) == {"openai/judge @decision", "openai/judge @generated"}
    assert math.isfinite(rows.loc["openai/judge @decision", "ece"])  # from the stored distributions
    assert not math.isfinite(rows.loc["openai/judge @generated", "ece"])  # a generated run has none
    paired = result.paired
    assert {"openai/judge @decision", "openai/judge @generated"} == set(paired["a"]) | set(paired["b"])
    assert (paired["n"] == len(ITEMS)).all()  # side by side on the same items
    from scijudge.estimation.intervals import conformal

    _, coverage = conformal(runs["decision"], labels, alpha=0.2)
    assert set(coverage["nonconformity"]) == {"probs"}  # conformal sets from the stored probabilities
    est = estimate(both, labels)
    assert set(est["group"]) == {"decision", "generated"} and est["estimate"].notna().all()


def test_cli_mode_decision_stores_distributions_and_refuses_materials(loopback, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from scijudge.cli import app

    server = loopback(_handler)
    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps(i.model_dump(exclude_defaults=True)) + "\n" for i in ITEMS[:5]))
    base = ["judge", str(items), "-m", "openai/judge", "--api-base", server.url, "--no-progress", "--no-cache"]
    env = {"OPENAI_API_KEY": "k", "COLUMNS": "200"}
    runner = CliRunner()
    ran = runner.invoke(app, [*base, "-j", "yescieval.qa.correctness", "--run", str(tmp_path / "d.sqlite"),
                              "--mode", "decision", "--decision-score", "mode"], env=env)
    assert ran.exit_code == 0, ran.output
    frame = Run(tmp_path / "d.sqlite", create=False).to_pandas()
    assert len(frame) == 5 and frame["probs"].map(lambda p: set(p) == set("12345")).all()
    assert list(frame.sort_values("item_id")["score"]) == [1.0, 2.0, 3.0, 4.0, 5.0]  # the most likely level
    assert frame["rationale"].isna().all()
    refused = runner.invoke(app, [*base, "-j", "lematerial.synthesis", "--run", str(tmp_path / "m.sqlite"),
                                  "--mode", "decision"], env=env)
    assert refused.exit_code == 2 and "cannot be decided" in refused.output
    assert len([line for line in refused.output.splitlines() if line.strip()]) == 1


def test_pairwise_decision_rates_both_answers_and_reports_in_the_items_terms(loopback) -> None:
    from scijudge.testing.openai_server import Reply

    peaks = {"GOOD": 4, "POOR": 2}

    def handler(body: dict) -> object:
        text = last_user_text(body)
        which = "A" if "rating of answer A" in text else "B"
        a_text, b_text = re.findall(r"(GOOD|POOR)", text)[:2]  # answer A comes first in the prompt
        marker = peaks[a_text if which == "A" else b_text]
        return Reply(str(marker), finish_reason="length", logprobs=level_logprobs(_dist(marker)))

    server = loopback(handler)
    judge = load_judge("yescieval.qa.coherence.pairwise", model="openai/judge", api_base=server.url, cache=False,
                       mode="decision")
    item = Item(id="p1", question="Q?", papers=PAPERS, answer="GOOD answer", answer_b="POOR answer")
    ab, ba = (judge.judge_one(item, part) for part in ("AB", "BA"))
    dist4, dist2 = _dist(4), _dist(2)
    e4 = sum(int(k) * v for k, v in dist4.items()) / sum(dist4.values())
    e2 = sum(int(k) * v for k, v in dist2.items()) / sum(dist2.values())
    assert ab.score == pytest.approx(e4 - e2, abs=1e-10) and ab.verdict == "A"
    assert ba.score == pytest.approx(e4 - e2, abs=1e-10) and ba.verdict == "A"  # told in the item's own terms
    assert sum(ab.probs.values()) == pytest.approx(1.0) and set(ab.probs) == {str(d) for d in range(-4, 5)}
    assert ab.probs == pytest.approx(ba.probs)


def test_batch_and_fused_runs_refuse_decision_mode() -> None:
    from scijudge.errors import ModelError
    from scijudge.judges.build import judges_for_run
    from scijudge.judges.options import JudgeOptions
    from scijudge.run.batch.executor import check_batchable
    from scijudge.spec.judge_spec import get_spec

    judge = load_judge("yescieval.qa.correctness", model="openai/judge", mode="decision")
    with pytest.raises(ModelError, match="decision"):
        check_batchable([judge])
    with pytest.raises(ModelError, match="decision"):
        judges_for_run([get_spec("yescieval.qa.correctness")], JudgeOptions(model="openai/judge", mode="decision"),
                       executor="batch")
    specs = [get_spec("yescieval.qa.correctness"), get_spec("yescieval.qa.coherence")]
    with pytest.raises(InputError, match="fused"):
        judges_for_run(specs, JudgeOptions(model="openai/judge", fused=True, mode="decision"))


def test_an_interrupted_decision_run_keeps_what_it_got_and_resumes(loopback, tmp_path: Path) -> None:
    import threading

    server = loopback(_handler)
    judge = load_judge("yescieval.qa.correctness", model="openai/judge", api_base=server.url, cache=False,
                       mode="decision")
    stop = threading.Event()

    def after(result, summary) -> None:
        if summary.judged >= 3:
            stop.set()  # as Ctrl-C does

    with Run(tmp_path / "r.sqlite") as run:
        first = judge_items(ITEMS[:10], [judge], run=run, concurrency=1, stop=stop, on_result=after, grace=5)
        stored = len(run.to_pandas())
    assert first.interrupted and 3 <= stored < 10
    with Run(tmp_path / "r.sqlite") as run:
        again = judge_items(ITEMS[:10], [judge], run=run, concurrency=2)
        frame = run.to_pandas()
    assert again.skipped_done == stored and again.judged == 10 - stored and len(frame) == 10
    assert server.count == 10  # no judgment asked twice


def test_equal_distributions_read_from_logprobs_are_equal_to_the_last_bit() -> None:
    # the same alternatives in another order, and the same mass split over other tokens ("3" + " 3" against one
    # "3"): mathematically equal probabilities must compare equal (a cascade tests equal confidences together)
    from scijudge.chain.decision import level_distribution

    def position(alternatives: list[tuple[str, float]]) -> list[dict]:
        return [{"token": alternatives[0][0], "logprob": alternatives[0][1],
                 "top_logprobs": [{"token": t, "logprob": lp} for t, lp in alternatives]}]

    lp = [math.log(p) for p in (0.15, 0.1, 0.05, 0.2, 0.15)]
    first = [("3", lp[0]), (" 3", lp[1]), ('"3', lp[2]), ("4", lp[3]), ("2", lp[4])]
    reordered = [first[0], first[2], first[1], first[3], first[4]]
    levels = ["1", "2", "3", "4", "5"]
    a, _ = level_distribution(position(first), levels)
    b, _ = level_distribution(position(reordered), levels)
    assert a == b  # summed in the order the tokens came in, 0.46153846153846156 against 0.4615384615384615
    merged, _ = level_distribution(position([("3", math.log(0.3)), ("4", lp[3]), ("2", lp[4])]), levels)
    assert merged["3"] == a["3"] == pytest.approx(0.3 / 0.65)
