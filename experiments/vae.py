"""Discrete VAE on binarized MNIST (Paulus et al. 2021, section 5.3, Tables 2-3, Figure 2).

Training maximizes the single-sample bound log p(x, D) - log q(D | x) with the
configured estimator (REINFORCE adds its score-function surrogate with a
running-mean baseline); evaluation is the importance-weighted bound with exact
discrete samples. The experiment gives :mod:`experiments.population` its pure
functions (``VAETask``) and its evaluators (``EVALUATORS``); a run is a
population of one or more members (the paper's random search:
``population.search="paper"``), resumed from its latest checkpoint.
"""

from __future__ import annotations

import json
import pathlib
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
import orbax.checkpoint as ocp
from absl import logging
from flax import nnx
from ml_collections import ConfigDict

from experiments import bookkeeping, config_checks, population, reporting, rng
from experiments.evaluators import vae as vae_evaluators
from gr_jax import diagnostics, estimators
from gr_jax.data import mnist
from gr_jax.models import vae

DATASETS = ("binarized_mnist", "synthetic")
OUTPUT_BIASES = ("zeros", "data_log_odds")
CENTERINGS = ("running_average", "pixel_means", "none")
# Model selection (the paper's): the member with the lowest validation bound. The final
# evaluation and results.json must select the same member.
SELECTION = ("valid_nll", "min")


def validate(config: ConfigDict) -> estimators.Estimator:
  """Checks the config before any compute; ConfigError names the field."""
  estimator = config_checks.check_estimator(config, num_categories=config.arity)
  config_checks.check_common(config)
  population.check_population_fields(config, HYPERPARAMETERS)
  try:
    vae.log2_arity(config.arity)
  except ValueError:
    raise config_checks.ConfigError(
      f"config.arity must be a power of two >= 2 (2, 4, 8, 16); got {config.arity!r}."
    ) from None
  config_checks.require_int(config, "num_vars", minimum=1)
  config_checks.require_int(config, "num_steps", minimum=0)
  config_checks.require(0 <= config.momentum < 1, "momentum", "in [0, 1)", config.momentum)
  config_checks.require(config.dataset in DATASETS, "dataset", f"one of {DATASETS}", config.dataset)
  config_checks.require(
    config.decoder_output_bias in OUTPUT_BIASES,
    "decoder_output_bias",
    f"one of {OUTPUT_BIASES}",
    config.decoder_output_bias,
  )
  config_checks.require(
    config.center_inputs in CENTERINGS,
    "center_inputs",
    f"one of {CENTERINGS}",
    config.center_inputs,
  )
  config_checks.require(
    config_checks.is_number(config.centering_decay) and 0 <= config.centering_decay < 1,
    "centering_decay",
    "a number in [0, 1)",
    config.centering_decay,
  )
  for field, allowed in (
    ("activation", vae.ACTIVATIONS),
    ("kernel_init", vae.KERNEL_INITS),
    ("prior", vae.PRIORS),
  ):
    config_checks.require(
      config[field] in allowed, field, f"one of {tuple(allowed)}", config[field]
    )
  config_checks.require_int(
    config,
    "eval_every",
    "checkpoint_every",
    "variance_every",
    "mse_every",
    "log_every",
    minimum=0,
    allowed="an int >= 0 (0 = off)",
  )
  config_checks.require_int(
    config,
    "num_eval_samples",
    "periodic_eval_samples",
    "eval_batch_size",
    "iwae_chunk_size",
    minimum=1,
  )
  config_checks.require_int(config, "variance_draws", "mse_reference_draws", minimum=2)
  config_checks.require_int(
    config, "selection_eval_samples", minimum=0, allowed="an int >= 0 (0 = num_eval_samples)"
  )
  config_checks.require(
    isinstance(config.num_eval_examples, int) and config.num_eval_examples != 0,
    "num_eval_examples",
    "-1 (all) or an int >= 1",
    config.num_eval_examples,
  )
  return estimator


def load_data(config: ConfigDict) -> tuple[dict[str, np.ndarray], str]:
  """The binarized MNIST splits and where they were found."""
  data, source = mnist.load_with_source(
    config.data_dir or None,
    download=config.download,
    synthetic_data=config.dataset == "synthetic",
  )
  config_checks.require_batch_fits(config, len(data["train"]), "training images")
  return data, source


