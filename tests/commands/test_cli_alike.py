"""Commands behave alike: --version and -h, one meaning per short flag, options named as typed in errors,
unknown families refused, load_judge refusing options it would drop."""

from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner

from scijudge.cli import app

RUNNER = CliRunner()


def test_version_and_short_help() -> None:
    import scijudge

    version = RUNNER.invoke(app, ["--version"])
    assert version.exit_code == 0 and version.output.strip() == f"scijudge {scijudge.__version__}"
    assert RUNNER.invoke(app, ["-h"]).exit_code == 0 and "Usage" in RUNNER.invoke(app, ["-h"]).output
    calibrate = RUNNER.invoke(app, ["calibrate", "-h"])
    assert calibrate.exit_code == 0 and "--labels" in calibrate.output


def test_each_short_flag_has_one_meaning_across_commands() -> None:
    meaning: dict[str, set[str]] = {}
    group = typer.main.get_command(app)
    for name, command in group.commands.items():  # type: ignore[attr-defined]
        for param in command.params:
            longs = [o for o in param.opts if o.startswith("--")]
            for short in (o for o in param.opts if len(o) == 2 and o.startswith("-")):
                if short == "-h":
                    continue
                meaning.setdefault(short, set()).update(longs or [name])
    same = {frozenset({"--model", "--member"})}  # a jury member is named by its model: -m is a model in both
    clashes = {short: longs for short, longs in meaning.items() if len(longs) > 1 and frozenset(longs) not in same}
    assert not clashes, clashes


def test_judges_with_an_unknown_family_is_an_error() -> None:
    done = RUNNER.invoke(app, ["judges", "--family", "nonsense"])
    assert done.exit_code == 2 and "unknown family 'nonsense'" in done.output and "likert" in done.output
    assert RUNNER.invoke(app, ["judges", "--family", "likert"]).exit_code == 0


def test_errors_name_the_option_as_typed(tmp_path) -> None:  # type: ignore[no-untyped-def]
    items = tmp_path / "items.jsonl"
    items.write_text('{"id": "q1", "question": "Q?", "answer": "A.", "papers": [{"title": "T", "abstract": "B"}]}\n')
    done = RUNNER.invoke(app, ["judge", str(items), "--judge", "yescieval.qa.correctness", "--judge",
                               "yescieval.qa.coherence", "--fused", "--layout", "sideways", "--model",
                               "openai/x", "--api-base", "http://127.0.0.1:9/v1", "--run", str(tmp_path / "r.sqlite")])
    assert done.exit_code == 2, done.output
    assert "--layout" in done.output and "field 'layout'" not in done.output


def test_load_judge_refuses_options_it_would_drop() -> None:
    from scijudge.errors import InputError
    from scijudge.judges.build import load_judge
    from scijudge.testing.scripted import scripted_lm

    lm = scripted_lm(lambda request: "{}")
    with pytest.raises(InputError, match="some_option"):
        load_judge("yescieval.qa.correctness", lm=lm, some_option=1)
    with pytest.raises(InputError, match="timeout"):
        load_judge("yescieval.qa.correctness", lm=lm, timeout=5)
