"""The notebooks run top to bottom in a real kernel (nbclient), on their small default sizes."""

import pathlib

import nbformat
import pytest
from nbclient import NotebookClient

# Integration tests (the real CLI, subprocesses, whole runs): `pytest -m "not slow"` skips them.
pytestmark = pytest.mark.slow

NOTEBOOKS = pathlib.Path(__file__).resolve().parents[1] / "notebooks"


@pytest.mark.parametrize("name", ["quickstart.ipynb", "vae_checkpoint.ipynb"])
def test_notebook_runs(name, monkeypatch):
  monkeypatch.delenv("GR_JAX_VAE_WORKDIR", raising=False)
  notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
  NotebookClient(
    notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}
  ).execute()
  outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
  assert not [o for o in outputs if o.output_type == "error"]
  assert any(
    o.output_type == "display_data" and "image/png" in o.data for o in outputs
  )  # the plots
