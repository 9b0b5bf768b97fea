"""What the CLI prints is in the user's words and never claims what it does not know (issue 35, items 8, 14, 15)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scijudge.report.text import fmt_cost


def test_an_unknown_price_is_said_unknown_not_zero() -> None:
    assert fmt_cost(0.0, 0, 12).startswith("unknown")
    assert fmt_cost(None).startswith("unknown")
    assert fmt_cost(float("nan")).startswith("unknown")
    assert fmt_cost(0.0123, 12, 12) == "0.0123"
    assert fmt_cost(0.01, 4, 12) == "0.0100 for 4 of 12 answers (the rest: price unknown)"
    assert fmt_cost(0.0, 0, 0) == "0.0000"  # nothing judged: nothing spent


def test_the_run_summary_says_the_cost_is_unknown(capsys: pytest.CaptureFixture[str]) -> None:
    from scijudge.commands import _console
    from scijudge.commands._progress import print_summary
    from scijudge.run.summary import RunSummary

    summary = RunSummary(planned=3, judged=3, ok=3, tokens_in=300, tokens_out=30)  # a model with no price
    with _console.out.capture() as captured:
        print_summary(summary, Path("run.sqlite"))
    text = captured.get()
    assert "unknown" in text and "0.0000" not in text


def _cli(*args: str):
    from typer.testing import CliRunner

    from scijudge.cli import app

    return CliRunner().invoke(app, [str(a) for a in args])


def test_a_misspelt_layout_is_refused_before_the_model_is_looked_at(tmp_path: Path) -> None:
    # the model path does not exist: the old code got to it (loading weights, 11 s for a real one) first
    done = _cli("judge", "datasets/yescieval_example/items.jsonl", "-j", "yescieval.qa.correctness", "-m",
                f"hf:{tmp_path / 'no-such-model'}", "--layout", "itemfirst", "--run", tmp_path / "r.sqlite")
    assert done.exit_code == 2
    assert "--layout" in done.output and "itemfirst" in done.output and "item-first" in done.output
    assert not (tmp_path / "r.sqlite").exists()


def test_a_misspelt_judge_in_demo_is_refused_before_the_tiny_model_is_built(tmp_path: Path) -> None:
    done = _cli("demo", "-j", "yescieval.qa.corectness", "--workdir", tmp_path / "tiny", "--run", tmp_path / "d.sqlite",
                "--no-progress")
    assert done.exit_code == 2 and "corectness" in done.output
    assert not (tmp_path / "tiny").exists() and not (tmp_path / "d.sqlite").exists()


def test_a_misspelt_judge_in_optimize_is_refused_before_any_model_is_asked(tmp_path: Path, loopback) -> None:
    server = loopback(lambda body: '{"rating": 3, "rationale": "ok"}')
    done = _cli("optimize", "--judge", "yescieval.qa.corectness", "--items", "datasets/yescieval_example/items.jsonl",
                "--labels", "datasets/yescieval_example/labels.jsonl", "--model", "openai/a", "--model", "openai/b",
                "--api-base", server.url, "--recipe", "copro", "--out", tmp_path / "exp")
    assert done.exit_code == 2 and "corectness" in done.output
    assert server.count == 0  # the old code sent each model a preflight request first


@pytest.mark.parametrize("command,option,library", [
    ("judge", "layout", "scijudge.judges.layout:LAYOUTS"),
    ("judge", "mode", "scijudge.judges.decision:MODES"),
    ("judge", "decision_score", "scijudge.judges.decision:SCORE_RULES"),
    ("judge", "batch_fallback", "scijudge.run.batch.executor:Fallback"),
    ("drift", "on", "scijudge.metrics.drift:GATES"),
    ("compliance", "policy", "scijudge.metrics.compliance:Policy"),
    ("estimate", "human", "scijudge.estimation._units:ESTIMANDS"),
])
def test_the_choices_checked_at_parse_time_are_the_librarys(command: str, option: str, library: str) -> None:
    """Options with fixed values are checked by the parser, before anything loads: the values it accepts are the
    library's own (a Literal in the command's signature cannot drift from them unnoticed)."""
    import importlib
    import typing

    from scijudge.cli import COMMANDS

    module, function, _ = COMMANDS[command]
    fn = getattr(importlib.import_module(f"scijudge.commands.{module}"), function)
    hint = typing.get_type_hints(fn, include_extras=True)[option]
    accepted = set(typing.get_args(typing.get_args(hint)[0]))
    mod, name = library.split(":")
    value = getattr(importlib.import_module(mod), name)
    expected = set(typing.get_args(value)) if typing.get_origin(value) is typing.Literal else set(value)
    assert accepted == expected


def test_a_closed_pipe_ends_quietly_not_as_a_path_error() -> None:
    """``scijudge schema | head``: the reader goes away; no "cannot use this path: Broken pipe", exit 0 (the reader
    had what it wanted: not a failure of the command)."""
    import typer
    from typer.testing import CliRunner

    from scijudge.cli import command

    registry = typer.Typer()

    def writes_to_a_closed_pipe() -> None:
        raise BrokenPipeError(32, "Broken pipe")

    command("pipe", on=registry)(writes_to_a_closed_pipe)
    registry.command("other")(lambda: None)
    done = CliRunner().invoke(registry, ["pipe"])
    assert done.exit_code == 0 and "Broken pipe" not in done.output and "error" not in done.output


def test_labels_without_a_source_say_so_in_words() -> None:
    import pandas as pd

    from scijudge.labels import provenance_note

    text, from_a_model = provenance_note(pd.DataFrame({"label_source": ["unknown"] * 216 + ["expert"] * 4}))
    assert text == "labels: 216 (label source not recorded), 4 expert" and not from_a_model


def test_a_missing_api_key_names_the_variable_and_no_pointless_resume_line(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)  # no .env file here
    items = Path(__file__).resolve().parents[2] / "datasets/yescieval_example/items.jsonl"
    done = _cli("judge", items, "-j", "yescieval.qa.correctness", "-m", "anthropic/claude-3-5-haiku-20241022",
                "--run", tmp_path / "k.sqlite", "--no-progress", "--no-cache")
    assert done.exit_code == 3, done.output
    assert "set ANTHROPIC_API_KEY in the environment" in done.output
    assert "dspy.LM" not in done.output and "api_key=" not in done.output
    assert "resume with" not in done.output  # nothing was stored: the same command again, once the key is set
    assert not (tmp_path / "k.sqlite.lock").exists()


def test_no_progress_quiets_the_local_model_libraries_before_the_model_loads(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from scijudge.commands import _progress

    calls: list[str] = []
    monkeypatch.setattr(_progress, "quiet_local_models", lambda: calls.append("quiet"))
    done = _cli("judge", "datasets/yescieval_example/items.jsonl", "-j", "yescieval.qa.correctness", "-m",
                f"hf:{tmp_path / 'no-such-model'}", "--run", tmp_path / "r.sqlite", "--no-progress")
    assert done.exit_code != 0 and calls == ["quiet"]  # called before the (missing) model was looked for


@pytest.mark.parametrize("verbose", [False, True])
def test_optimize_quiets_a_local_model_unless_verbose(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      verbose: bool) -> None:
    """optimize's log takes over the terminal only once the model is loaded: without this, transformers' "Loading
    weights" bar for ``-m hf:smollm2`` lands on the screen."""
    from scijudge.commands import _progress

    calls: list[str] = []
    monkeypatch.setattr(_progress, "quiet_local_models", lambda: calls.append("quiet"))
    done = _cli("optimize", "--judge", "yescieval.qa.correctness", "--items", "datasets/yescieval_example/items.jsonl",
                "--labels", "datasets/yescieval_example/labels.jsonl", "--model", f"hf:{tmp_path / 'no-such-model'}",
                "--recipe", "copro", "--out", tmp_path / "exp", *(["--verbose"] if verbose else []))
    assert done.exit_code != 0 and "no-such-model" in done.output
    assert calls == ([] if verbose else ["quiet"])


