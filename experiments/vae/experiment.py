"""Discrete VAE on binarized MNIST (Paulus et al. 2021, section 5.3, Tables 2-3, Figure 2).

Training maximizes the single-sample bound log p(x, D) - log q(D | x) with the
configured estimator (REINFORCE adds its score-function surrogate with a
running-mean baseline); evaluation is the importance-weighted bound with exact
discrete samples. :class:`VAEExperiment` gives the driver
(:mod:`experiments.driver`) the members' pure functions
(:class:`~experiments.vae.task.VAETask`) and the evaluation
(:mod:`experiments.vae.evaluation`); a run is a population of one or more
members (the paper's random search: ``population.search="paper"``), resumed
from its latest checkpoint.
"""

from __future__ import annotations

import time

import numpy as np
from ml_collections import ConfigDict

from experiments import config_checks, driver, population, rng, schedules, search, workdir
from experiments.vae import data, evaluation, models
from experiments.vae.task import LOSS_REDUCTIONS, OPTIMIZERS, VAETask
from gr_jax import estimators
from gr_jax.data import idx_images
from gr_jax.models import vae

OUTPUT_BIASES = ("zeros", "data_log_odds")


def validate(config: ConfigDict) -> estimators.Estimator:
  """Checks the config before any compute; ConfigError names the field."""
  estimator = config_checks.check_estimator(
    config, num_categories=config.arity, averages_draws=True
  )
  config_checks.check_common(config)
  schedules.check(config)
  search.check(config, HYPERPARAMETERS)
  config_checks.require_int(config, "num_vars", minimum=1)
  entry = models.check(config)
  if entry.any_arity:
    config_checks.require_int(config, "arity", minimum=2)
  else:
    try:
      vae.log2_arity(config.arity)
    except ValueError:
      raise config_checks.ConfigError(
        f"config.arity must be a power of two >= 2 (2, 4, 8, 16) with model {config.model!r};"
        f" got {config.arity!r}."
      ) from None
  if estimator.multi_sample and not entry.multi_sample:
    raise config_checks.ConfigError(
      f"config.estimator {config.estimator!r} samples one stochastic layer; model"
      f" {config.model!r} has two: use a single-evaluation estimator"
      f" ({', '.join(estimators.name_patterns(multi_sample=False))})."
    )
  if estimator.multi_sample and "sampled" in entry.kl_estimates:
    config_checks.require(
      config.kl_estimate == "sampled",
      "kl_estimate",
      f"'sampled' with the multi-sample estimator {config.estimator!r} (its surrogate already"
      " leaves the KL's direct gradient out)",
      config.kl_estimate,
    )
  if config.get("likelihood_gradient") == "exact":
    config_checks.require(
      estimator.straight_through,
      "estimator",
      "a one-hot, single-evaluation estimator with likelihood_gradient='exact' (its sample, held"
      " fixed, trains the decoder)",
      config.estimator,
    )
  if config.relaxed_kl == "concrete":
    config_checks.require(
      estimator.relaxed and config.kl_estimate == "sampled",
      "relaxed_kl",
      "'discrete' unless the estimator is relaxed (gs) and kl_estimate is 'sampled' (the"
      " Concrete densities are GS's own latent term)",
      config.relaxed_kl,
    )
  config_checks.require(
    config.loss_reduction in LOSS_REDUCTIONS,
    "loss_reduction",
    f"one of {LOSS_REDUCTIONS}",
    config.loss_reduction,
  )
  config_checks.require_int(config, "num_steps", minimum=0)
  data.check(config)
  config_checks.require(
    config.optimizer in OPTIMIZERS, "optimizer", f"one of {OPTIMIZERS}", config.optimizer
  )
  config_checks.require(
    config_checks.is_number(config.prior_learning_rate) and config.prior_learning_rate > 0,
    "prior_learning_rate",
    "a number > 0",
    config.prior_learning_rate,
  )
  config_checks.require(
    all(
      isinstance(m, int) and not isinstance(m, bool) and m >= 1 for m in config.extra_test_samples
    ),
    "extra_test_samples",
    "a tuple of ints >= 1 (IWAE M of further test bounds)",
    config.extra_test_samples,
  )
  config_checks.require(
    config.decoder_output_bias in OUTPUT_BIASES,
    "decoder_output_bias",
    f"one of {OUTPUT_BIASES}",
    config.decoder_output_bias,
  )
  config_checks.require(
    config_checks.is_number(config.variance_ema_decay) and 0 <= config.variance_ema_decay < 1,
    "variance_ema_decay",
    "a number in [0, 1) (0 = off; 0.999 is the DisARM code's)",
    config.variance_ema_decay,
  )
  config_checks.require(
    config_checks.is_number(config.centering_decay) and 0 <= config.centering_decay < 1,
    "centering_decay",
    "a number in [0, 1)",
    config.centering_decay,
  )
  for field, allowed in (
    ("activation", vae.ACTIVATIONS),
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


PAPER_LEARNING_RATES = tuple(k * 1e-4 for k in range(5, 51))  # {5, 6, ..., 50} x 1e-4
PAPER_WEIGHT_DECAYS = (0.0, 1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6)
# Fields a restart may change: intervals and costs of the measurements, where the data is read,
# and the final evaluation (EVALUATION_FIELDS: they change what is measured, never the training).
EVALUATION_FIELDS = (
  "num_eval_samples",
  "num_eval_examples",
  "selection_eval_samples",
  "extra_test_samples",
)
SAFE_TO_CHANGE = workdir.SAFE_TO_CHANGE | {
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
HYPERPARAMETERS = ("learning_rate", "momentum", "weight_decay", "tau")  # searched per member
# The periodic measurements, each switched on by its config field (see experiments.vae.evaluation).
EVALUATORS = (evaluation.GradientMeasurements, evaluation.ValidationBound)


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


class VAEExperiment(driver.PopulationExperiment):
  """Trains a population of discrete VAEs (one by default) and evaluates them.

  SGD with momentum on the single-sample bound for ``num_steps`` steps; every
  ``variance_every`` / ``mse_every`` steps the encoder gradient's variance (and
  MSE against REINFORCE) on a fixed batch; every ``eval_every`` steps a cheap
  validation bound; at the end the IWAE bound with ``num_eval_samples`` on the
  validation and test sets, for every member (or, with
  ``selection_eval_samples``, every member with that M and the selected one
  with ``num_eval_samples``). The member with the best validation bound is the
  reported one (the paper's model selection).
  """

  HYPERPARAMETERS = HYPERPARAMETERS
  SAFE_TO_CHANGE = SAFE_TO_CHANGE
  ADDED_FIELDS = {**driver.PopulationExperiment.ADDED_FIELDS, **models.ADDED_FIELDS}
  EVALUATION_FIELDS = EVALUATION_FIELDS
  SELECTION = evaluation.SELECTION
  COLUMNS = ("valid_nll", "test_nll")
  SHOWN = ("valid_nll", "test_nll")
  LOG_NAMES = ("neg_elbo", "kl")
  METRIC_TAGS = ("final/valid_nll", "final/test_nll", "valid/nll", "train/neg_elbo")
  paper_search = staticmethod(paper_search)

  def validate(self) -> estimators.Estimator:
    return validate(self.config)

  def load_data(self):
    loaded = data.load(self.config)
    return loaded, loaded.sources

  def task(self, estimator, loaded: data.VAEData) -> population.Task:
    config = self.config
    self.vae_task = VAETask(config, estimator, loaded.pixel_means)
    self.valid = evaluation.eval_subset(loaded.valid, config.num_eval_examples, config.seed)
    self.test = evaluation.eval_subset(loaded.test, config.num_eval_examples, config.seed)
    self.fixed_batch = data.fixed_batch(loaded, config)
    return population.Task(
      self.vae_task.init_member,
      self.vae_task.train_step,
      loaded.train,
      config.batch_size,
      config.num_steps,
      prepare_batch=(
        (lambda batch, key: idx_images.binarize_batch(key, batch)) if loaded.dynamic else None
      ),
    )

  def evaluators(self, trainer, run):
    config = self.config
    self.scorer = scorer = evaluation.Scorer(self.vae_task, trainer)
    estimate = evaluation.FinalEvaluationEstimate(config, trainer.size, self.valid, self.test, run)
    inputs = evaluation.Inputs(scorer, self.valid, self.fixed_batch, estimate)
    # One timed batch, so that the ETA counts the final evaluation from the start.
    if run.start < config.num_steps:
      probe = self.valid[: config.eval_batch_size]
      # The first call compiles; the second is timed.
      scorer.nll(run.state, probe, rng.Evaluation.ETA_PROBE, config.periodic_eval_samples)
      t0 = time.perf_counter()
      scorer.nll(run.state, probe, rng.Evaluation.ETA_PROBE, config.periodic_eval_samples)
      estimate(time.perf_counter() - t0, len(probe), config.periodic_eval_samples)
    return [evaluator(config, inputs) for evaluator in EVALUATORS]

  def report(self, trainer, run, state):
    config = self.config
    # SIGINT / SIGTERM during the final evaluation: stop cleanly.
    self.scorer.check_stop = run.check_stop
    t0 = time.perf_counter()
    reports = evaluation.final_evaluation(
      config, self.scorer, state, trainer.chosen, self.valid, self.test, run
    )
    return reports, {
      "num_eval_samples": config.num_eval_samples,
      "selection_eval_samples": evaluation.selection_samples(config),
      "num_eval_examples": len(self.test),
      "final_eval_seconds": time.perf_counter() - t0,
    }


def train_and_evaluate(config: ConfigDict, workdir_path: str) -> dict:
  """Trains and evaluates the VAE population of ``config`` in ``workdir_path`` (see
  :class:`VAEExperiment`); returns results.json's content."""
  return driver.train_and_evaluate(VAEExperiment(config), workdir_path)
