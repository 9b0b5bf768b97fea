"""Decision endpoints as judges (issue 50): ``decisions:MODEL --mode decision`` against the loopback decision
server -- the protocol's request, the stored probabilities, injected faults through the one lifecycle -- and a
cascade whose first member is a decision endpoint, judged with ``judge --cascade``."""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scijudge import Item, Run, judge_items, load_judge
from scijudge.cli import app
from scijudge.errors import EndpointError
from scijudge.testing.decision_server import Decision, DecisionServer, input_text
from scijudge.testing.openai_server import Fault, Html, Reply, closed_port_url, last_user_text, level_logprobs

JUDGE = "yescieval.qa.correctness"
PAPERS = [{"title": "A study", "abstract": "It found things."}]


def _items(n: int, prefix: str = "i") -> list[Item]:
    return [Item(id=f"{prefix}{k}", question="Q?", papers=PAPERS, answer=f"ITEM={prefix}{k} text") for k in range(n)]


def _judge(url: str) -> object:
    return load_judge(JUDGE, model="decisions:decider", api_base=url, cache=False, mode="decision",
                      decision_score="mode")


@pytest.fixture
def server():
    started: list[DecisionServer] = []

    def start(handler) -> DecisionServer:
        srv = DecisionServer(handler).start()
        started.append(srv)
        return srv

    yield start
    for srv in started:
        srv.stop()


@pytest.mark.parametrize("executor", ["threads", "async"])
def test_a_decision_endpoint_judges_and_its_probabilities_are_stored(server, tmp_path: Path, executor: str) -> None:
    dist = {"1": 0.05, "2": 0.1, "3": 0.2, "4": 0.6, "5": 0.05}
    srv = server(lambda body: Decision(dist))
    with Run(tmp_path / "r.sqlite") as run:
        summary = judge_items(_items(3), [_judge(srv.url)], run, executor=executor)
        rows = run.to_pandas()
    assert summary.judged == 3 and len(srv.requests) == 3
    body = srv.requests[0]
    assert body["model"] == "decider" and body["questions"] == [{"type": "score", "name": "answer",
                                                                 "levels": ["1", "2", "3", "4", "5"]}]
    assert "ITEM=i" in input_text(body) and [m["role"] for m in body["input"]] == ["system", "user"]
    assert (rows["status"] == "ok").all() and (rows["score"] == 4.0).all()
    assert rows["model"].iloc[0] == "decisions:decider" and rows["endpoint"].iloc[0] == srv.url
    for probs in rows["probs"]:
        assert probs == pytest.approx(dist, abs=1e-12)


def test_faults_go_through_the_one_lifecycle(server, tmp_path: Path) -> None:
    tries: Counter[str] = Counter()

    def flaky(body: dict) -> object:
        item = re.search(r"ITEM=(\S+)", input_text(body)).group(1)
        tries[item] += 1
        if item == "i0" and tries[item] == 1:
            return Fault(429, "slow down", "rate_limit_error", headers={"Retry-After": "0"})
        if item == "i1" and tries[item] == 1:
            return Fault(503, "busy")
        if item == "i2":
            return Decision({}, refusal="the input breaks the usage policy")
        return Decision({"2": 0.3, "3": 0.7})

    srv = server(flaky)
    with Run(tmp_path / "r.sqlite") as run:
        judge_items(_items(4), [_judge(srv.url)], run)
        rows = run.to_pandas().set_index("item_id")
    assert rows.loc["i0", "status"] == rows.loc["i1", "status"] == rows.loc["i3", "status"] == "ok"  # retried
    assert tries["i0"] == 2 and tries["i1"] == 2
    assert rows.loc["i2", "status"] == "abstained" and "refused" in rows.loc["i2", "reason"]
    assert rows.loc["i3", "probs"] == pytest.approx({"1": 0, "2": 0.3, "3": 0.7, "4": 0, "5": 0})


@pytest.mark.parametrize("case", ["unauthorised", "html", "closed"])
def test_a_run_that_cannot_use_the_endpoint_stops_and_stores_no_failure(server, tmp_path: Path, case: str) -> None:
    srv = server(lambda body: Fault(401, "bad key", "authentication_error") if case == "unauthorised" else Html())
    url = closed_port_url() if case == "closed" else srv.url
    with Run(tmp_path / "r.sqlite") as run, pytest.raises(EndpointError):
        judge_items(_items(2), [_judge(url)], run)
    with Run(tmp_path / "r.sqlite", create=False) as run:
        assert list(run.rows(columns=["status"])) == []  # a run-level fault is never stored as a judgment


