"""tests/conftest.py does not import a test module that ``-m`` leaves no test of (the fast subset skips the
transformers, inspect_ai, MLflow and Ray imports of modules whose every test is slow)."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent


@pytest.fixture
def root_conftest(request: pytest.FixtureRequest) -> types.ModuleType:
    path = TESTS / "conftest.py"
    return next(plugin for plugin in request.config.pluginmanager.get_plugins()
                if getattr(plugin, "__file__", None) and Path(plugin.__file__).resolve() == path)


def test_module_marks_are_the_pytestmark_of_the_module(tmp_path: Path, root_conftest: types.ModuleType) -> None:
    module = tmp_path / "test_x.py"
    module.write_text("import pytest\npytestmark = [pytest.mark.slow,  # why\n"
                      "              pytest.mark.skipif(True, reason='r')]\n")
    assert root_conftest.module_marks(module) == {"slow", "skipif"}
    module.write_text("import pytest\npytestmark = pytest.mark.slow\n")
    assert root_conftest.module_marks(module) == {"slow"}
    module.write_text("import pytest\n@pytest.mark.slow\ndef test_a():\n    pass\n")  # one test's mark: not the module's
    assert root_conftest.module_marks(module) == set()
    module.write_text("def broken(:\n")
    assert root_conftest.module_marks(module) == set()


@pytest.mark.parametrize(("markexpr", "none"), [
    ("not slow", True), ("slow", False), ("not slow and not gpu", True), ("gpu and not slow", True),
    ("slow or gpu", False), ("not (slow and gpu)", False), ("gpu and not ray", False),
    ("not slow or (gpu and not ray)", False),  # ray is reached only once gpu is tried as true
    ("slow(reason=1)", False), ("not (", False),
])
def test_a_mark_expression_selects_none_of_a_modules_tests_only_when_no_other_marks_could_select_one(
        root_conftest: types.ModuleType, markexpr: str, none: bool) -> None:
    assert root_conftest.selects_none(markexpr, {"slow"}) is none


def test_not_slow_skips_only_modules_whose_every_test_is_slow(root_conftest: types.ModuleType) -> None:
    def ignored(path: Path, markexpr: str) -> bool | None:
        config = types.SimpleNamespace(getoption=lambda name, default=None: markexpr if name == "markexpr" else default)
        return root_conftest.pytest_ignore_collect(path, config)

    all_slow = TESTS / "lm" / "test_layouts.py"  # pytestmark = [pytest.mark.slow, skipif(...)]
    some_slow = TESTS / "lm" / "test_rating_logprobs.py"  # one slow test among fast ones
    assert "slow" in root_conftest.module_marks(all_slow)
    assert ignored(all_slow, "not slow") is True
    assert ignored(some_slow, "not slow") is None
    assert ignored(all_slow, "") is None and ignored(all_slow, "slow") is None
