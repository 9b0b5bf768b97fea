"""The GPU layout benchmark runs where DSPy is absent: its whole path on a CPU, tiny shape, with dspy blocked."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import pytest

# The local extra is checked without importing it, so that collecting this module stays cheap.
_MISSING = [name for name in ("torch", "transformers", "peft", "llguidance") if find_spec(name) is None]
pytestmark = [pytest.mark.slow,  # runs the layout benchmark in a subprocess
              pytest.mark.skipif(bool(_MISSING), reason=f"not installed: {_MISSING} (the local extra)")]

ROOT = Path(__file__).resolve().parents[2]
BLOCK_DSPY = """
import runpy, sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('dspy', 'litellm'):
            raise ImportError('blocked on purpose: ' + name)
sys.meta_path.insert(0, Block())
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name='__main__')
"""


def test_layout_benchmark_runs_without_dspy_and_writes_its_table(tmp_path: Path) -> None:
    out = tmp_path / "gpu_results.txt"
    args = [sys.executable, "-c", BLOCK_DSPY, str(ROOT / "benchmarks" / "bench_layouts.py"), "--shape", "tiny",
            "--items", "2", "--rubrics", "2", "--out-tokens", "40", "--source-judgments", "1",
            "--corpus-chars", "150000", "--item-tokens", "60", "--out", str(out)]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the script finds src/ itself
    done = subprocess.run(args, capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    table = out.read_text()
    assert "grammar backend: llguidance" in table
    rows = {line.split("  ")[0].strip(): line for line in table.splitlines()
            if line.startswith(("separate", "item-first", "fused", "source path"))}
    assert set(rows) == {"source path", "separate, no reuse", "separate", "item-first", "fused"}
    for name in ("separate, no reuse", "separate", "item-first"):
        assert " 4/4 " in rows[name] and rows[name].split()[-3] == "0", rows[name]  # all valid, none truncated
    assert " 4/4 " in rows["fused"]
