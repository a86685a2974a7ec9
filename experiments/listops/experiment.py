"""Unsupervised parsing on ListOps with a Gumbel Tree-LSTM (Paulus et al. 2021, Table 1).

The merge decisions are discrete and the loss is computed on the tree they
build, so only straight-through estimators apply
(``gr_jax.estimators.names(straight_through=True)``).
Plain SGD, weight decay 1e-4, batch size = maximum length L, a fixed number of
epochs; after every epoch the validation and test accuracies are measured
(greedy merges), and the test accuracy at the best validation epoch is the
reported result (model selection on validation only). A run is a population
(:mod:`experiments.population`): the paper's learning-rate grid times seeds is
``population.search="paper"``.
"""

from __future__ import annotations

import hashlib
import pathlib

import jax
import numpy as np
from absl import logging
from ml_collections import ConfigDict

from experiments import (
  config_checks,
  driver,
  population,
  reporting,
  schedules,
  search,
  workdir,
)
from experiments.listops import evaluators
from experiments.listops.task import INIT_FIELDS, ListOpsTask, as_arrays
from gr_jax import data as datasets
from gr_jax.data import InvalidDataError, listops
from gr_jax.models import tree_lstm

DATASETS = ("listops", "synthetic")
GENERATOR_HINT = "python -m scripts.generate_listops --out_dir=DIR"


def validate(config: ConfigDict):
  estimator = config_checks.check_estimator(config, straight_through_only=True)
  config_checks.check_common(config)
  schedules.check(config)
  search.check(config, HYPERPARAMETERS)
  config_checks.require(config.dataset in DATASETS, "dataset", f"one of {DATASETS}", config.dataset)
  config_checks.require(
    config_checks.is_seed(config.data_seed),
    "data_seed",
    config_checks.SEED_ALLOWED,
    config.data_seed,
  )
  config_checks.require_int(
    config, "max_length", minimum=2, allowed="an int >= 2 (the paper: 10, 25 or 50)"
  )
  config_checks.require_int(
    config, "num_epochs", "num_train_examples", "eval_batch_size", minimum=1
  )
  config_checks.require_int(
    config, "checkpoint_every", "log_every", minimum=0, allowed="an int >= 0 (0 = off)"
  )
  for field in INIT_FIELDS:
    config_checks.require(
      config[field] in tree_lstm.INITIALIZERS,
      field,
      f"one of {tuple(tree_lstm.INITIALIZERS)}",
      config[field],
    )
  config_checks.require(
    isinstance(config.grad_clip_norm, (int, float)) and config.grad_clip_norm >= 0,
    "grad_clip_norm",
    "a number >= 0 (0 = no clipping)",
    config.grad_clip_norm,
  )
  return estimator


def _train_lines(config: ConfigDict, test_path: pathlib.Path | None) -> tuple[list[str], str]:
  """The training TSV lines (config.train_file, else generated and cached) and where they are."""
  if config.train_file:
    path = pathlib.Path(config.train_file)
    if not path.is_file():
      raise FileNotFoundError(
        f"config.train_file {path} does not exist; write one with {GENERATOR_HINT}, or set"
        " --config.train_file='' to generate the training data at start."
      )
    return listops.read_lines(path), str(path)
  exclude = listops.expressions(test_path) if test_path else set()
  # The cache key names the file whose expressions were excluded (by content).
  excluded = hashlib.sha256(test_path.read_bytes()).hexdigest()[:12] if test_path else "none"
  cache = pathlib.Path(config.cache_dir).expanduser() / (
    f"train_n{config.num_train_examples}_seed{config.data_seed}_excluding{excluded}"
    f"_generator{listops.GENERATOR_VERSION}.tsv"
  )
  if cache.is_file():
    lines = listops.read_lines(cache)
    if len(lines) == config.num_train_examples:
      return lines, f"{cache} (a cache of generated data: delete it to generate it again)"
    logging.warning(
      "the cached training data %s holds %d lines, not %d: generating it again",
      cache,
      len(lines),
      config.num_train_examples,
    )
  logging.info(
    "generating %d ListOps training examples (seed %d)", config.num_train_examples, config.data_seed
  )
  lines = listops.generate(config.num_train_examples, config.data_seed, exclude)
  try:
    cache.parent.mkdir(parents=True, exist_ok=True)
    workdir.write_text_atomic(cache, "\n".join(lines) + "\n")
  except OSError as e:
    raise config_checks.ConfigError(
      f"config.cache_dir={config.cache_dir!r}: cannot write the generated training data"
      f" there ({e}); set --config.cache_dir to a writable directory."
    ) from None
  return lines, f"generated training data, cached in {cache}"


