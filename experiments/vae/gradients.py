"""The VAE encoder gradient's moments at a trained checkpoint (compare_estimators, figure_2b)."""

import pathlib

import jax
import jax.numpy as jnp
import numpy as np
from ml_collections import ConfigDict

from experiments import vae as vae_experiment
from experiments.vae.task import VAETask
from gr_jax import diagnostics, estimators

BATCH = 20  # training images in the fixed batch, as the paper's Figure 2b


def mse_summary(stats, reference, reference_mean_variance) -> dict:
  """Squared bias (less the reference's Monte Carlo variance), variance and MSE to ``reference``."""
  bias = float(stats.squared_bias(reference, reference_mean_variance))
  variance = float(stats.trace_variance)
  return {"squared_bias": bias, "variance": variance, "mse": variance + bias}


def setup(workdir: pathlib.Path, member: int, data_dir: str = ""):
  """(config, trained member state, a fixed batch of BATCH training images, step) of a workdir's
  latest checkpoint: the parameters, REINFORCE baseline and input centring of population member
  ``member`` (or of a single-run checkpoint written before populations)."""
  try:
    config, state, _, data, step = vae_experiment.load_trained(
      workdir, member, data_dir=data_dir or None
    )
  except (ValueError, OSError) as e:  # not a VAE run, no such member, no data (one line each)
    raise SystemExit(f"error: --vae_workdir={workdir}, --vae_member={member}: {e}") from None
  if len(data["train"]) < BATCH:
    raise SystemExit(
      f"error: --vae_workdir={workdir} was trained on {len(data['train'])} training images; the"
      f" measurement takes a batch of {BATCH}: give a run trained on binarized MNIST."
    )
  rows = np.random.default_rng(0).choice(len(data["train"]), BATCH, replace=False)
  return config, state, jnp.asarray(data["train"][rows], jnp.float32), step


def task(config: ConfigDict, name: str) -> VAETask:
  return VAETask(config, estimators.get(name), np.asarray(config.pixel_means, np.float32))


def encoder_stats(config: ConfigDict, name: str, member, x, key, tau: float, draws: int):
  """Moments of the encoder gradient over ``draws`` draws of estimator ``name`` at the member's
  state, and the task."""
  vae_task = task(config, name)

  def encoder_grad(draw_key):
    return jax.grad(vae_task.loss, has_aux=True)(
      member["params"], x, draw_key, member["baseline"].mean, tau, member["input_mean"]
    )[0]["encoder"]

  chunk = max(d for d in range(1, min(draws, 25) + 1) if draws % d == 0)
  moments = jax.jit(lambda k: diagnostics.gradient_stats(encoder_grad, k, draws, chunk_size=chunk))
  return moments(key), vae_task


def reinforce_reference(config: ConfigDict, member, x, key, draws: int):
  """The REINFORCE estimate of the encoder gradient (unbiased at any tau) over ``draws`` draws:
  its moments and the variance of its mean (removed from the estimators' squared bias)."""
  reference, _ = encoder_stats(
    config, "reinforce", member, x, jax.random.fold_in(key, 999_999), 1.0, draws
  )
  return reference, float(reference.trace_variance) / reference.num_draws


def log10_cell(value) -> str:
  """log10 for the tables; a bias estimate <= 0 is zero within Monte Carlo noise."""
  return f"{diagnostics.log10(value):.2f}" if value > 0 else "~0"
