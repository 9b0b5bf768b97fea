"""Done-when: through the CLI, a tiny random base learns a cue-fixed synthetic rubric from 240 labelled items
(held-out exact agreement base <= 0.4 -> student >= 0.9), then judges and calibrates as an hf: model."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

pytest.importorskip("torch")
pytest.importorskip("peft")

from conftest import write_world  # noqa: E402

from scijudge.distill._data import decision_mode_available  # noqa: E402

ALL = "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj,lm_head"


def _cli(args, cwd, timeout=1100):
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "true", "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "scijudge", *args], cwd=cwd, env=env, text=True,
                          capture_output=True, timeout=timeout)


def _agreement(store, labels):
    """Exact agreement of a run store's scores with the labels, computed here with sqlite3 + plain Python."""
    truth = {row["item_id"]: row["score"] for row in labels}
    with sqlite3.connect(store) as db:
        rows = db.execute("SELECT item_id, score, status FROM judgments WHERE current = 1").fetchall()
    assert rows
    return sum(1 for item, score, status in rows if status == "ok" and score == truth[item]) / len(rows), len(rows)


@pytest.mark.skipif(not decision_mode_available(), reason="the student is judged in decision mode (issue 25)")
@pytest.mark.timeout(1200)  # ~3 min at load 8 on 2 shared cores; the issue allows 10 minutes
def test_distill_cli_learns_the_rubric_and_the_student_judges_and_calibrates(tmp_path, tiny_base):
    w = write_world(tmp_path / "w", n=240)
    out = tmp_path / "student"
    done = _cli(["distill", "--judge", str(w["spec"]), "--items", str(w["items"]), "--labels", str(w["labels"]),
                 "--base", f"hf:{tiny_base}", "--out", str(out), "--threads", "1", "--epochs", "6",
                 "--targets", ALL, "--n-boot", "200", "--no-progress"], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    labels = [json.loads(line) for line in w["labels"].read_text().splitlines()]

    student, n = _agreement(out / "evaluation" / "student.sqlite", labels)
    base, n_base = _agreement(out / "evaluation" / "base.sqlite", labels)
    assert n == n_base >= 50
    assert base <= 0.4 and student >= 0.9, (base, student)

    card = json.loads((out / "card.json").read_text())
    assert {"data_hash", "split", "base", "steps", "loss_curve", "versions", "evaluation"} <= set(card)
    assert card["steps"] == len(card["loss_curve"]) and card["loss_curve"][-1] < card["loss_curve"][0]
    assert card["split"]["held_out"] == n and card["base"]["weights_sha256"]
    assert card["evaluation"]["exact_agreement"]["student"]["value"] == pytest.approx(student)
    paired = (out / "evaluation" / "paired.csv").read_text()
    assert f"hf:{out.resolve()}" in paired and f"hf:{tiny_base}" in paired
    assert (out / "README.md").is_file() and (out / "adapter_config.json").is_file()

    # the student as an hf: model: judge the held-out items and calibrate them
    held = {row[0] for row in sqlite3.connect(out / "evaluation" / "student.sqlite").execute(
        "SELECT item_id FROM judgments")}
    items = tmp_path / "held.jsonl"
    items.write_text("".join(line + "\n" for line in w["items"].read_text().splitlines()
                             if json.loads(line)["id"] in held))
    mode = ["--mode", "decision", "--decision-score", "mode"] if decision_mode_available() else []
    run = tmp_path / "again.sqlite"
    judged = _cli(["judge", str(items), "--judge", str(w["spec"]), "-m", f"hf:{out}", "--run", str(run), *mode],
                  tmp_path)
    assert judged.returncode == 0, judged.stdout + judged.stderr
    if mode:
        assert _agreement(run, labels)[0] == pytest.approx(student)
    calibrated = _cli(["calibrate", "--labels", str(w["labels"]), "--run", str(run), "--out", str(tmp_path / "cal"),
                       "--allow-extra-labels", "--n-boot", "100", "--spec", str(w["spec"])], tmp_path)
    assert calibrated.returncode == 0, calibrated.stdout + calibrated.stderr
    report = json.loads((tmp_path / "cal" / "report.json").read_text())
    assert report["per_rubric"] if isinstance(report, dict) and "per_rubric" in report else report


@pytest.mark.skipif(not decision_mode_available(), reason="needs decision mode (issue 25)")
def test_the_student_is_judged_on_the_prompt_it_was_trained_on(tmp_path, tiny_base):
    """The engine's decision probabilities for the trained student equal a plain transformers + peft forward on
    the training prompt (so training and judging see the same tokens)."""
    import peft
    import torch
    import transformers

    import scijudge
    from scijudge.data import load_items
    from scijudge.distill._data import encode, judge_messages, render
    from scijudge.judges import load_judge

    w = write_world(tmp_path / "w", n=30)
    out = tmp_path / "s"
    scijudge.distill(str(w["spec"]), w["items"], labels=w["labels"], base=f"hf:{tiny_base}", out=out, epochs=1,
                     threads=1, evaluate=False, lr=2e-2)
    items, _ = load_items(w["items"])
    judge = load_judge(str(w["spec"]), model=f"hf:{out}", mode="decision")
    got = [judge.judge_one(item).probs for item in items[:3]]
    tok = transformers.AutoTokenizer.from_pretrained(str(tiny_base))
    model = peft.PeftModel.from_pretrained(transformers.AutoModelForCausalLM.from_pretrained(str(tiny_base)),
                                           str(out)).eval()
    levels = [tok.convert_tokens_to_ids(str(v)) for v in range(1, 6)]
    for item, probs in zip(items[:3], got):
        ids = encode(tok, render(tok, judge_messages(judge, item, ["1", "2", "3", "4", "5"], decision=True)))
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([ids])).logits[0, -1]
        want = torch.softmax(logits[levels].double(), -1).tolist()
        assert [probs[str(v)] for v in range(1, 6)] == pytest.approx(want, abs=1e-5)


def test_bad_input_is_one_line_and_exit_code_2(tmp_path):
    from scijudge.testing.cli import run_commands

    w = write_world(tmp_path / "w", n=20)
    common = ["distill", "--judge", str(w["spec"]), "--items", str(w["items"]), "--labels", str(w["labels"]),
              "--out", str(tmp_path / "o"), "--no-progress"]
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "true", "COLUMNS": "200"}
    no_base, bad_rank = run_commands([[*common, "--base", f"hf:{tmp_path / 'nowhere'}"],
                                      [*common, "--base", f"hf:{tmp_path}", "--lora-r", "0"]], tmp_path, env)
    for done, words in ((no_base, "nowhere"), (bad_rank, "--lora-r")):
        text = (done.stdout + done.stderr).strip()
        assert done.returncode == 2 and "Traceback" not in text, text
        assert len(text.splitlines()) == 1 and words in text
