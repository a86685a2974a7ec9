"""The distribution ships the gr_jax library only, with its license and type marker."""

import pathlib
import subprocess
import sys
import zipfile

import pytest

# Integration tests (the real CLI, subprocesses, whole runs): `pytest -m "not slow"` skips them.
pytestmark = pytest.mark.slow

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_wheel_holds_only_gr_jax(tmp_path):
  subprocess.run(
    [
      sys.executable,
      "-m",
      "pip",
      "wheel",
      str(ROOT),
      "--no-deps",
      "--no-build-isolation",
      "-q",
      "-w",
      str(tmp_path),
    ],
    check=True,
    timeout=300,
    cwd=tmp_path,
  )
  (wheel,) = tmp_path.glob("gr_jax-*.whl")
  archive = zipfile.ZipFile(wheel)
  names = archive.namelist()
  assert {name.split("/")[0] for name in names} == {
    "gr_jax",
    wheel.name.split("-")[0] + "-" + wheel.name.split("-")[1] + ".dist-info",
  }
  assert "gr_jax/py.typed" in names and "gr_jax/estimators/__init__.py" in names
  assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names), names
  # The license as an SPDX expression (PEP 639), not the table form setuptools is retiring.
  (metadata,) = [name for name in names if name.endswith(".dist-info/METADATA")]
  metadata_lines = archive.read(metadata).decode().splitlines()
  assert "License-Expression: Apache-2.0" in metadata_lines
  # The adapters are optional extras: the core library imports neither NumPyro nor distrax.
  assert {"Provides-Extra: numpyro", "Provides-Extra: distrax"} <= set(metadata_lines)
  assert "gr_jax/numpyro.py" in names and "gr_jax/distrax.py" in names
  # The wheel's library imports on its own (from the wheel, not the clone).
  code = (
    "import sys, gr_jax, gr_jax.estimators as e; print(e.get('gr_mc10').name, gr_jax.__file__,"
    " {'numpyro', 'distrax'} & set(sys.modules) or 'no adapters')"
  )
  out = subprocess.run(
    [sys.executable, "-c", code],
    check=True,
    capture_output=True,
    text=True,
    timeout=300,
    cwd=tmp_path,
    env={"PYTHONPATH": str(wheel)},
  ).stdout
  assert out.startswith("gr_mc10 ") and str(wheel) in out and out.endswith("no adapters\n")


def test_license_and_citation_files():
  assert "Apache License" in (ROOT / "LICENSE").read_text()
  citation = (ROOT / "CITATION.cff").read_text()
  assert "Rao-Blackwellizing the Straight-Through Gumbel-Softmax Gradient Estimator" in citation
