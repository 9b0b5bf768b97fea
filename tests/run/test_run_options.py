"""One typed set of judging options for Python and the command line: fields named in errors, every CLI option
reachable from Python, and a run built from ``RunOptions`` the way ``scijudge judge`` builds it."""

from __future__ import annotations

import inspect
import json
import re
from typing import Any

import pytest

from scijudge.errors import InputError
from scijudge.judges.options import JudgeOptions
from scijudge.run.options import RunOptions
from scijudge.testing.openai_server import last_user_text


def _answer(body: dict[str, Any]) -> str:
    found = re.search(r"R=(\d)", last_user_text(body))
    return json.dumps({"judgment": {"rationale": "r", "rating": int(found.group(1)) if found else 3}})


def test_every_flag_of_judge_is_a_field_and_bad_values_name_the_field():
    from scijudge.commands import judge

    flags = set(inspect.signature(judge.judge_cmd).parameters) - set(judge._NOT_OPTIONS)
    assert flags == set(RunOptions.model_fields)  # Python reaches every option the command has
    for values, field in (({"concurrency": 0}, "concurrency"), ({"layout": "sideways"}, "layout"),
                          ({"chunk_tokens": 10}, "chunk_tokens"), ({"fused": "maybe"}, "fused"),
                          ({"batch_size": 60_000}, "batch_size"), ({"colour": "red"}, "colour")):
        with pytest.raises(InputError) as err:
            RunOptions.of(**values)
        assert err.value.field == field and "--" not in str(err.value)
    with pytest.raises(InputError, match="batch") as err:
        RunOptions(batch=True, ray="local").executor_kind()
    assert err.value.field == "batch"
    with pytest.raises(InputError) as err:
        RunOptions(executor="fibers").executor_kind()
    assert err.value.field == "executor" and "must be auto, threads or async" in str(err.value)
    with pytest.raises(InputError) as err:
        RunOptions().check_cascade()
    assert err.value.field == "model"


def test_the_cli_names_the_flag_of_a_field(tmp_path):
    from typer.testing import CliRunner

    from scijudge.cli import app

    items = tmp_path / "items.jsonl"
    items.write_text(json.dumps({"id": "i1", "question": "Q?", "answer": "A"}) + "\n")
    done = CliRunner().invoke(app, ["judge", str(items), "-j", "yescieval.qa.correctness", "-m", "openai/x",
                                    "--batch", "--ray", "local", "--run", str(tmp_path / "r.sqlite")])
    assert done.exit_code == 2 and done.output.startswith("error: --batch: ") and "field" not in done.output


def test_python_reaches_fused_and_layout(tmp_path):
    from scijudge.judges import load_judge, load_judges
    from scijudge.judges.fused import FusedJudge

    options = JudgeOptions(model="openai/judge", api_base="http://127.0.0.1:9/v1", fused=True)
    fused = load_judges(["yescieval.qa.correctness", "yescieval.qa.coherence"], options)
    assert len(fused) == 1 and isinstance(fused[0], FusedJudge)
    with pytest.raises(InputError) as err:
        load_judge("yescieval.qa.correctness", options=options)
    assert err.value.field == "fused"
    first = load_judge("yescieval.qa.readability", options=options.model_copy(
        update={"fused": False, "layout": "item-first"}))
    assert first.name == "yescieval.qa.readability"


@pytest.mark.needs_extra("yescieval")  # the native preset reads YESciEval's own prompts from its package
def test_python_reaches_the_native_preset(tmp_path):
    from scijudge.judges import load_judge

    options = JudgeOptions(model="openai/judge", api_base="http://127.0.0.1:9/v1", preset="yescieval-native",
                           layout="item-first")
    native = load_judge("yescieval.qa.readability", options=options)
    assert native.name == "yescieval.qa.readability"


def test_a_run_from_options_is_the_run_judge_makes(loopback, tmp_path):
    from scijudge.data import Item, Paper
    from scijudge.run.judging import JudgeRun

    server = loopback(_answer)
    items = [Item(id=f"i{k}", question="Q?", papers=[Paper(title="T", abstract="A")], answer=f"answer R={1 + k % 5}")
             for k in range(6)]
    options = RunOptions(judges=("yescieval.qa.correctness",), model="openai/judge", api_base=server.url,
                         cache=False, concurrency=2)
    plan = JudgeRun.prepare(items, options)
    store = plan.open_store(tmp_path / "run.sqlite", items="items.jsonl")
    summary = plan.run(store)
    frame = store.to_pandas()
    meta = store.meta()
    store.close()
    assert summary.judged == 6 and sorted(frame["score"]) == [1.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert meta["model"] == "openai/judge" and meta["judges"] == ["yescieval.qa.correctness"]
    assert meta["scales"] == {"yescieval.qa.correctness": [1.0, 5.0, 1.0]}
