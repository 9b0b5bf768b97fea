"""Every third-party module scijudge imports is declared in pyproject.toml, and the estimate path works without
pyarrow (pandas then keeps text in Python objects): a fresh machine gets exactly what the README installs."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tomllib
from importlib.metadata import PackageNotFoundError, packages_distributions, requires
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "scijudge"

# Imported inside guarded comparisons only (lm/_grammar.py measures them side by side with llguidance): never on a
# command's path unless installed by hand, and each import names what to install when it fails.
OPTIONAL_BY_HAND = {"xgrammar", "outlines_core"}


def _requirement_name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[(]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _declared() -> dict[str, set[str]]:
    """Distribution name (normalised) -> the groups that declare it: "core" or an extra's name."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    groups: dict[str, set[str]] = {}
    for requirement in project["dependencies"]:
        groups.setdefault(_requirement_name(requirement), set()).add("core")
    for extra, requirements in project["optional-dependencies"].items():
        for requirement in requirements:
            groups.setdefault(_requirement_name(requirement), set()).add(extra)
    return groups


def _third_party_imports() -> dict[str, set[str]]:
    """Top-level module -> the scijudge files that import it (at any depth, inside functions too)."""
    found: dict[str, set[str]] = {}
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top != "scijudge" and top not in sys.stdlib_module_names:
                    found.setdefault(top, set()).add(str(path.relative_to(SRC)))
    return found


@pytest.mark.slow  # seconds: the fast subset stays under a minute
def test_every_third_party_import_is_a_declared_dependency():
    declared = _declared()
    distributions = packages_distributions()
    undeclared = {}
    for module, files in _third_party_imports().items():
        if module in OPTIONAL_BY_HAND:
            continue
        # An extra's module that this environment lacks (stage (a) of .ci/run): its distribution is named like it.
        names = {name.lower().replace("_", "-") for name in distributions.get(module, [module])}
        if not names & set(declared):
            undeclared[module] = f"distribution {sorted(names)} is in no group of pyproject.toml ({sorted(files)})"
    assert undeclared == {}


def test_the_declaration_check_finds_an_undeclared_import():
    """The check above can fail: a module that no group declares is reported (pyarrow before this issue)."""
    declared = _declared()
    assert "pyarrow" in declared and "core" in declared["pyarrow"]
    assert "ppi-python" not in {name for name, groups in declared.items() if "core" in groups}
    assert "numba" not in declared  # ppi-python's dependency: installed here, declared nowhere
    assert "numba" in packages_distributions() or "llvmlite" in packages_distributions()


def test_the_local_extra_declares_what_the_real_model_path_needs():
    """`gguf` reads SmolLM2's weights; it is part of the `local` extra the README installs."""
    declared = _declared()
    assert "local" in declared["gguf"]
    try:
        needs = {_requirement_name(r) for r in requires("scijudge") or [] if "extra == \"local\"" in r}
    except PackageNotFoundError:  # tests run from a checkout without the project installed
        pytest.skip("scijudge is not installed here: pip install -e '.[local,dev]'")
    assert "gguf" in needs or not needs  # an installed copy older than this checkout lists none


BLOCK_PYARROW = """
import importlib.abc, sys
class _NoPyarrow(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "pyarrow" or name.startswith("pyarrow."):
            raise ModuleNotFoundError("No module named 'pyarrow'", name="pyarrow")
        return None
sys.meta_path.insert(0, _NoPyarrow())
import pandas as pd
assert getattr(pd.Series(["x"]).dtype, "storage", "python") != "pyarrow", pd.Series(["x"]).dtype
from scijudge.cli import main
sys.argv = ["scijudge", *sys.argv[1:]]
main()
"""


@pytest.mark.slow
def test_estimate_and_calibrate_work_on_a_machine_without_pyarrow(tmp_path):
    """pandas without pyarrow keeps text as Python objects; the estimate cache key and every reader handle that
    (it raised ModuleNotFoundError from estimation/_units.py before)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "LITELLM_LOCAL_MODEL_COST_MAP": "true"}

    def scijudge(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", BLOCK_PYARROW, *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300)

    store = tmp_path / "panel.sqlite"
    made = scijudge("import-judgments", str(ROOT / "datasets/jury_example/panel.jsonl"), "--run", str(store))
    assert made.returncode == 0, made.stderr
    labels = str(ROOT / "datasets/yescieval_example/labels.jsonl")
    estimated = scijudge("estimate", "--run", str(store), "--labels", labels, "--out", str(tmp_path / "est"))
    assert estimated.returncode == 0, estimated.stderr
    assert "Traceback" not in estimated.stderr and "judge-a" in estimated.stdout
    assert (tmp_path / "est" / "estimate.csv").exists()
    calibrated = scijudge("calibrate", "--run", str(store), "--labels", labels, "--out", str(tmp_path / "cal"),
                          "--n-boot", "50")
    assert calibrated.returncode == 0, calibrated.stderr
