"""The real-data notebook runs top to bottom with SmolLM2's weights on ExpertQA claims and reaches its own checks."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

pytestmark = [pytest.mark.slow, pytest.mark.needs_extra("smollm2")]

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "real_data.ipynb"


@pytest.mark.timeout(900)  # about two minutes on two idle cores; several times that on a shared machine
def test_real_data_notebook_executes(smollm2: Path, tmp_path: Path) -> None:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(notebook, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    assert "real-data notebook: OK" in "".join(o.get("text", "") for o in outputs)
