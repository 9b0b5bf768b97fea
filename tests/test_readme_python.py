"""The README's Python blocks run as written, against the fake OpenAI-compatible model on loopback (its answers
mean nothing; what is checked is that the documented verbs exist and take what the others return)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from scijudge.testing import OpenAICompatServer
from scijudge.testing.fake_model import FakeModel


def _blocks(repo: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", (repo / "README.md").read_text(), re.S)


@pytest.mark.slow  # three judging runs of the bundled items through the real client on loopback: a few seconds
def test_the_readmes_python_blocks_run_in_order_and_compose(repo: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = _blocks(repo)
    assert len(blocks) >= 3, "the README's Python blocks were not found"
    with OpenAICompatServer(FakeModel()) as server:
        monkeypatch.setenv("OPENAI_API_BASE", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "fake")
        monkeypatch.chdir(tmp_path)
        (tmp_path / "datasets").symlink_to(repo / "datasets")
        (tmp_path / "runs").mkdir()
        # The second block reads a second model's store, which the README's CLI section makes; the first block
        # with another model name and store stands in for it.
        other = blocks[0].replace("runs/qa.sqlite", "runs/llama.sqlite").replace("gpt-4o-mini", "llama")
        namespace: dict[str, object] = {}
        for source in (other, *blocks):
            exec(compile(source, "README.md", "exec"), namespace)  # the README's own text, not model output
    assert namespace["result"].status == "ok"  # type: ignore[attr-defined]
    assert len(namespace["frame"]) > 0  # type: ignore[arg-type]
    assert {"openai/gpt-4o-mini", "openai/llama"} <= set(namespace["read"].frame["model"])  # type: ignore[attr-defined]
    assert namespace["summary"] is not None and len(namespace["judges"]) > 1  # type: ignore[arg-type]
    assert os.path.getsize(tmp_path / "runs" / "qa.sqlite") > 0
