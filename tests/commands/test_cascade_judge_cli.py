"""`scijudge cascade --save` then `scijudge judge --cascade` against two loopback models: the second model is sent
only the items the first did not trust (counted at the servers), and a re-run sends nothing."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scijudge import Run
from scijudge.cli import app
from scijudge.testing.openai_server import Reply, last_user_text, level_logprobs

JUDGE = "yescieval.qa.correctness"


def _server(loopback, strong: bool):
    """A decision-mode model: the cheap one puts 0.95 on the marker of SURE items and 0.45 on the marker of
    UNSURE ones (where the humans say marker + 1); the strong one puts 0.9 on the humans' level everywhere."""
    seen: Counter[str] = Counter()

    def handler(body: dict) -> object:
        text = last_user_text(body)
        item = re.search(r"ITEM=(\S+)", text).group(1)
        seen[item] += 1
        marker = int(re.search(r"SCORE=(\d)", text).group(1))
        unsure = "UNSURE" in text
        level = marker + 1 if unsure and strong else marker
        top = 0.9 if strong else (0.45 if unsure else 0.95)
        rest = (1 - top) / 4
        dist = {str(k): (top if k == level else rest) for k in range(1, 6)}
        return Reply(str(level), finish_reason="length", completion_tokens=1, logprobs=level_logprobs(dist, lead=" "))

    return loopback(handler), seen


@pytest.mark.slow  # four CLI runs through two loopback servers: a few seconds
def test_judge_cascade_sends_the_strong_model_only_the_untrusted_items_and_resumes(loopback, marker_items,
                                                                                  tmp_path: Path) -> None:
    cheap, cheap_seen = _server(loopback, strong=False)
    strong, strong_seen = _server(loopback, strong=True)
    env = {"OPENAI_API_KEY": "k", "COLUMNS": "200"}
    runner = CliRunner()
    cal_items = tmp_path / "cal.jsonl"
    ids = marker_items(cal_items, "c", 12, 12)
    labels = tmp_path / "labels.jsonl"
    with labels.open("w") as out:
        for k, item in enumerate(ids):
            marker = 2 + k % 3
            out.write(json.dumps({"item_id": item, "judge": JUDGE, "annotator": "h",
                                  "score": marker + (1 if "u" in item[1] else 0)}) + "\n")
    cal = tmp_path / "cal.sqlite"
    for model, server in (("openai/cheap", cheap), ("openai/strong", strong)):
        ran = runner.invoke(app, ["judge", str(cal_items), "-j", JUDGE, "-m", model, "--api-base", server.url,
                                  "--mode", "decision", "--decision-score", "mode", "--run", str(cal), "--no-progress",
                                  "--no-cache"], env=env)
        assert ran.exit_code == 0, ran.output
    thresholds = tmp_path / "thresholds.json"
    made = runner.invoke(app, ["cascade", str(cal), "-m", "openai/cheap", "-m", "openai/strong", "--labels",
                               str(labels), "--target", "0.8", "--risk", "0.2", "--split", "bonferroni",
                               "--no-calibrate", "--name", "c", "--out",
                               str(tmp_path / "c.sqlite"), "--save", str(thresholds), "--escalated",
                               str(tmp_path / "picks.csv")], env=env)
    assert made.exit_code == 0, made.output
    saved = json.loads(thresholds.read_text())
    cheap_t = saved["members"][0]["thresholds"][JUDGE]
    strong_t = saved["members"][1]["thresholds"][JUDGE]
    # risk 0.2 over 2 members: each tested at 0.1. The cheap model's 12 sure items all agree (p = 0.8**12 = 0.069
    # <= 0.1); one unsure item more gives P(Bin(13, 0.8) >= 12) = 0.8**13 + 13 * 0.2 * 0.8**12 = 0.234 > 0.1: it
    # keeps exactly its sure group. The strong one sees the 12 unsure items, all agreeing: p = 0.069 again.
    assert cheap_t["value"] == pytest.approx(0.95) and cheap_t["tie"] == 0.0
    assert strong_t["value"] == pytest.approx(0.9) and strong_t["tie"] == 0.0
    assert saved["members"][0]["mode"] == "decision" and saved["members"][0]["endpoint"] == cheap.url
    assert "coverage: openai/cheap 50.0%, openai/strong 50.0%" in " ".join(made.output.split())

    new_items = tmp_path / "new.jsonl"
    new_ids = marker_items(new_items, "n", 6, 4)
    cheap_seen.clear()
    strong_seen.clear()
    run = tmp_path / "run.sqlite"
    args = ["judge", str(new_items), "-j", JUDGE, "--cascade", str(thresholds), "--run", str(run), "--no-progress",
            "--no-cache"]
    ran = runner.invoke(app, args, env=env)
    assert ran.exit_code == 0, ran.output
    assert set(cheap_seen) == set(new_ids) and all(n == 1 for n in cheap_seen.values())
    assert set(strong_seen) == {i for i in new_ids if i.startswith("nu")}  # only what the cheap one did not trust
    frame = Run(run, create=False).to_pandas()
    assert Counter(frame["model"]) == {"openai/cheap": 10, "openai/strong": 4}

    cheap_seen.clear()
    strong_seen.clear()
    again = runner.invoke(app, args, env=env)
    assert again.exit_code == 0, again.output
    assert not cheap_seen and not strong_seen  # resumed: everything was stored


def test_judge_cascade_refuses_model_options_and_a_bad_file_in_one_line(marker_items, tmp_path: Path) -> None:
    items = tmp_path / "i.jsonl"
    marker_items(items, "x", 1, 0)
    bad = tmp_path / "t.json"
    bad.write_text('{"format": "other"}')
    runner = CliRunner()
    for extra in (["-m", "openai/x"], []):
        out = runner.invoke(app, ["judge", str(items), "-j", JUDGE, "--cascade", str(bad), "--run",
                                  str(tmp_path / "r.sqlite"), *extra], env={"COLUMNS": "200"})
        assert out.exit_code == 2
        assert len([line for line in out.output.splitlines() if line.strip()]) == 1, out.output
    assert not (tmp_path / "r.sqlite").exists()


def test_judge_cascade_refuses_a_judge_the_cascade_has_no_threshold_for(marker_items, tmp_path: Path) -> None:
    items = tmp_path / "i.jsonl"
    marker_items(items, "x", 1, 0)
    plan = tmp_path / "t.json"
    plan.write_text(json.dumps({"format": "scijudge-cascade/1", "seed": 0, "members": [
        {"member": "openai/a", "model": "openai/a", "endpoint": "http://127.0.0.1:9/v1", "mode": "decision",
         "thresholds": {"yescieval.qa.coherence": {"value": 0.9, "tie": 0.0}, JUDGE: None}}]}))
    out = CliRunner().invoke(app, ["judge", str(items), "-j", JUDGE, "--cascade", str(plan), "--run",
                                   str(tmp_path / "r.sqlite")], env={"COLUMNS": "200", "OPENAI_API_KEY": "k"})
    assert out.exit_code == 2 and f"no member of the cascade has a threshold for judge {JUDGE!r}" in out.output
    assert len([line for line in out.output.splitlines() if line.strip()]) == 1, out.output