def load_data(config: ConfigDict) -> tuple[dict[str, list[listops.Example]], dict[str, str]]:
  """Train/valid/test examples of length <= max_length, and where each split came from."""
  if config.dataset == "synthetic":
    test = listops.generate(60, config.data_seed + 2)
    valid = listops.generate(60, config.data_seed + 1, set(test))
    train = listops.generate(config.num_train_examples, config.data_seed, set(test) | set(valid))
    splits = {"train": train, "valid": valid, "test": test}
  else:
    splits, data_dir = datasets.load(
      "listops",
      config.data_dir or None,
      cache_dir=pathlib.Path(config.cache_dir).expanduser(),
      valid_file=config.valid_file,
      test_file=config.test_file,
    )
    paths = {
      "valid": pathlib.Path(data_dir) / config.valid_file,
      "test": pathlib.Path(data_dir) / config.test_file,
    }
    splits["train"], train_source = _train_lines(config, paths["test"])
    sources = {
      **{split: str(path.resolve()) for split, path in paths.items()},
      "train": train_source,
    }
  if config.dataset == "synthetic":
    sources = {split: f"generated {split} data" for split in splits}
  data = {
    split: listops.subset(listops.parse_lines(lines, sources[split]), config.max_length)
    for split, lines in splits.items()
  }
  if (
    config.dataset == "listops" and not config.train_file and len(data["train"]) < config.batch_size
  ):
    raise config_checks.ConfigError(
      f"config.num_train_examples={config.num_train_examples} gives {len(data['train'])} training"
      " examples of"
      f" length <= {config.max_length}, fewer than one batch ({config.batch_size}): raise"
      " num_train_examples"
      " (the paper's training set: 90000)."
    )
  for split in ("valid", "test"):
    if not data[split]:
      raise InvalidDataError(
        f"{sources[split]}: no {split} example of length <= {config.max_length} (the model is"
        " selected on valid and reported on test): give a file with such lines."
      )
  config_checks.require_batch_fits(
    config, len(data["train"]), f"training examples of length <= {config.max_length}"
  )
  return data, sources


PAPER_LEARNING_RATES = tuple(round(0.1 * k, 1) for k in range(1, 11))  # {0.1, 0.2, ..., 1.0}
# Fields a restart may change: the evaluation batch and where the data is read or cached.
SAFE_TO_CHANGE = workdir.SAFE_TO_CHANGE | {"eval_batch_size", "data_dir", "cache_dir"}
HYPERPARAMETERS = ("learning_rate", "weight_decay", "tau")
# The periodic measurements (see experiments.evaluators).
EVALUATORS = (evaluators.EpochAccuracy,)


def paper_search(index: int, search_seed: int, config: ConfigDict) -> tuple[int, dict[str, float]]:
  """Member ``index`` of the paper's ListOps protocol (appendix D.3): its learning-rate grid times
  seeds.

  Member i trains with learning rate {0.1, ..., 1.0}[i mod 10] and seed
  config.seed + i // 10 (a population of 50 is the grid times 5 seeds).
  """
  del search_seed  # a grid: nothing is drawn
  return config.seed + index // len(PAPER_LEARNING_RATES), {
    "learning_rate": PAPER_LEARNING_RATES[index % len(PAPER_LEARNING_RATES)]
  }