PAPER_LEARNING_RATES = tuple(k * 1e-4 for k in range(5, 51))  # {5, 6, ..., 50} x 1e-4
PAPER_WEIGHT_DECAYS = (0.0, 1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6)
# Fields a restart may change: intervals and costs of the measurements, where the data is read,
# and the final evaluation (EVALUATION_FIELDS: they change what is measured, never the training).
EVALUATION_FIELDS = ("num_eval_samples", "num_eval_examples", "selection_eval_samples")
SAFE_TO_CHANGE = bookkeeping.SAFE_TO_CHANGE | {
  "eval_every",
  "variance_every",
  "mse_every",
  "variance_draws",
  "mse_reference_draws",
  "periodic_eval_samples",
  "eval_batch_size",
  "iwae_chunk_size",
  "data_dir",
  "download",
  *EVALUATION_FIELDS,
}
HYPERPARAMETERS = population.HYPERPARAMETERS  # the VAE searches all four
# The periodic measurements, each switched on by its config field (see experiments.evaluators).
EVALUATORS = (vae_evaluators.GradientMeasurements, vae_evaluators.ValidationBound)


def paper_search(index: int, search_seed: int, config: ConfigDict) -> tuple[int, dict[str, float]]:
  """Member ``index`` of the paper's random search (appendix D.2): its seed and draws.

  Learning rate from {5, 6, ..., 50} x 1e-4, momentum uniform in (0, 1),
  weight decay from {0, 1e-1, ..., 1e-6}, tau uniform in [0.1, 1]; each member
  draws from its own generator (search_seed, index), so slices of a job array
  draw what one job would.
  """
  rng = np.random.default_rng([search_seed, index])
  drawn = {
    "learning_rate": float(rng.choice(PAPER_LEARNING_RATES)),
    "momentum": float(rng.uniform(0.0, 1.0)),
    "weight_decay": float(rng.choice(PAPER_WEIGHT_DECAYS)),
    "tau": float(rng.uniform(0.1, 1.0)),
  }
  return config.seed + index, drawn


def make_model(config: ConfigDict, rngs: nnx.Rngs) -> vae.DiscreteVAE:
  return vae.DiscreteVAE(
    config.num_vars,
    config.arity,
    encoder_widths=tuple(config.encoder_widths),
    decoder_widths=tuple(config.decoder_widths),
    activation=config.activation,
    kernel_init=config.kernel_init,
    prior=config.prior,
    rngs=rngs,
  )


@optax.inject_hyperparams
def make_optimizer(learning_rate, momentum, weight_decay) -> optax.GradientTransformation:
  """SGD with momentum and weight decay; the hyperparameters live in the optimizer state (data)."""
  return optax.chain(
    optax.add_decayed_weights(weight_decay), optax.sgd(learning_rate, momentum=momentum)
  )


def _optimizer_hyperparameters(hyperparameters: dict) -> dict:
  return {k: hyperparameters[k] for k in ("learning_rate", "momentum", "weight_decay")}


