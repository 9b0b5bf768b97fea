"""The quickstart notebook runs top to bottom."""

from __future__ import annotations

import nbformat
import pytest
from nbclient import NotebookClient

pytestmark = pytest.mark.slow  # every test here takes seconds (see CONTRIBUTING.md)


def test_quickstart_notebook_executes(repo, tmp_path):
    notebook = nbformat.read(repo / "notebooks" / "quickstart.ipynb", as_version=4)
    NotebookClient(notebook, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    text = "".join(o.get("text", "") for o in outputs)
    assert "judged, 0 abstained" in text