def test_quiet_local_models_turns_off_the_transformers_bar_and_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    import warnings

    hf_logging = pytest.importorskip("transformers.utils.logging")
    monkeypatch.delenv("HF_HUB_DISABLE_PROGRESS_BARS", raising=False)
    before = hf_logging.get_verbosity()
    with warnings.catch_warnings():
        from scijudge.commands._progress import quiet_local_models

        quiet_local_models()
        try:
            assert not hf_logging.is_progress_bar_enabled()
            assert hf_logging.get_verbosity() == hf_logging.ERROR
            import os

            assert os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "1"
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("default")
                quiet_local_models()  # its filter goes first again
                warnings.warn_explicit("old", FutureWarning, "modeling_utils.py", 1, module="transformers.modeling_utils")
            assert not seen
        finally:
            hf_logging.enable_progress_bar()
            hf_logging.set_verbosity(before)


@pytest.mark.parametrize("args,says,never", [
    (["perturb", "datasets/yescieval_example/items.jsonl", "--level", "extreme", "--rubric", "cohesionn", "--out",
      "{tmp}/p.jsonl"], "--rubric: unknown rubric 'cohesionn'", "field 'rubrics'"),
    (["import-judgments", "--run", "{tmp}/x.sqlite"], "error: give a FILE to import", "field 'FILE'"),
    (["import-judgments", "datasets/yescieval_example/labels.jsonl", "--from", "bogus", "--run", "{tmp}/x.sqlite"],
     "unknown --from 'bogus'", "field 'from'"),
])
def test_option_errors_name_the_option_as_typed(tmp_path: Path, args: list[str], says: str, never: str) -> None:
    done = _cli(*[a.format(tmp=tmp_path) for a in args])
    assert done.exit_code == 2 and says in done.output and never not in done.output, done.output