class VAETask:
  """The VAE's pure functions of one member, for :class:`experiments.population.Trainer`.

  ``pixel_means`` (the training images' per-pixel means, ``[784]``) feed
  ``decoder_output_bias="data_log_odds"`` (the decoder's output bias starts at
  the pixels' log-odds, Maddison et al. 2017, appendix D.3) and
  ``center_inputs="pixel_means"``. The encoder sees x minus the member's
  ``input_mean``: with ``center_inputs="running_average"`` (their appendix D.4)
  an exponentially decaying average of the training minibatches' means (rate
  ``centering_decay``, starting at 0), updated after each step's use and frozen
  in evaluation; with ``"pixel_means"`` the fixed training means; with
  ``"none"`` zeros.
  """

  def __init__(
    self, config: ConfigDict, estimator: estimators.Estimator, pixel_means: np.ndarray | None = None
  ):
    self.config, self.estimator = config, estimator
    if pixel_means is None:
      pixel_means = np.full(784, 0.5, np.float32)
    means = np.clip(np.asarray(pixel_means, np.float64), 1e-3, 1 - 1e-3)
    self.output_bias = jnp.asarray(np.log(means) - np.log1p(-means), jnp.float32)
    self.initial_input_mean = jnp.asarray(
      pixel_means if config.center_inputs == "pixel_means" else np.zeros(784), jnp.float32
    )
    self.graphdef = nnx.graphdef(make_model(config, nnx.Rngs(0)))
    self.baseline = estimators.RunningMeanBaseline(decay=config.baseline_decay)
    self.tau_at = population.tau_schedule(config)
    self.reinforce = estimators.get("reinforce")
    # Only the optimizer's update rule is used: the hyperparameters come from its state.
    self.optimizer = make_optimizer(learning_rate=0.0, momentum=0.0, weight_decay=0.0)

  def model(self, params) -> vae.DiscreteVAE:
    return nnx.merge(self.graphdef, params)

  def init_member(self, key, hyperparameters, seed):
    del seed
    params = nnx.to_pure_dict(nnx.state(make_model(self.config, nnx.Rngs(key))))
    if self.config.decoder_output_bias == "data_log_odds":
      last = max(params["decoder"]["layers"])
      params["decoder"]["layers"][last]["bias"] = self.output_bias
    return {
      "params": params,
      "opt_state": make_optimizer(**_optimizer_hyperparameters(hyperparameters)).init(params),
      "baseline": self.baseline.init(),
      "input_mean": self.initial_input_mean,
    }

  def loss(self, params, x, key, baseline_mean, tau, input_mean, estimator=None):
    estimator = estimator or self.estimator
    bound, log_q, kl = vae.single_sample_bound(
      self.model(params), x, key, estimator, tau, input_mean
    )
    loss = -jnp.mean(bound)
    objective = loss
    if estimator.score_function:
      objective = loss + jnp.mean(estimators.score_function_surrogate(log_q, -bound, baseline_mean))
    return objective, (bound, kl)

  def train_step(self, member, hyperparameters, batch, key, step):
    tau = self.tau_at(hyperparameters["tau"], step)
    x = batch.astype(jnp.float32)
    grads, (bound, kl) = jax.grad(self.loss, has_aux=True)(
      member["params"], x, key, member["baseline"].mean, tau, member["input_mean"]
    )
    updates, opt_state = self.optimizer.update(grads, member["opt_state"], member["params"])
    input_mean = member["input_mean"]
    if self.config.center_inputs == "running_average":
      decay = self.config.centering_decay
      input_mean = decay * input_mean + (1 - decay) * jnp.mean(x, axis=0)
    new_member = {
      "params": optax.apply_updates(member["params"], updates),
      "opt_state": opt_state,
      "baseline": self.baseline.update(member["baseline"], -bound),
      "input_mean": input_mean,
    }
    return new_member, {"bound": jnp.mean(bound), "kl": jnp.mean(kl), "tau": tau}

  def iwae(self, member, seed, x, evaluation, start, num_samples):
    """IWAE bounds ``[B]`` of the images ``x``: rows ``start`` ... of ``evaluation`` (an
    rng.Evaluation, or the step of a periodic one), whose samples it draws."""
    key = jax.random.fold_in(
      jax.random.fold_in(rng.member_key(seed, rng.Stream.EVALUATION), evaluation), start
    )
    return vae.iwae_bound(
      self.model(member["params"]),
      x,
      key,
      num_samples,
      self.config.iwae_chunk_size,
      member["input_mean"],
    )

  def gradient_measurements(self, member, tau, seed, x, step, mse: bool):
    """log10 trace Cov of the encoder gradient over draws (and its MSE to REINFORCE) on ``x``."""
    tau = self.tau_at(tau, step)
    key = jax.random.fold_in(rng.member_key(seed, rng.Stream.GRADIENT_STATISTICS), step)

    def stats(estimator, draws, stats_key):
      def encoder_grad(draw_key):
        return jax.grad(self.loss, has_aux=True)(
          member["params"],
          x,
          draw_key,
          member["baseline"].mean,
          tau,
          member["input_mean"],
          estimator,
        )[0]["encoder"]

      chunk = max(d for d in range(1, min(draws, 25) + 1) if draws % d == 0)
      return diagnostics.gradient_stats(encoder_grad, stats_key, draws, chunk_size=chunk)

    ours = stats(self.estimator, self.config.variance_draws, key)
    out = {"log10_grad_variance": jnp.log10(ours.trace_variance)}
    if mse:
      # The paper's Figure 2b: MSE against a high-sample REINFORCE reference.
      ref = stats(self.reinforce, self.config.mse_reference_draws, jax.random.fold_in(key, 1))
      out["log10_grad_mse"] = jnp.log10(ours.mse(ref.mean, ref.trace_variance / ref.num_draws))
      out["log10_grad_squared_bias"] = jnp.log10(
        ours.squared_bias(ref.mean, ref.trace_variance / ref.num_draws)
      )
    return out


