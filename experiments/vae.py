"""Discrete VAE on binarized MNIST (Paulus et al. 2021, section 5.3, Tables 2-3, Figure 2).

Training maximizes the single-sample bound log p(x, D) - log q(D | x) with the
configured estimator (REINFORCE adds its score-function surrogate with a
running-mean baseline); evaluation is the importance-weighted bound with exact
discrete samples. Runs resume from their latest checkpoint in the workdir.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from absl import logging
from flax import nnx
from ml_collections import ConfigDict

from experiments import common
from gr_jax import diagnostics, estimators
from gr_jax.data import mnist
from gr_jax.models import vae

DATASETS = ("binarized_mnist", "synthetic")


def validate(config: ConfigDict) -> estimators.Estimator:
  """Checks the config before any compute; ConfigError names the field."""
  estimator = common.check_estimator(config, num_categories=config.arity)
  common.check_common(config)
  try:
    vae.log2_arity(config.arity)
  except ValueError:
    raise common.ConfigError(
        f"config.arity must be a power of two >= 2 (2, 4, 8, 16); got {config.arity!r}."
    ) from None
  common.require_int(config, "num_vars", minimum=1)
  common.require_int(config, "num_steps", minimum=0)
  common.require(0 <= config.momentum < 1, "momentum", "in [0, 1)", config.momentum)
  common.require(config.dataset in DATASETS, "dataset", f"one of {DATASETS}", config.dataset)
  common.require_int(config, "eval_every", "checkpoint_every", "variance_every", "mse_every", "log_every",
                     minimum=0, allowed="an int >= 0 (0 = off)")
  common.require_int(config, "num_eval_samples", "periodic_eval_samples", "eval_batch_size", "iwae_chunk_size",
                     minimum=1)
  common.require_int(config, "variance_draws", "mse_reference_draws", minimum=2)
  common.require(isinstance(config.num_eval_examples, int) and config.num_eval_examples != 0,
                 "num_eval_examples", "-1 (all) or an int >= 1", config.num_eval_examples)
  return estimator


def load_data(config: ConfigDict) -> dict[str, np.ndarray]:
  data = mnist.load(
      config.data_dir or None,
      download=config.download,
      synthetic_data=config.dataset == "synthetic",
  )
  common.require_batch_fits(config, len(data["train"]), "training images")
  return data


def make_model(config: ConfigDict) -> vae.DiscreteVAE:
  return vae.DiscreteVAE(
      config.num_vars,
      config.arity,
      encoder_widths=tuple(config.encoder_widths),
      decoder_widths=tuple(config.decoder_widths),
      activation=config.activation,
      rngs=nnx.Rngs(config.seed),
  )


def make_optimizer(config: ConfigDict) -> optax.GradientTransformation:
  return optax.chain(
      optax.add_decayed_weights(config.weight_decay),
      optax.sgd(config.learning_rate, momentum=config.momentum or None),
  )


class Trainer:
  """Pure, jitted functions of the parameters (a pure dict) for one config."""

  report_every_seconds = 30.0

  def __init__(self, config: ConfigDict, estimator: estimators.Estimator):
    self.config, self.estimator = config, estimator
    model = make_model(config)
    self.graphdef, state = nnx.split(model)
    self.init_params = nnx.to_pure_dict(state)
    self.optimizer = make_optimizer(config)
    self.baseline = estimators.RunningMeanBaseline(decay=config.baseline_decay)
    self.tau_at = common.tau_schedule(config)
    self.train_step = jax.jit(self._train_step, donate_argnums=0)
    self.iwae = jax.jit(self._iwae, static_argnums=3)
    self.encoder_grad_stats = jax.jit(self._encoder_grad_stats, static_argnums=4)
    self.reinforce = estimators.get("reinforce")

  def model(self, params) -> vae.DiscreteVAE:
    return nnx.merge(self.graphdef, params)

  def init_state(self):
    return {
        "params": self.init_params,
        "opt_state": self.optimizer.init(self.init_params),
        "baseline": self.baseline.init(),
    }

  def _loss(self, params, x, key, baseline_mean, tau, estimator=None):
    estimator = estimator or self.estimator
    bound, log_q = vae.single_sample_bound(self.model(params), x, key, estimator, tau)
    loss = -jnp.mean(bound)
    objective = loss
    if estimator.score_function:
      objective = loss + jnp.mean(estimators.score_function_surrogate(log_q, -bound, baseline_mean))
    return objective, bound

  def _train_step(self, state, x, key, step):
    tau = self.tau_at(step)
    grads, bound = jax.grad(self._loss, has_aux=True)(state["params"], x, key, state["baseline"].mean, tau)
    updates, opt_state = self.optimizer.update(grads, state["opt_state"], state["params"])
    new_state = {
        "params": optax.apply_updates(state["params"], updates),
        "opt_state": opt_state,
        "baseline": self.baseline.update(state["baseline"], -bound),
    }
    return new_state, jnp.mean(bound)

  def _iwae(self, params, x, key, num_samples):
    return vae.iwae_bound(self.model(params), x, key, num_samples, self.config.iwae_chunk_size)

  def _encoder_grad_stats(self, params, x, key, baseline_mean, reference: bool, step):
    """Moments of the encoder gradient over draws of the estimator (or of REINFORCE)."""
    estimator = self.reinforce if reference else self.estimator
    tau = self.tau_at(step)

    def encoder_grad(draw_key):
      grads = jax.grad(self._loss, has_aux=True)(params, x, draw_key, baseline_mean, tau, estimator)[0]
      return grads["encoder"]

    draws = self.config.mse_reference_draws if reference else self.config.variance_draws
    chunk = max(d for d in range(1, min(draws, 25) + 1) if draws % d == 0)
    return diagnostics.gradient_stats(encoder_grad, key, draws, chunk_size=chunk)

  def evaluate(self, params, images: np.ndarray, key, num_samples: int, label: str = "") -> float:
    """Mean negative IWAE bound (nats) over ``images``, in eval batches.

    With a ``label``, a progress line (images done, rate, ETA) every
    ``report_every_seconds`` (30).
    """
    size = self.config.eval_batch_size
    total = 0.0
    t0 = last_report = time.perf_counter()
    for start in range(0, len(images), size):
      x = jnp.asarray(images[start : start + size], jnp.float32)
      bounds = self.iwae(params, x, jax.random.fold_in(key, start), num_samples)
      total += float(jnp.sum(bounds))
      now = time.perf_counter()
      if label and now - last_report > self.report_every_seconds:
        done = start + len(x)
        rate = done / (now - t0)
        logging.info("evaluating %s (M=%d): %d/%d images, %.1f images/s, ETA %.0fs",
                     label, num_samples, done, len(images), rate, (len(images) - done) / rate)
        last_report = now
    return -total / len(images)


def _eval_subset(images: np.ndarray, count: int, seed: int) -> np.ndarray:
  """All images, or a fixed random subset (the splits are sorted by class)."""
  if count < 0 or count >= len(images):
    return images
  return images[np.random.default_rng(seed).permutation(len(images))[:count]]


def train_and_evaluate(config: ConfigDict, workdir: str) -> dict:
  """Trains the discrete VAE (resuming from workdir's latest checkpoint) and evaluates it.

  SGD with momentum on the single-sample bound for ``num_steps`` steps; every
  ``variance_every`` / ``mse_every`` steps the encoder gradient's variance (and
  MSE against REINFORCE) on a fixed batch; every ``eval_every`` steps a cheap
  validation bound; at the end the IWAE bound with ``num_eval_samples`` on the
  validation and test sets.

  Returns:
    The results written to ``workdir/results.json``.
  """
  estimator = validate(config)
  data = load_data(config)
  path = common.prepare_workdir(workdir, config)
  finished = common.finished_results(path, config.num_steps)
  if finished is not None:
    return finished
  trainer = Trainer(config, estimator)
  batches = common.EpochBatches(len(data["train"]), config.batch_size, config.seed)
  stop = common.StopSignals()  # from here on, SIGINT / SIGTERM stop with a checkpoint
  checkpointer, writer, state, start = common.start_or_resume(path, trainer.init_state())
  root_key = jax.random.key(config.seed)
  train_key, eval_key, variance_key, final_key = (jax.random.fold_in(root_key, i) for i in range(1, 5))
  valid = _eval_subset(data["valid"], config.num_eval_examples, config.seed)
  test = _eval_subset(data["test"], config.num_eval_examples, config.seed)
  fixed_rows = common.EpochBatches(len(data["train"]), config.batch_size, config.seed + 1).indices(0)
  fixed_batch = jnp.asarray(data["train"][fixed_rows], jnp.float32)
  progress = common.ProgressLogger(start, config.num_steps)
  for step in range(start + 1, config.num_steps + 1):
    if stop.requested:
      stop.stop(checkpointer, writer, step - 1, state)
    x = jnp.asarray(data["train"][batches.indices(step - 1)], jnp.float32)
    state, bound = trainer.train_step(state, x, jax.random.fold_in(train_key, step), step)
    if (config.log_every and step % config.log_every == 0) or step == config.num_steps:
      progress.log(step, train_bound=float(bound))
      writer.write(step, "train", bound=float(bound), epoch=step / batches.steps_per_epoch,
                   tau=float(trainer.tau_at(step)))
    measure_variance = config.variance_every and step % config.variance_every == 0
    measure_mse = config.mse_every and step % config.mse_every == 0
    if measure_variance or measure_mse:
      t0 = time.perf_counter()
      logging.info("step %d: measuring the encoder gradient's variance%s (%d draws)", step,
                   " and MSE" if measure_mse else "", config.variance_draws)
      args = (state["params"], fixed_batch, jax.random.fold_in(variance_key, step), state["baseline"].mean)
      stats = trainer.encoder_grad_stats(*args, False, step)
      metrics = {"log10_grad_variance": diagnostics.log10(stats.trace_variance)}
      if measure_mse:
        # The paper's Figure 2b: MSE against a high-sample REINFORCE reference.
        ref = trainer.encoder_grad_stats(*args[:2], jax.random.fold_in(variance_key, -step % 2**31), args[3], True, step)
        metrics["log10_grad_mse"] = diagnostics.log10(stats.mse(ref.mean, ref.trace_variance / ref.num_draws))
        metrics["log10_grad_squared_bias"] = diagnostics.log10(stats.squared_bias(ref.mean, ref.trace_variance / ref.num_draws))
      writer.write(step, "train", **metrics)
      logging.info("step %d: %s (%.0fs)", step, " ".join(f"{k}={v:.3f}" for k, v in metrics.items()),
                   time.perf_counter() - t0)
    if config.eval_every and step % config.eval_every == 0 and step != config.num_steps:
      t0 = time.perf_counter()
      nll = trainer.evaluate(state["params"], valid, jax.random.fold_in(eval_key, step), config.periodic_eval_samples,
                             "valid")
      # The IWAE cost is linear in images x M: extrapolate the final evaluation's.
      seconds_per_unit = (time.perf_counter() - t0) / (len(valid) * config.periodic_eval_samples)
      progress.final_seconds = seconds_per_unit * (len(valid) + len(test)) * config.num_eval_samples
      writer.write(step, "valid", nll=nll, num_samples=config.periodic_eval_samples)
      logging.info("step %d valid nll (M=%d) %.3f", step, config.periodic_eval_samples, nll)
    if config.checkpoint_every and step % config.checkpoint_every == 0:
      checkpointer.save(step, state)
  stop.restore()  # Ctrl-C during the final evaluation stops at once
  checkpointer.save(config.num_steps, state)
  logging.info("final evaluation: IWAE bound with M=%d on %d valid and %d test images",
               config.num_eval_samples, len(valid), len(test))
  t0 = time.perf_counter()
  results = {
      "valid_nll": trainer.evaluate(state["params"], valid, jax.random.fold_in(final_key, 0), config.num_eval_samples,
                                    "valid"),
      "test_nll": trainer.evaluate(state["params"], test, jax.random.fold_in(final_key, 1), config.num_eval_samples,
                                   "test"),
  }
  eval_seconds = time.perf_counter() - t0
  for split in ("valid", "test"):
    writer.write(config.num_steps, split, nll=results[f"{split}_nll"], num_samples=config.num_eval_samples)
  results.update(
      steps=config.num_steps,
      estimator=config.estimator,
      tau=config.tau,
      tau_schedule=config.tau_schedule,
      final_tau=float(trainer.tau_at(config.num_steps)),
      batch_size=config.batch_size,
      seed=config.seed,
      num_eval_samples=config.num_eval_samples,
      num_eval_examples=len(test),
      final_eval_seconds=eval_seconds,
  )
  common.write_json_atomic(path / "results.json", results)
  logging.info("results: %s", results)
  writer.close()
  checkpointer.close()
  return results