def test_calibrate_says_the_options_not_the_python_keywords(tmp_path: Path) -> None:
    from scijudge.run.store import Run

    def row(i: int, score: float) -> dict:
        return {"item_id": f"q{i}", "judge": "yescieval.qa.correctness", "part": "", "family": "likert",
                "spec_hash": "not-a-known-spec", "model": "m", "endpoint": "", "input_hash": "ih", "decoding": "",
                "status": "ok", "score": score, "verdict": None, "confidence": None, "probs": None,
                "result": {"rating": 3, "rationale": "r"}, "rationale": "r", "reason": None, "attempts": [],
                "tokens_in": 1, "tokens_out": 1, "cost": None, "latency_s": 0.1,
                "created_at": "2026-12-01T10:00:00+00:00"}

    labels = tmp_path / "l.jsonl"
    labels.write_text("".join(json.dumps({"item_id": f"q{i}", "judge": "yescieval.qa.correctness", "score": 1 + i % 5,
                                          "annotator": "a"}) + "\n" for i in range(6)), encoding="utf-8")
    for name, first in (("bad", 7.0), ("good", 3.0)):
        with Run(tmp_path / f"{name}.sqlite") as run, run.transaction():
            run.record_many([row(i, first if i == 0 else float(1 + (i + 1) % 5)) for i in range(6)])
    bad = _cli("calibrate", "--labels", labels, "--run", tmp_path / "bad.sqlite", "--n-boot", "0")
    assert bad.exit_code == 2 and "pass the right --scale" in bad.output and "scale=" not in bad.output, bad.output
    good = _cli("calibrate", "--labels", labels, "--run", tmp_path / "good.sqlite", "--n-boot", "0",
                "--out", tmp_path / "report")
    assert good.exit_code == 0, good.output
    assert "no known spec has its stored spec hash" in good.output  # the note that named scale= and specs=
    assert "--spec" in good.output and "scale=" not in good.output and "specs=" not in good.output


def test_calibrate_checks_its_options_before_reading_labels_or_stores(tmp_path: Path) -> None:
    labels = tmp_path / "missing-labels.jsonl"  # the old code read (and refused) the labels first
    done = _cli("calibrate", "--labels", labels, "--run", "datasets/jury_example/panel.jsonl", "--scale", "1,five,1")
    assert done.exit_code == 2 and "five" in done.output and "missing-labels" not in done.output, done.output
    done = _cli("calibrate", "--labels", labels, "--run", tmp_path / "nope.sqlite")
    assert done.exit_code == 2 and "nope.sqlite" in done.output and "run store not found" in done.output


def test_estimate_checks_its_options_before_reading_labels_or_stores(tmp_path: Path) -> None:
    labels = tmp_path / "missing-labels.jsonl"
    done = _cli("estimate", "--run", tmp_path / "nope.sqlite", "--labels", labels)
    assert done.exit_code == 2 and "nope.sqlite" in done.output and "missing-labels" not in done.output, done.output
    done = _cli("estimate", "--run", "datasets/jury_example/panel.jsonl", "--labels", labels, "--scale", "1,five,1")
    assert done.exit_code == 2 and "five" in done.output and "missing-labels" not in done.output, done.output


@pytest.mark.parametrize("progress", [True, False])
def test_distill_quiets_the_base_models_libraries_with_no_progress(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   progress: bool) -> None:
    """The same rule as judge: --no-progress (a script, a log) gets no "Loading weights" bars and no FutureWarnings."""
    from scijudge.commands import _progress

    calls: list[str] = []
    monkeypatch.setattr(_progress, "quiet_local_models", lambda: calls.append("quiet"))
    done = _cli("distill", "--judge", "yescieval.qa.correctness", "--items", "datasets/yescieval_example/items.jsonl",
                "--labels", "datasets/yescieval_example/labels.jsonl", "--base", f"hf:{tmp_path / 'no-such-model'}",
                "--out", tmp_path / "student", "--progress" if progress else "--no-progress")
    assert done.exit_code != 0 and "no-such-model" in done.output
    assert calls == ([] if progress else ["quiet"])


def test_distill_prints_the_evaluations_notes_and_the_card_carries_them(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """A held-out figure on 2 items came with its interval but no word that 2 items are few: calibrate's
    fewer-than-30 note was kept in evaluation.json only."""
    from scijudge.commands.distill import _print_result
    from scijudge.distillation._api import DistillResult
    from scijudge.distillation.card import write_card

    few = "fewer than 30 labelled units: j / hf:base (2); read their intervals, not their points"
    evaluation = {"mode": "decision", "against": "human labels", "notes": [few],
                  "exact_agreement": {"student": {"value": 0.5, "ci": [0.1, 0.9], "n": 2}}}
    result = DistillResult(out=tmp_path, model=f"hf:{tmp_path}", steps=4, total_steps=4, losses=[], interrupted=False,
                           resumed_from=None, evaluation=evaluation, notes=["8 items, 2 held out"])
    _print_result(result)
    err = capsys.readouterr().err
    assert "note: 8 items, 2 held out" in err and f"note: {few}" in err
    write_card(tmp_path, {"evaluation": evaluation, "base": {"path": "base"}, "split": {"train": 6, "held_out": 2, "seed": 0},
                          "config": {"form": "levels", "lora_r": 8, "lr": 1e-4}})
    assert f"Note: {few}." in (tmp_path / "README.md").read_text()
