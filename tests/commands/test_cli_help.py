"""Every CLI command has --help with an example; the command list of ``scijudge --help`` comes from a table
(``scijudge.cli.COMMANDS``) that matches the command modules, and no command module is imported to print it."""

from __future__ import annotations

import ast
import inspect
import json
import subprocess
import sys
from importlib import import_module
from pathlib import Path

import pytest
from typer.core import TyperGroup
from typer.testing import CliRunner

from scijudge import cli
from scijudge.cli import app

COMMANDS = sorted(cli.COMMANDS)
COMMANDS_DIR = Path(cli.__file__).parent / "commands"


def test_all_expected_commands_are_registered():
    assert set(COMMANDS) >= {"judge", "judges", "export", "schema", "demo", "calibrate", "perturb", "compliance",
                             "optimize", "figure-metric", "import-lematerial"}


@pytest.mark.parametrize("name", COMMANDS)
def test_help_has_an_example(name):
    result = CliRunner().invoke(app, [name, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "Example: scijudge " + name.split()[0] in " ".join(result.output.split())


def test_the_command_table_is_what_the_modules_declare():
    """Each entry names a function that exists, with the first paragraph of its docstring as the summary; every
    public function of a command module is an entry (a new command cannot be left out of the table)."""
    for name, (module, function, summary) in cli.COMMANDS.items():
        fn = getattr(import_module(f"scijudge.commands.{module}"), function)
        assert inspect.cleandoc(inspect.getdoc(fn) or "").split("\n\n")[0] == summary, name
    declared = set()
    for path in COMMANDS_DIR.glob("[a-z]*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        declared |= {(path.stem, node.name) for node in tree.body
                     if isinstance(node, ast.FunctionDef) and not node.name.startswith("_")}
    assert declared == {(module, function) for module, function, _ in cli.COMMANDS.values()}


def test_top_level_help_is_what_building_every_command_prints(monkeypatch):
    """The list printed from the table equals the list typer prints from the built commands."""
    runner = CliRunner()
    lazy = runner.invoke(app, ["--help"], env={"COLUMNS": "160"})
    monkeypatch.setattr(cli.LazyGroup, "format_help", TyperGroup.format_help)  # no stand-ins: every command built
    built = runner.invoke(app, ["--help"], env={"COLUMNS": "160"})
    assert lazy.exit_code == built.exit_code == 0
    assert lazy.output == built.output
    assert all(name in lazy.output for name in cli.COMMANDS)


def test_a_mistyped_command_gets_suggestions():
    result = CliRunner().invoke(app, ["jduge"], env={"COLUMNS": "200"})
    assert result.exit_code == 2
    assert "No such command 'jduge'. Did you mean 'judge', 'judges'?" in result.output


def _fresh_process(args: list[str]) -> dict[str, object]:
    """Run ``scijudge ARGS`` in a new interpreter; its exit code and what it imported."""
    code = ("import json, sys; from scijudge.cli import app\n"
            "try:\n    app(args=sys.argv[1:], prog_name='scijudge')\n"
            "except SystemExit as exc:\n    code = exc.code\n"
            "print(json.dumps({'code': code, 'modules': sorted(sys.modules)}), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120,
                          check=True)
    return json.loads(done.stderr.strip().splitlines()[-1])


HEAVY = ["dspy", "litellm", "pandas", "scipy", "numpy", "torch", "sklearn"]


def test_help_path_imports_no_command_module_and_no_heavy_dependency():
    """`scijudge --help` lists every command without importing a command module, DSPy, pandas, numpy or torch."""
    run = _fresh_process(["--help"])
    modules = run["modules"]
    assert run["code"] == 0
    assert [m for m in modules if m.startswith("scijudge.commands.")] == []
    assert [m for m in HEAVY if m in modules] == []


@pytest.mark.parametrize("name", ["judge", "calibrate", "schema"])
def test_command_help_imports_only_that_command(name):
    """`scijudge COMMAND --help` imports that command's module (and its helpers), no other command, nothing heavy,
    and not typer's pydantic coercion layer (the group's --help flag defaults to False: see LazyGroup)."""
    run = _fresh_process([name, "--help"])
    modules = run["modules"]
    assert run["code"] == 0
    module = cli.COMMANDS[name][0]
    commands = {m.rpartition(".")[2] for m in modules if m.startswith("scijudge.commands.")}
    assert module in commands and {c for c in commands if not c.startswith("_")} == {module}
    assert [m for m in HEAVY if m in modules] == []
    assert "typer._adapters" not in modules
