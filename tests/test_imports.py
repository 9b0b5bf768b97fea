"""Import hygiene: ``import scijudge`` stays light, scijudge modules form no import cycle, no source file is huge."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "scijudge"
HEAVY = ("dspy", "litellm", "torch", "pandas")
MAX_LINES = 600


@pytest.mark.parametrize("module", ["scijudge", "scijudge.lm", "scijudge.errors"])
def test_importing_loads_no_heavy_dependency(module):
    code = (f"import json, sys; import {module}; "
            f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({list(HEAVY)!r}))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(out.stdout) == []


def module_graph(package: Path, sources) -> dict[str, set[str]]:
    """Module -> package modules it imports at module level (not inside functions or ``if TYPE_CHECKING``).

    ``from pkg import sub`` points at the submodule ``pkg.sub``; importing ``a.b.c`` also runs the packages
    ``a.b`` and ``a`` first, so those count too, except the packages the importing module itself lives in
    (Python has started them already). ``sources`` is the ``source_trees`` fixture's view of ``package``.
    """
    root = package.name

    def name_of(path: Path) -> str:
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    modules = {name_of(p): p for p in sources.paths}

    def imported(body: list[ast.stmt]) -> list[str]:
        found: list[str] = []
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            if isinstance(node, ast.If):
                test = node.test
                if getattr(test, "id", None) == "TYPE_CHECKING" or getattr(test, "attr", None) == "TYPE_CHECKING":
                    found += imported(node.orelse)
                else:
                    found += imported(node.body) + imported(node.orelse)
            elif isinstance(node, ast.Try):
                found += imported(node.body) + imported(node.orelse) + imported(node.finalbody)
                for handler in node.handlers:
                    found += imported(handler.body)
            elif isinstance(node, ast.Import):
                found += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found += [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                          for a in node.names]
        return found

    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        deps: set[str] = set()
        for name in imported(sources.tree(path).body):
            if name.split(".")[0] != root:
                continue
            while name and name not in modules:
                name = name.rpartition(".")[0]
            while name:
                if name != module and not (module + ".").startswith(name + "."):
                    deps.add(name)
                name = name.rpartition(".")[0]
        graph[module] = deps
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path (first module repeated at the end), or None."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                return path[path.index(dep):] + [dep]
            if dep not in state and (cycle := visit(dep)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_no_import_cycle_between_scijudge_modules(source_trees):
    graph = module_graph(SRC, source_trees(SRC))
    assert len(graph) > 50 and "scijudge.lm._backends" in graph["scijudge.lm"]
    assert find_cycle(graph) is None


def test_the_cycle_check_finds_a_cycle_and_ignores_function_level_imports(tmp_path, source_trees):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "a.py": "from pkg.b import thing\n",
        "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import a\n"
                "def later():\n    from pkg import a\nthing = 1\n",
        "sub/__init__.py": "from pkg.sub import leaf\n",
        "sub/leaf.py": "from pkg import c\n",
        "c.py": "import pkg.sub.leaf\n",
    }
    for name, text in files.items():
        (package / name).write_text(textwrap.dedent(text))
    graph = module_graph(package, source_trees(package))
    assert graph["pkg.b"] == set() and graph["pkg.a"] == {"pkg.b"}
    assert find_cycle({k: v for k, v in graph.items() if not k.startswith(("pkg.c", "pkg.sub"))}) is None
    assert graph["pkg.c"] == {"pkg.sub.leaf", "pkg.sub"}  # importing pkg.sub.leaf runs pkg/sub/__init__ first
    cycle = find_cycle(graph)
    assert cycle is not None and cycle[0] == cycle[-1] and {"pkg.c", "pkg.sub.leaf"} <= set(cycle)


def test_no_source_file_is_over_600_lines(source_trees):
    sources = source_trees(SRC)
    sizes = {str(p.relative_to(SRC)): len(sources.text(p).splitlines()) for p in sources.paths}
    assert {path: n for path, n in sizes.items() if n > MAX_LINES} == {}


def unit_graph(package: Path, sources) -> dict[str, set[str]]:
    """Top-level unit -> units it imports, counting imports anywhere in a module (inside functions too), but not
    under ``if TYPE_CHECKING``. A unit is a subpackage (``scijudge.run``) or a top-level module
    (``scijudge.records``); the package's own ``__init__`` (the lazy user verbs) is not a unit. ``sources`` is the
    ``source_trees`` fixture's view of ``package``."""
    root = package.name
    graph: dict[str, set[str]] = {}

    def unit(name: str) -> str:
        return ".".join(name.split(".")[:2])

    for path in sources.paths:
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if module == root:
            continue
        nodes = sources.nodes(path)
        hidden: set[int] = set()
        for node in nodes:
            if isinstance(node, ast.If):
                test = node.test
                if getattr(test, "id", None) == "TYPE_CHECKING" or getattr(test, "attr", None) == "TYPE_CHECKING":
                    hidden.update(id(sub) for stmt in node.body for sub in ast.walk(stmt))
        deps = graph.setdefault(unit(module), set())
        for node in nodes:
            if id(node) in hidden:
                continue
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module] if node.module != root else [f"{root}.{a.name}" for a in node.names]
            for name in names:
                if name.startswith(root + ".") and unit(name) != unit(module):
                    deps.add(unit(name))
    return graph


def test_no_import_cycle_between_top_level_units_counting_imports_inside_functions(source_trees):
    graph = unit_graph(SRC, source_trees(SRC))
    assert {"scijudge.spec", "scijudge.chain", "scijudge.judges", "scijudge.run"} <= set(graph)
    assert "scijudge.spec" in graph["scijudge.judges"]
    assert find_cycle(graph) is None, find_cycle(graph)


def test_items_and_their_variants_sit_in_the_data_layer_below_spec(source_trees):
    """``scijudge.data`` (items, ``data.variants``) needs only the shared vocabulary, never a spec or DSPy."""
    graph = unit_graph(SRC, source_trees(SRC))
    assert graph["scijudge.data"] <= {"scijudge.errors", "scijudge.vocab", "scijudge._resources"}, graph["scijudge.data"]
    assert not (SRC / "perturb.py").exists() and (SRC / "data" / "variants.py").exists()


def test_the_unit_check_counts_imports_inside_functions(tmp_path, source_trees):
    package = tmp_path / "pkg"
    (package / "low").mkdir(parents=True)
    (package / "high").mkdir()
    files = {
        "__init__.py": "",
        "low/__init__.py": "", "high/__init__.py": "",
        "low/a.py": "def later():\n    from pkg.high import b\n",
        "high/b.py": "from pkg.low import a\n",
        "c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.high import b\n",
    }
    for name, text in files.items():
        (package / name).write_text(text)
    graph = unit_graph(package, source_trees(package))
    assert graph["pkg.low"] == {"pkg.high"} and graph["pkg.high"] == {"pkg.low"} and graph["pkg.c"] == set()
    assert find_cycle(graph) is not None


def test_no_more_than_15_modules_at_the_top_of_the_package():
    top = sorted(p.name for p in SRC.glob("*.py"))
    assert len(top) <= 15, top