class ListOpsExperiment(driver.PopulationExperiment):
  """Trains a population of Gumbel Tree-LSTMs (one by default) on ListOps, selecting on validation.

  Plain SGD for ``num_epochs`` epochs of ``batch_size`` examples of length <=
  ``max_length``; after each epoch the greedy-parse accuracy of every member on
  the validation and test sets is logged and a checkpoint saved. A member whose
  loss is not finite is frozen (its best epoch so far stands, its
  ``diverged_at_step`` is recorded); the others go on. Each member reports the
  test accuracy of its best validation epoch, and the population reports the
  member with the best validation accuracy (model selection on validation only).
  """

  HYPERPARAMETERS = HYPERPARAMETERS
  SAFE_TO_CHANGE = SAFE_TO_CHANGE
  SELECTION = ("valid_accuracy", "max")
  COLUMNS = ("valid_accuracy", "test_accuracy", "best_epoch")
  SHOWN = ("valid_accuracy", "test_accuracy")
  LOG_NAMES = ("loss", "accuracy")
  METRIC_TAGS = ("valid/accuracy", "test/accuracy", "train/loss")
  paper_search = staticmethod(paper_search)

  def validate(self):
    return validate(self.config)

  def load_data(self):
    return load_data(self.config)

  def num_steps(self, data) -> int:
    self.steps_per_epoch = len(data["train"]) // self.config.batch_size
    return self.config.num_epochs * self.steps_per_epoch

  def task(self, estimator, data) -> population.Task:
    config = self.config
    self.encoded = {
      split: listops.encode(examples, config.max_length) for split, examples in data.items()
    }
    self.listops_task = ListOpsTask(config, estimator)
    train = self.encoded["train"]
    return population.Task(
      self.listops_task.init_member,
      self.listops_task.train_step,
      as_arrays(train),
      config.batch_size,
      self.config.num_epochs * self.steps_per_epoch,
      self.listops_task.records,
    )

  def evaluators(self, trainer, run):
    config, encoded = self.config, self.encoded
    logging.info(
      "%d train / %d valid / %d test examples with L <= %d; %d steps",
      len(encoded["train"].labels),
      len(encoded["valid"].labels),
      len(encoded["test"].labels),
      config.max_length,
      trainer.task.num_steps,
    )
    predict = jax.jit(trainer.parallel(self.listops_task.predict, shared=2))

    def correct(params, batch: listops.Batch) -> np.ndarray:
      """``[P]`` greedy parses classified correctly over a split, in fixed-size (padded)
      batches."""
      size = config.eval_batch_size
      counts = np.zeros(trainer.size, np.int64)
      for start in range(0, len(batch.labels), size):
        rows = np.arange(start, start + size) % len(batch.labels)  # pad by wrapping
        predictions = population.to_host(predict(params, batch.tokens[rows], batch.lengths[rows]))
        count = min(size, len(batch.labels) - start)
        counts += np.sum(predictions[:, :count] == batch.labels[rows][:count], axis=1)
      return counts

    inputs = evaluators.Inputs(correct, encoded["valid"], encoded["test"], self.steps_per_epoch)
    return [evaluator(config, inputs) for evaluator in EVALUATORS]

  def report(self, trainer, run, state):
    config, encoded = self.config, self.encoded
    num_valid, num_test = len(encoded["valid"].labels), len(encoded["test"].labels)
    records = population.to_host(state["records"])
    diverged_at = population.to_host(state["diverged_at"])
    reports = []
    for i, member in enumerate(trainer.chosen):
      best_valid, best_test = max(0, int(records["best_valid"][i])), int(records["best_test"][i])
      reports.append(
        reporting.member_report(
          member,
          {
            "valid_accuracy": best_valid / num_valid,
            "test_accuracy": best_test / num_test,
            "valid_correct": f"{best_valid}/{num_valid}",
            "test_correct": f"{best_test}/{num_test}",
            "best_epoch": int(records["best_epoch"][i]),
            "final_tau": float(
              self.listops_task.tau_at(member.hyperparameters["tau"], trainer.task.num_steps)
            ),
          },
          int(diverged_at[i]),
        )
      )
    return reports, {
      "num_epochs": config.num_epochs,
      "max_length": config.max_length,
      "grad_clip_norm": config.grad_clip_norm,
      "num_train_examples_requested": config.num_train_examples,
      "num_train_examples": len(encoded["train"].labels),  # kept: length <= max_length
    }


def train_and_evaluate(config: ConfigDict, workdir_path: str) -> dict:
  """Trains and evaluates the ListOps population of ``config`` in ``workdir_path`` (see
  :class:`ListOpsExperiment`); returns results.json's content."""
  return driver.train_and_evaluate(ListOpsExperiment(config), workdir_path)