class Scorer:
  """The members' IWAE bounds and gradient measurements (jitted over the population)."""

  report_every_seconds = 30.0

  def __init__(self, task: VAETask, trainer: population.Trainer):
    self.task, self.trainer = task, trainer
    self._iwae = {}
    self._measure = {}
    self.check_stop = lambda: None  # between eval batches: raise to stop (Run.check_stop)

  def nll(
    self,
    state,
    images: np.ndarray,
    evaluation: int,
    num_samples: int,
    label: str = "",
    member: int | None = None,
  ) -> np.ndarray:
    """``[P]`` mean negative IWAE bounds (nats) over ``images``, in eval batches.

    With ``member`` (an index into the population), that member's alone, as a
    ``[1]`` array. With a ``label``, a progress line (images done, rate, ETA)
    every ``report_every_seconds`` (30).
    """
    one = member is not None
    if (num_samples, one) not in self._iwae:
      fn = lambda member, seed, x, evaluation, start: self.task.iwae(
        member, seed, x, evaluation, start, num_samples
      )
      self._iwae[num_samples, one] = jax.jit(fn if one else self.trainer.parallel(fn, shared=3))
    iwae = self._iwae[num_samples, one]
    members, seeds = state["members"], state["seed"]
    if one:
      members, seeds = jax.tree.map(lambda a: a[member], members), seeds[member]
    size = self.task.config.eval_batch_size
    count = 1 if one else self.trainer.size
    total = np.zeros(count)
    t0 = last_report = time.perf_counter()
    for start in range(0, len(images), size):
      self.check_stop()
      x = jnp.asarray(images[start : start + size], jnp.float32)
      bounds = iwae(
        members, seeds, x, jnp.asarray(evaluation, jnp.int32), jnp.asarray(start, jnp.int32)
      )
      total += population.to_host(bounds).astype(np.float64).reshape(count, -1).sum(axis=1)
      now = time.perf_counter()
      if label and now - last_report > self.report_every_seconds:
        done = start + len(x)
        rate = done / (now - t0)
        who = f"member {member}" if one else f"{count} member{'s' * (count > 1)}"
        logging.info(
          "evaluating %s (M=%d, %s): %d/%d images, %.1f images/s, ETA %.0fs",
          label,
          num_samples,
          who,
          done,
          len(images),
          rate,
          (len(images) - done) / rate,
        )
        last_report = now
    return -total / len(images)

  def gradient_measurements(self, state, x, step: int, mse: bool) -> dict[str, np.ndarray]:
    if mse not in self._measure:
      fn = lambda member, tau, seed, x, step: self.task.gradient_measurements(
        member, tau, seed, x, step, mse
      )
      self._measure[mse] = jax.jit(self.trainer.parallel(fn, shared=2))
    out = self._measure[mse](
      state["members"], state["hyperparameters"]["tau"], state["seed"], x, jnp.asarray(step)
    )
    return population.to_host(out)


def _eval_subset(images: np.ndarray, count: int, seed: int) -> np.ndarray:
  """All images, or a fixed random subset (the splits are sorted by class)."""
  if count < 0 or count >= len(images):
    return images
  return images[np.random.default_rng(seed).permutation(len(images))[:count]]


def selection_samples(config: ConfigDict) -> int:
  """The IWAE M with which every member is scored (``num_eval_samples`` unless a cheaper one is
  set)."""
  if population.population_size(config) > 1 and config.selection_eval_samples:
    return config.selection_eval_samples
  return config.num_eval_samples


def final_evaluation(config, scorer, state, chosen, valid, test, run) -> list[dict]:
  """The ``members`` reports: every member's IWAE bounds on valid and test.

  With ``selection_eval_samples`` (and several members) every member is scored
  with that M, and the one best on validation is evaluated again with
  ``num_eval_samples`` (fresh samples); its report then holds those numbers
  under ``final``, which results.json reports for the selected member.
  """
  size, samples = len(chosen), selection_samples(config)
  logging.info(
    "final evaluation: IWAE bound with M=%d on %d valid and %d test images%s",
    samples,
    len(valid),
    len(test),
    ""
    if samples == config.num_eval_samples
    else f"; then M={config.num_eval_samples} for the member selected on valid",
  )
  nll = {
    "valid": scorer.nll(state, valid, rng.Evaluation.FINAL_VALID, samples, "valid"),
    "test": scorer.nll(state, test, rng.Evaluation.FINAL_TEST, samples, "test"),
  }
  for split in ("valid", "test"):
    run.write(
      run.last_step, split, {"nll": nll[split], "num_samples": np.full(size, samples)}, final=True
    )
  diverged_at = population.to_host(state["diverged_at"])
  reports = [
    reporting.member_report(
      member,
      {
        "valid_nll": float(nll["valid"][i]),
        "test_nll": float(nll["test"][i]),
        "final_tau": float(scorer.task.tau_at(member.hyperparameters["tau"], run.last_step)),
      },
      int(diverged_at[i]),
    )
    for i, member in enumerate(chosen)
  ]
  selected = reporting.select(reports, *SELECTION)
  if samples != config.num_eval_samples and selected is not None:
    i = reports.index(selected)
    final = {"num_eval_samples": config.num_eval_samples}
    for evaluation, split, images in (
      (rng.Evaluation.SELECTED_VALID, "valid", valid),
      (rng.Evaluation.SELECTED_TEST, "test", test),
    ):
      final[f"{split}_nll"] = float(
        scorer.nll(state, images, evaluation, config.num_eval_samples, split, member=i)[0]
      )
      run.writer.write(
        run.last_step,
        split,
        member=selected["member"],
        final=True,
        nll=final[f"{split}_nll"],
        num_samples=config.num_eval_samples,
      )
    selected["final"] = final
  return reports


