"""The notebooks use public names only and find bundled data through the installed package."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_public_names_and_packaged_data(path: Path) -> None:
    code = "\n".join("".join(cell["source"]) for cell in json.loads(path.read_text())["cells"]
                     if cell["cell_type"] == "code")
    assert "parents[" not in code and "__file__" not in code  # data through scijudge.bundled_path, not the checkout
    private = re.findall(r"scijudge(?:\.\w+)*\._\w+|from scijudge[\w.]* import [^\n]*\b_\w+", code)
    assert not private, private


def test_bundled_path_finds_the_example() -> None:
    import scijudge

    assert scijudge.bundled_path("datasets/yescieval_example/items.jsonl").is_file()
    from scijudge.errors import InputError

    with pytest.raises(InputError, match="not shipped"):
        scijudge.bundled_path("datasets/nope.jsonl")