@pytest.mark.slow  # four CLI runs: a decision endpoint and a chat model on loopback servers
def test_judge_cascade_from_a_decision_endpoint_sends_the_next_member_only_the_untrusted(server, loopback,
                                                                                         marker_items, tmp_path: Path) -> None:
    seen: dict[str, Counter[str]] = {"decider": Counter(), "strong": Counter()}

    def decider(body: dict) -> Decision:
        text = input_text(body)
        item = re.search(r"ITEM=(\S+)", text).group(1)
        seen["decider"][item] += 1
        level, top = int(re.search(r"SCORE=(\d)", text).group(1)), (0.45 if "UNSURE" in text else 0.95)
        return Decision({str(k): (top if k == level else (1 - top) / 4) for k in range(1, 6)})

    def strong(body: dict) -> Reply:
        text = last_user_text(body)
        item = re.search(r"ITEM=(\S+)", text).group(1)
        seen["strong"][item] += 1
        level = int(re.search(r"SCORE=(\d)", text).group(1)) + (1 if "UNSURE" in text else 0)
        dist = {str(k): (0.9 if k == level else 0.025) for k in range(1, 6)}
        return Reply(str(level), finish_reason="length", completion_tokens=1, logprobs=level_logprobs(dist, lead=" "))

    dec, chat = server(decider), loopback(strong)
    env = {"OPENAI_API_KEY": "k", "COLUMNS": "200"}
    runner = CliRunner()


    cal_items = tmp_path / "cal.jsonl"
    ids = marker_items(cal_items, "c", 12, 12)
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps({"item_id": i, "judge": JUDGE, "annotator": "h",
                                          "score": 2 + k % 3 + (1 if i[1] == "u" else 0)}) + "\n"
                              for k, i in enumerate(ids)))
    cal = tmp_path / "cal.sqlite"
    for model, url in (("decisions:decider", dec.url), ("openai/strong", chat.url)):
        ran = runner.invoke(app, ["judge", str(cal_items), "-j", JUDGE, "-m", model, "--api-base", url, "--mode",
                                  "decision", "--decision-score", "mode", "--run", str(cal), "--no-progress",
                                  "--no-cache"], env=env)
        assert ran.exit_code == 0, ran.output
    thresholds = tmp_path / "thresholds.json"
    made = runner.invoke(app, ["cascade", str(cal), "-m", "decisions:decider", "-m", "openai/strong", "--labels",
                               str(labels), "--target", "0.8", "--risk", "0.2", "--no-calibrate", "--name", "d",
                               "--out", str(tmp_path / "c.sqlite"), "--save", str(thresholds)], env=env)
    assert made.exit_code == 0, made.output
    saved = json.loads(thresholds.read_text())
    # the whole path at risk 0.2 (n0 = 8): s = 0.95 keeps the decider's 12 sure items (all agree, p = 0.8**12 =
    # 0.069); s = 0.9 adds the strong model's 12 unsure ones, all agreeing: 24 of 24, p = 0.8**24 = 0.0047;
    # s = 0.45 would hand the unsure items to the decider (12 disagreeing): stop. -> decider >= 0.95, strong >= 0.9
    assert saved["members"][0]["model"] == "decisions:decider" and saved["members"][0]["mode"] == "decision"
    assert saved["members"][0]["thresholds"][JUDGE]["value"] == pytest.approx(0.95)
    assert saved["members"][1]["thresholds"][JUDGE]["value"] == pytest.approx(0.9)

    new_items = tmp_path / "new.jsonl"
    new_ids = marker_items(new_items, "n", 6, 4)
    for counter in seen.values():
        counter.clear()
    run = tmp_path / "run.sqlite"
    ran = runner.invoke(app, ["judge", str(new_items), "-j", JUDGE, "--cascade", str(thresholds), "--run", str(run),
                              "--no-progress", "--no-cache"], env=env)
    assert ran.exit_code == 0, ran.output
    assert set(seen["decider"]) == set(new_ids)
    assert set(seen["strong"]) == {i for i in new_ids if i.startswith("nu")}  # only the untrusted items
    frame = Run(run, create=False).to_pandas()
    assert Counter(frame["model"]) == {"decisions:decider": 10, "openai/strong": 4}
    stored = frame[frame["model"] == "decisions:decider"]["probs"].iloc[0]
    assert math.isclose(max(stored.values()), 0.95)


def test_refusals_are_one_line(server, tmp_path: Path) -> None:
    srv = server(lambda body: Decision({"3": 1.0}))
    items = tmp_path / "i.jsonl"
    items.write_text(json.dumps({"id": "a", "question": "Q?", "papers": PAPERS, "answer": "A."}) + "\n")
    base = ["judge", str(items), "-j", JUDGE, "-m", "decisions:decider", "--run", str(tmp_path / "r.sqlite"),
            "--no-progress"]
    for extra, message in ((["--mode", "decision"], "give its server's /v1 base URL with --api-base"),
                           (["--api-base", srv.url], "it only answers decision requests")):
        ran = CliRunner().invoke(app, [*base, *extra], env={"COLUMNS": "200"})
        assert ran.exit_code == 2 and message in ran.output, ran.output
        assert len([line for line in ran.output.splitlines() if line.strip()]) == 1, ran.output
    assert not srv.requests and not (tmp_path / "r.sqlite").exists()