def train_and_evaluate(config: ConfigDict, workdir: str) -> dict:
  """Trains a population of discrete VAEs (one by default), resuming from workdir, and evaluates
  them.

  SGD with momentum on the single-sample bound for ``num_steps`` steps; every
  ``variance_every`` / ``mse_every`` steps the encoder gradient's variance (and
  MSE against REINFORCE) on a fixed batch; every ``eval_every`` steps a cheap
  validation bound; at the end the IWAE bound with ``num_eval_samples`` on the
  validation and test sets, for every member (or, with
  ``selection_eval_samples``, every member with that M and the selected one
  with ``num_eval_samples``). The member with the best validation bound is the
  reported one (the paper's model selection).

  Returns:
    The results written to ``workdir/results.json``.
  """
  estimator = validate(config)
  chosen = population.members(config, HYPERPARAMETERS, paper_search)
  population.use_cpu_cores(config, len(chosen))
  population.check_schedule_floor(config, chosen)
  data, source = load_data(config)
  path, finished = bookkeeping.prepare_workdir(
    workdir,
    config,
    SAFE_TO_CHANGE,
    data_used={split: source for split in data},
    steps=config.num_steps,
    evaluation_fields=EVALUATION_FIELDS,
  )
  if finished is not None:
    return finished
  task = VAETask(config, estimator, data["train"].mean(axis=0))
  trainer = population.Trainer(
    population.Task(
      task.init_member, task.train_step, data["train"], config.batch_size, config.num_steps
    ),
    chosen,
    config.population.vectorize,
  )
  scorer = Scorer(task, trainer)
  valid = _eval_subset(data["valid"], config.num_eval_examples, config.seed)
  test = _eval_subset(data["test"], config.num_eval_examples, config.seed)
  fixed_rows = np.random.default_rng([config.seed, 1]).permutation(len(data["train"]))[
    : config.batch_size
  ]
  fixed_batch = jnp.asarray(data["train"][fixed_rows], jnp.float32)
  run = population.Run(
    trainer,
    path,
    population.Schedule.from_config(config),
    config.to_dict(),
    log_names=("bound", "kl"),
  )

  def expect_final_evaluation(seconds, num_images, num_samples):
    """The final evaluation's time in the ETA, from an evaluation of the population that took
    ``seconds``: the IWAE cost is linear in images x M x members."""
    per_sample = seconds / (num_images * num_samples * trainer.size)
    samples = selection_samples(config)
    per_image = trainer.size * samples + (
      config.num_eval_samples if samples != config.num_eval_samples else 0
    )
    run.progress.final_seconds = per_sample * (len(valid) + len(test)) * per_image

  inputs = vae_evaluators.Inputs(scorer, valid, fixed_batch, expect_final_evaluation)
  evaluators = [evaluator(config, inputs) for evaluator in EVALUATORS]
  # One timed batch, so that the ETA counts the final evaluation from the start.
  if run.start < config.num_steps:
    probe = valid[: config.eval_batch_size]
    # The first call compiles; the second is timed.
    scorer.nll(run.state, probe, rng.Evaluation.ETA_PROBE, config.periodic_eval_samples)
    t0 = time.perf_counter()
    scorer.nll(run.state, probe, rng.Evaluation.ETA_PROBE, config.periodic_eval_samples)
    expect_final_evaluation(time.perf_counter() - t0, len(probe), config.periodic_eval_samples)
  state = run.train(evaluators)
  # SIGINT / SIGTERM during the final evaluation: stop cleanly.
  scorer.check_stop = run.check_stop
  t0 = time.perf_counter()
  reports = final_evaluation(config, scorer, state, chosen, valid, test, run)
  eval_seconds = time.perf_counter() - t0
  results = reporting.finish(
    path,
    config,
    reports,
    *SELECTION,
    {
      "steps": config.num_steps,
      "trained_steps": run.last_step,
      **run.record(),
      "estimator": config.estimator,
      "tau_schedule": config.tau_schedule,
      "batch_size": config.batch_size,
      "num_eval_samples": config.num_eval_samples,
      "selection_eval_samples": selection_samples(config),
      "num_eval_examples": len(test),
      "final_eval_seconds": eval_seconds,
    },
    columns=("valid_nll", "test_nll"),
  )
  reporting.log_selection(results, SELECTION[0], ("valid_nll", "test_nll"))
  run.close()
  return results


