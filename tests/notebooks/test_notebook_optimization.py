"""The optimization-experiment notebook runs top to bottom and reaches its own checks."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

pytestmark = pytest.mark.slow  # every test here takes seconds (see CONTRIBUTING.md)

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "optimization_experiment.ipynb"


def test_optimization_notebook_executes(tmp_path: Path) -> None:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(notebook, timeout=180, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    assert "optimization experiment: OK" in "".join(o.get("text", "") for o in outputs)
    assert any("image/png" in o.get("data", {}) for o in outputs)  # the plot was drawn
    assert any("text/html" in o.get("data", {}) for o in outputs)  # the comparison table was shown
