"""Tests of gr_jax.toy_qp and of the toy experiment through the real CLI."""

import json
import subprocess

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gr_jax import toy_qp
from tests.cli import ROOT, run_main, script_command

# Integration tests (the real CLI, subprocesses, whole runs): `pytest -m "not slow"` skips them.
pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def float64():
  jax.config.update("jax_enable_x64", True)
  yield
  jax.config.update("jax_enable_x64", False)


def test_recast_expectation_equals_the_quadratic():
  q, c = toy_qp.paper_problem()
  q, c = q.astype(jnp.float64), c.astype(jnp.float64)
  for p in toy_qp.simplex_grid(12):
    p = jnp.asarray(p)
    expectation = sum(p[i] * toy_qp.stochastic_loss(jnp.eye(3)[i], p, q, c) for i in range(3))
    np.testing.assert_allclose(expectation, toy_qp.objective(p, q, c), rtol=1e-9, atol=1e-12)


def test_paper_constants_and_a_is_held_constant():
  q, c = toy_qp.paper_problem()
  np.testing.assert_allclose(q[0], [1.0, np.exp(-2.0), np.exp(-4.0)], rtol=1e-6)
  np.testing.assert_allclose(c, 1 / 3)
  p = jnp.array([0.5, 0.3, 0.2])
  grad = jax.grad(lambda p_: toy_qp.stochastic_loss(jnp.eye(3)[0], p_, q, c))(p)
  np.testing.assert_array_equal(grad, 0.0)  # no derivative through A(p)


def test_grid_avoids_singular_lines_and_the_centre():
  points = toy_qp.simplex_grid(30)
  np.testing.assert_allclose(points.sum(1), 1.0)
  assert points.min() > 0
  sums = points[:, [0, 0, 1]] + points[:, [1, 2, 2]]
  assert np.min(np.abs(sums - 1 / 3)) > 0.009
  assert np.max(np.abs(points - 1 / 3), axis=1).min() > 0.009
  corners = toy_qp.to_ternary(np.eye(3))
  np.testing.assert_allclose(corners, [[0, 0], [1, 0], [0.5, np.sqrt(3) / 2]], atol=1e-12)


def test_tiny_cli_run_writes_maps_plots_and_resumes(tmp_path):
  jax.config.update("jax_enable_x64", False)
  args = (
    "grid_resolution=4",
    "num_draws=50",
    "opt_steps=20",
    "points_per_batch=4",
    "taus=(0.1,1.0)",
  )
  run_main("configs/toy_qp.py", tmp_path, *args)
  for name in (
    "variance_tau0.1.npz",
    "variance_tau1.0.npz",
    "optimization.json",
    "results.json",
    "variance_summary.json",
  ):
    assert (tmp_path / name).is_file(), name
  figures = tmp_path / "figures"
  plotted = subprocess.run(
    [
      *script_command("plot"),
      "--figure=toy_qp",
      f"--workdir={tmp_path}",
      f"--out_dir={figures}",
    ],
    check=True,
    capture_output=True,
    text=True,
    cwd=ROOT,
  )
  assert "Unable to initialize backend" not in plotted.stderr
  for name in ("toy_variance_difference.png", "toy_objective.png", "toy_optimization.png"):
    assert (figures / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
  results = json.loads((tmp_path / "results.json").read_text())
  summary = results["variance"]["0.1"]
  assert 0 <= summary["fraction_lower"] <= 1 and np.isfinite(summary["median_log10_reduction"])
  assert set(results["optimization_final_objective"]) == {"exact gradient", "st_gs", "gr_mc1000"}
  with np.load(tmp_path / "variance_tau0.1.npz") as saved:
    assert np.all(np.isfinite(saved["st_gs"])) and saved["points"].shape[1] == 3
  # Started again: the saved maps are reused, not recomputed.
  before = (tmp_path / "variance_tau0.1.npz").stat().st_mtime_ns
  run_main("configs/toy_qp.py", tmp_path, *args)
  assert (tmp_path / "variance_tau0.1.npz").stat().st_mtime_ns == before


def test_bad_config_is_a_one_line_error(tmp_path):
  jax.config.update("jax_enable_x64", False)
  result = run_main("configs/toy_qp.py", tmp_path, "taus=(0.5,-1.0)", check=False)
  assert result.returncode != 0
  assert result.stderr.strip().splitlines()[-1].startswith("error: config.taus")