def saved_config(workdir: str | pathlib.Path) -> ConfigDict:
  """The config a VAE workdir was trained with (its config.json, without the data record)."""
  saved = json.loads((pathlib.Path(workdir) / "config.json").read_text())
  saved.pop("data_used", None)
  for field in ("encoder_widths", "decoder_widths"):
    if field in saved:
      saved[field] = tuple(saved[field])
  return ConfigDict(saved)


def load_trained(
  workdir: str | pathlib.Path,
  member: int = 0,
  config: ConfigDict | None = None,
  data_dir: str | None = None,
):
  """A trained member of a VAE workdir's latest checkpoint, ready to encode, decode and evaluate.

  Args:
    workdir: the run's --workdir.
    member: the population member (0 for a single run).
    config: the run's config (default: :func:`saved_config`).
    data_dir: where binarized MNIST is (default: the config's data_dir, then
      $GR_JAX_DATA); the training pixels' means centre the encoder's input.

  Returns:
    ``(config, state, task, data, step)``: ``state`` holds the member's
    ``params`` (``task.model(state["params"])`` is the :class:`DiscreteVAE`),
    REINFORCE ``baseline`` and ``input_mean``; ``data`` the MNIST splits;
    ``step`` the checkpoint's step.
  """
  workdir = pathlib.Path(workdir)
  config = config or saved_config(workdir)
  steps = sorted(int(p.name) for p in (workdir / "checkpoints").iterdir() if p.name.isdigit())
  if not steps:
    raise FileNotFoundError(f"{workdir / 'checkpoints'} holds no checkpoint: train the run first.")
  path = (workdir / "checkpoints" / str(steps[-1]) / "default").absolute()
  checkpointer = ocp.StandardCheckpointer()
  data = mnist.load(
    data_dir or config.data_dir or None, synthetic_data=config.dataset == "synthetic"
  )
  # For the encoder's input centring, if on.
  config.pixel_means = data["train"].mean(axis=0).tolist()
  task = VAETask(config, estimators.get("st_gs"), np.asarray(config.pixel_means, np.float32))
  hyperparameters = {k: jnp.float32(config[k]) for k in HYPERPARAMETERS}
  state = task.init_member(jax.random.key(0), hyperparameters, 0)
  if "members" in checkpointer.metadata(path).item_metadata.tree:
    # Only the member's parameters, baseline and input_mean are needed: read the checkpoint as
    # saved (string keys) and put the member's leaves into their structures.
    members = bookkeeping.read_checkpoint(path)["members"]
    pick = lambda tree: [np.asarray(a)[member] for a in jax.tree.leaves(tree)]
    state = {
      "params": jax.tree.unflatten(jax.tree.structure(state["params"]), pick(members["params"])),
      "baseline": state["baseline"]._replace(
        mean=jnp.asarray(pick(members["baseline"]["mean"])[0])
      ),
      "input_mean": jnp.asarray(pick(members["input_mean"])[0])
      if "input_mean" in members
      else state["input_mean"],
    }
  else:  # a single-run checkpoint written before populations (params at the top level)
    old_optimizer = optax.chain(
      optax.add_decayed_weights(config.weight_decay),
      optax.sgd(config.learning_rate, momentum=config.momentum or None),
    )
    template = {
      "params": state["params"],
      "opt_state": old_optimizer.init(state["params"]),
      "baseline": state["baseline"],
    }
    state = {**checkpointer.restore(path, template), "input_mean": state["input_mean"]}
  return config, state, task, data, steps[-1]
