"""The notebooks run top to bottom in a real kernel (nbclient), on their small default sizes."""

import json
import os
import pathlib
import subprocess

import nbformat
import numpy as np
import pytest
from nbclient import NotebookClient

from tests.cli import main_command

# Integration tests (the real CLI, subprocesses, whole runs): `pytest -m "not slow"` skips them.
pytestmark = pytest.mark.slow

NOTEBOOKS = pathlib.Path(__file__).resolve().parents[1] / "notebooks"


@pytest.mark.parametrize(
  "name", ["quickstart.ipynb", "vae_checkpoint.ipynb", "numpyro_mixture.ipynb"]
)
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


def test_the_checkpoint_notebook_loads_a_run_trained_the_readmes_way(tmp_path, monkeypatch):
  """A run trained as the README says (from the clone's root, GR_JAX_DATA a relative path) loads in
  the notebook, which runs in notebooks/: the run's data record is absolute. No log lines (orbax's
  warnings) reach the notebook's output."""
  root = NOTEBOOKS.parent
  data = tmp_path / "data" / "binarized_mnist"
  data.mkdir(parents=True)
  rng = np.random.default_rng(0)
  splits = {
    s: (rng.random((n, 784)) < 0.2).astype(np.uint8)
    for s, n in (("train", 60), ("valid", 20), ("test", 20))
  }
  np.savez(data / "binarized_mnist.npz", **splits)
  workdir = tmp_path / "run"
  command = main_command(
    "configs/vae_16ary.py",
    workdir,
    "num_steps=4",
    "encoder_widths=(16,)",
    "decoder_widths=(16,)",
    "eval_every=0",
    "variance_every=0",
    "num_eval_samples=3",
    "checkpoint_every=4",
  )
  env = {**os.environ, "GR_JAX_DATA": os.path.relpath(tmp_path / "data", root)}
  subprocess.run(command, cwd=root, env=env, check=True, capture_output=True, timeout=600)
  recorded = json.loads((workdir / "config.json").read_text())["data_used"]["train"]
  assert pathlib.Path(recorded).is_absolute() and pathlib.Path(recorded) == data.resolve()
  monkeypatch.setenv("GR_JAX_VAE_WORKDIR", str(workdir))
  monkeypatch.delenv("GR_JAX_DATA", raising=False)
  notebook = nbformat.read(NOTEBOOKS / "vae_checkpoint.ipynb", as_version=4)
  NotebookClient(
    notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}
  ).execute()
  outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
  assert not [o for o in outputs if o.output_type == "error"]
  printed = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
  assert "WARNING" not in printed and "orbax" not in printed, printed
  assert "trained 4 steps" in printed
