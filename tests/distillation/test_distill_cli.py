"""Done-when (issue 38): through the CLI, with default settings, a tiny random base that scijudge did not build learns
a rubric keyed by one word appearing once (held-out exact agreement base <= 0.4 -> student >= 0.9); the card shows
the loss at the start and the end; a student that learns nothing exits 1 in one line unless --allow-no-gain. The
trained student is shared by the tests of this module (one distillation)."""

from __future__ import annotations

import json
import os
import random
import sqlite3
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

pytest.importorskip("torch")
pytest.importorskip("peft")

from conftest import write_foreign_world, write_world  # noqa: E402

from scijudge.distillation._data import decision_mode_available  # noqa: E402

needs_decision = pytest.mark.skipif(not decision_mode_available(), reason="the student is judged in decision mode")


def _cli(args, cwd, timeout=600):
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "true", "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "scijudge", *args], cwd=cwd, env=env, text=True,
                          capture_output=True, timeout=timeout)


def _labels(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def _agreement(store, labels):
    """Exact agreement of a run store's scores with the labels, computed here with sqlite3 + plain Python."""
    truth = {row["item_id"]: row["score"] for row in labels}
    with sqlite3.connect(store) as db:
        rows = db.execute("SELECT item_id, score, status FROM judgments WHERE current = 1").fetchall()
    assert rows
    return sum(1 for item, score, status in rows if status == "ok" and score == truth[item]) / len(rows), len(rows)


def _side_by_side(commands, cwd, timeout=900):
    """Run CLI commands at once (their start-up and imports overlap); CompletedProcess results in order."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "true", "COLUMNS": "200"}
    running = [subprocess.Popen([sys.executable, "-m", "scijudge", *args], cwd=cwd, env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE) for args in commands]
    done = []
    for args, process in zip(commands, running):
        stdout, stderr = process.communicate(timeout=timeout)
        done.append(subprocess.CompletedProcess(args, process.returncode, stdout, stderr))
    return done


def _distill_args(w, base, out, epochs):
    return ["distill", "--judge", str(w["spec"]), "--items", str(w["items"]), "--labels", str(w["labels"]),
            "--base", f"hf:{base}", "--out", str(out), "--threads", "1", "--epochs", str(epochs), "--n-boot", "200",
            "--no-progress"]


@pytest.fixture(scope="module")
def distilled(tmp_path_factory, foreign_base):
    """Two default `scijudge distill` runs side by side on the foreign base: the single-word rubric (150 reviews, two
    epochs), and the same reviews with their labels shuffled away from the text (40 reviews, one epoch)."""
    root = tmp_path_factory.mktemp("distilled")
    w = write_foreign_world(root / "w", n=150)
    noise = write_foreign_world(root / "noise", n=40)
    labels = _labels(noise["labels"])
    scores = [row["score"] for row in labels]
    random.Random(5).shuffle(scores)
    noise["labels"].write_text("".join(json.dumps({**row, "score": s}) + "\n" for row, s in zip(labels, scores)))
    done, flat = _side_by_side([_distill_args(w, foreign_base, root / "student", 2),
                                _distill_args(noise, foreign_base, root / "noise-student", 1)], root)
    return {"root": root, "world": w, "out": root / "student", "done": done, "base": foreign_base,
            "noise": noise, "noise_out": root / "noise-student", "noise_done": flat}


@needs_decision
@pytest.mark.timeout(900)
def test_the_default_recipe_learns_a_single_word_rubric_on_a_base_it_was_not_tuned_on(distilled):
    done, out, w = distilled["done"], distilled["out"], distilled["world"]
    assert done.returncode == 0, done.stdout + done.stderr
    labels = _labels(w["labels"])
    student, n = _agreement(out / "evaluation" / "student.sqlite", labels)
    base, n_base = _agreement(out / "evaluation" / "base.sqlite", labels)
    assert n == n_base >= 30
    assert base <= 0.4 and student >= 0.9, (base, student)

    card = json.loads((out / "card.json").read_text())
    assert {"data_hash", "split", "base", "steps", "loss", "loss_curve", "trained", "recipe", "versions",
            "evaluation", "flags"} <= set(card)
    assert card["steps"] == len(card["loss_curve"]) and card["flags"] == []
    loss = card["loss"]
    assert loss["end"] < 0.5 * loss["start"] and loss["fell"] and 1 <= len(loss["smoothed"]) <= 10
    assert loss["start"] == pytest.approx(card["recipe"]["loss_before"])
    rows = card["trained"]["output_layer_rows"]  # the card names what was trained: the level rows and the LoRA
    assert rows["layer"] == "lm_head" and len(rows["token_ids"]) == 5 and card["trained"]["lora_parameters"] > 0
    assert card["split"]["held_out"] == n and card["base"]["weights_sha256"]
    assert card["evaluation"]["exact_agreement"]["student"]["value"] == pytest.approx(student)
    gain = card["evaluation"]["gain"]
    assert gain["diff"] == pytest.approx(student - base) and gain["ci"][0] > 0
    readme = (out / "README.md").read_text()
    assert "training loss:" in readme and "lm_head" in readme
    assert "training loss:" in done.stdout and "student minus base" in done.stdout
    paired = (out / "evaluation" / "paired.csv").read_text()
    assert f"hf:{out.resolve()}" in paired and f"hf:{distilled['base']}" in paired


@needs_decision
@pytest.mark.timeout(900)
def test_the_student_judges_and_calibrates_as_an_hf_model(distilled):
    out, w, root = distilled["out"], distilled["world"], distilled["root"]
    assert distilled["done"].returncode == 0, distilled["done"].stdout + distilled["done"].stderr
    held = {row[0] for row in sqlite3.connect(out / "evaluation" / "student.sqlite").execute(
        "SELECT item_id FROM judgments")}
    items = root / "held.jsonl"
    items.write_text("".join(line + "\n" for line in w["items"].read_text().splitlines()
                             if json.loads(line)["id"] in held))
    run = root / "again.sqlite"
    judged = _cli(["judge", str(items), "--judge", str(w["spec"]), "-m", f"hf:{out}", "--run", str(run),
                   "--mode", "decision", "--decision-score", "mode"], root)
    assert judged.returncode == 0, judged.stdout + judged.stderr
    labels = _labels(w["labels"])
    assert _agreement(run, labels)[0] == pytest.approx(_agreement(out / "evaluation" / "student.sqlite", labels)[0])
    calibrated = _cli(["calibrate", "--labels", str(w["labels"]), "--run", str(run), "--out", str(root / "cal"),
                       "--allow-extra-labels", "--n-boot", "100", "--spec", str(w["spec"])], root)
    assert calibrated.returncode == 0, calibrated.stdout + calibrated.stderr
    report = json.loads((root / "cal" / "report.json").read_text())
    assert report["per_rubric"]


@needs_decision
def test_the_student_is_judged_on_the_prompt_it_was_trained_on(distilled):
    """The engine's decision probabilities for the trained student equal a plain transformers + peft forward on
    the training prompt (so training and judging see the same tokens, level rows included)."""
    import peft
    import torch
    import transformers

    from scijudge.data import load_items
    from scijudge.distillation._data import encode, judge_messages, level_token_ids, render
    from scijudge.judges import load_judge

    assert distilled["done"].returncode == 0
    out, w, base = distilled["out"], distilled["world"], distilled["base"]
    items, _ = load_items(w["items"])
    judge = load_judge(str(w["spec"]), model=f"hf:{out}", mode="decision")
    got = [judge.judge_one(item).probs for item in items[:3]]
    tok = transformers.AutoTokenizer.from_pretrained(str(base))
    model = peft.PeftModel.from_pretrained(transformers.AutoModelForCausalLM.from_pretrained(str(base)),
                                           str(out)).eval()
    levels = ["1", "2", "3", "4", "5"]
    for item, probs in zip(items[:3], got):
        prompt = render(tok, judge_messages(judge, item, levels, decision=True))
        ids, level_ids = encode(tok, prompt), level_token_ids(tok, prompt, levels)
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([ids])).logits[0, -1]
        want = torch.softmax(logits[level_ids].double(), -1).tolist()
        # float32: the engine serves merged LoRA weights, this forward adds them unmerged; the two round apart by
        # up to ~1.5e-5 in a probability (seen on one CPU build), where a different prompt moves it by > 1e-2
        assert [probs[v] for v in levels] == pytest.approx(want, abs=1e-4)


@needs_decision
@pytest.mark.timeout(900)
def test_a_student_that_learns_nothing_exits_1_in_one_line_unless_allow_no_gain(distilled):
    """Labels shuffled away from the text: the student cannot beat its base on the held-out split."""
    done, out, root = distilled["noise_done"], distilled["noise_out"], distilled["root"]
    assert done.returncode == 1, done.stdout + done.stderr
    flagged = [line for line in (done.stdout + done.stderr).splitlines() if line.startswith("did not learn:")]
    assert len(flagged) == 1 and "better than its base" in flagged[0], done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    card = json.loads((out / "card.json").read_text())
    assert card["flags"] and "better than its base" in card["flags"][0]
    assert "Did not learn" in (out / "README.md").read_text()
    args = [*_distill_args(distilled["noise"], distilled["base"], out, 1), "--allow-no-gain"]
    again = _cli(args, root)  # resumes the finished run: no training, no new judgment, exit 0
    assert again.returncode == 0 and "did not learn:" in again.stdout + again.stderr, again.stdout + again.stderr


def test_bad_input_is_one_line_and_exit_code_2(tmp_path):
    from scijudge.testing.cli import run_commands

    w = write_world(tmp_path / "w", n=20)
    common = ["distill", "--judge", str(w["spec"]), "--items", str(w["items"]), "--labels", str(w["labels"]),
              "--out", str(tmp_path / "o"), "--no-progress"]
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "true", "COLUMNS": "200"}
    no_base, bad_rank, api_base = run_commands([[*common, "--base", f"hf:{tmp_path / 'nowhere'}"],
                                                [*common, "--base", f"hf:{tmp_path}", "--lora-r", "0"],
                                                [*common, "--base", "openai/gpt-4o-mini"]], tmp_path, env)
    for done, words in ((no_base, "nowhere"), (bad_rank, "--lora-r"), (api_base, "API model")):
        text = (done.stdout + done.stderr).strip()
        assert done.returncode == 2 and "Traceback" not in text, text
        assert len(text.splitlines()) == 1 and words in text
    assert "huggingface-cli" not in api_base.stdout + api_base.stderr


def test_missing_labels_and_a_wrong_base_are_refused_before_torch_is_imported(tmp_path):
    """Issue 35: arguments and inputs are checked before the model (or torch) is loaded."""
    w = write_world(tmp_path / "w", n=20)
    script = f"""
import sys
import scijudge
from scijudge.errors import InputError
for kw in ({{}}, {{"labels": {str(w["labels"])!r}, "base": "openai/gpt-4o-mini"}},
           {{"labels": {str(tmp_path / "missing.jsonl")!r}}}):
    try:
        scijudge.distill({str(w["spec"])!r}, {str(w["items"])!r}, **{{"base": "hf:{tmp_path}", "out": {str(tmp_path / "o")!r}, **kw}})
    except InputError as exc:
        print(str(exc).splitlines()[0])
print("torch loaded" if "torch" in sys.modules else "torch not loaded")
"""
    done = subprocess.run([sys.executable, "-c", script], text=True, capture_output=True, timeout=300,
                          env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "true"})
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 4, done.stdout + done.stderr
    assert "field 'labels'" in lines[0] and "API model" in lines[1] and "missing.jsonl" in lines[2]
    assert lines[3] == "torch not loaded"
