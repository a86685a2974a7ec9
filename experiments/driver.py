"""One driver for the population experiments (the VAE, ListOps): what every run does in order.

Check the config, choose the members, split them over the CPU's cores, load the
data, open (or resume) the workdir, train the population with the experiment's
evaluators, evaluate and report: :func:`train_and_evaluate`. An experiment is a
:class:`PopulationExperiment`: its tables (hyperparameters, fields a restart
may change, the selection) and the steps that are its own.
"""

from __future__ import annotations

import os
from typing import Any, ClassVar, Sequence

import jax
from ml_collections import ConfigDict

from experiments import (
  config_checks,
  distributed,
  population,
  reporting,
  schedules,
  search,
  workdir,
)
from experiments.evaluators import Evaluator


class PopulationExperiment:
  """An experiment that :func:`train_and_evaluate` runs; one instance per run (its config).

  Subclasses set the class attributes and implement the methods below; the
  driver calls them in this order: :meth:`validate`, :meth:`paper_search` (for
  each member of a paper search), :meth:`load_data`, :meth:`num_steps`,
  :meth:`task`, :meth:`evaluators`, then :meth:`report` after training.
  """

  # The hyperparameters its members may differ in (names of search.HYPERPARAMETERS).
  HYPERPARAMETERS: ClassVar[tuple[str, ...]]
  # Fields a restart may change (workdir.SAFE_TO_CHANGE and the experiment's own).
  SAFE_TO_CHANGE: ClassVar[frozenset[str]] = workdir.SAFE_TO_CHANGE
  # Fields added to the config after runs were saved without them: field -> the values that train
  # what those runs trained (workdir.prepare_workdir).
  ADDED_FIELDS: ClassVar[dict[str, tuple]] = {"population.seeds_per_draw": (1,)}
  # Fields of the final evaluation (a finished run names them when they change).
  EVALUATION_FIELDS: ClassVar[tuple[str, ...]] = ()
  # Model selection: (the members' result compared, "min" or "max").
  SELECTION: ClassVar[tuple[str, str]]
  # results.json's per-member columns in summary.md, and the two the results line shows.
  COLUMNS: ClassVar[tuple[str, ...]]
  SHOWN: ClassVar[tuple[str, str]]
  # The train metrics the progress lines show; the TensorBoard tags of the HParams table.
  LOG_NAMES: ClassVar[tuple[str, ...]] = ()
  METRIC_TAGS: ClassVar[tuple[str, ...]] = ()

  def __init__(self, config: ConfigDict):
    self.config = config

  def validate(self) -> Any:
    """Checks the config before any compute (ConfigError names the field); returns the
    estimator."""
    raise NotImplementedError

  @staticmethod
  def paper_search(index: int, search_seed: int, config: ConfigDict) -> tuple[int, dict]:
    """Member ``index`` of the paper's search: its seed and hyperparameters."""
    raise NotImplementedError

  def load_data(self) -> tuple[Any, dict[str, str]]:
    """The data, and where each split came from (config.json's ``data_used``)."""
    raise NotImplementedError

  def num_steps(self, data) -> int:
    return self.config.num_steps

  def task(self, estimator, data) -> population.Task:
    """What the loop trains: the members' pure functions and the training data."""
    raise NotImplementedError

  def evaluators(self, trainer: population.Trainer, run: population.Run) -> Sequence[Evaluator]:
    """The periodic measurements (built once the loop has resumed)."""
    return ()

  def report(
    self, trainer: population.Trainer, run: population.Run, state: dict
  ) -> tuple[list[dict], dict]:
    """After training: the members' reports (reporting.member_report) and results.json's
    experiment-specific fields."""
    raise NotImplementedError


def cpu_devices_for(num_members: int, cores: int) -> int:
  """The most CPU devices, at most one per core, over which ``num_members`` divide evenly."""
  return max(d for d in range(1, min(cores, num_members) + 1) if num_members % d == 0)


def use_cpu_cores(config: ConfigDict, num_members: int) -> None:
  """With ``population.vectorize="auto"``, splits a job's members over CPU devices, one per core.

  XLA's CPU backend runs the programs of its devices at the same time, while the
  members of one device run one after another (``lax.map``); with the members
  split over as many CPU devices as there are cores (the largest count that
  divides them), that many members train at once. The numbers do not change
  (each member's program is the same). Measured in docs/benchmarks.md. Must run
  before JAX initializes its backends (else nothing changes); accelerators are
  unaffected (the job runs on their devices).
  """
  forced = "xla_force_host_platform_device_count" in os.environ.get("XLA_FLAGS", "")
  if config.population.vectorize != "auto" or forced or distributed.requested():
    return
  cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
  devices = cpu_devices_for(num_members, cores)
  if devices > 1:
    try:
      jax.config.update("jax_num_cpu_devices", devices)
    except RuntimeError:  # the backends are already up (a second run in one process)
      pass


def train_and_evaluate(experiment: PopulationExperiment, workdir_path: str) -> dict:
  """Trains the experiment's population (resuming from ``workdir_path``), evaluates and reports.

  Returns:
    The results written to ``workdir_path/results.json`` (a finished run's are
    read, not redone).
  """
  config = experiment.config
  estimator = experiment.validate()
  chosen = search.members(config, experiment.HYPERPARAMETERS, experiment.paper_search)
  use_cpu_cores(config, len(chosen))
  schedules.check_schedule_floor(config, chosen)
  data, sources = experiment.load_data()
  require_examples(data, sources)
  num_steps = experiment.num_steps(data)
  path, finished = workdir.prepare_workdir(
    workdir_path,
    config,
    experiment.SAFE_TO_CHANGE,
    added_fields=experiment.ADDED_FIELDS,
    data_used=sources,
    steps=num_steps,
    evaluation_fields=experiment.EVALUATION_FIELDS,
  )
  if finished is not None:
    _require_a_trained_member(finished)
    return finished
  trainer = population.Trainer(
    experiment.task(estimator, data), chosen, config.population.vectorize
  )
  run = population.Run(
    trainer,
    path,
    population.Schedule.from_config(config),
    config.to_dict(),
    log_names=experiment.LOG_NAMES,
    metric_tags=experiment.METRIC_TAGS,
  )
  state = run.train(experiment.evaluators(trainer, run))
  reports, results = experiment.report(trainer, run, state)
  run.stop.ignore()  # results.json is written next: a later signal leaves the run finished
  results = reporting.finish(
    path,
    config,
    reports,
    *experiment.SELECTION,
    {
      "steps": num_steps,
      "trained_steps": run.last_step,
      **run.record(),
      "estimator": config.estimator,
      "tau_schedule": config.tau_schedule,
      "batch_size": config.batch_size,
      **results,
    },
    columns=experiment.COLUMNS,
  )
  reporting.log_selection(results, experiment.SELECTION[0], experiment.SHOWN)
  run.close()
  _require_a_trained_member(results)
  return results


def require_examples(data, sources: dict[str, str]) -> None:
  """Refuses (one line, before training) a split without examples: a run would train on nothing,
  or report a NaN bound or select on nothing."""
  for split in ("train", "valid", "test"):
    rows = data[split] if isinstance(data, dict) else getattr(data, split)
    if len(rows) == 0:
      raise config_checks.ConfigError(
        f"the {split} split holds no examples (read from {sources.get(split, 'the dataset')}):"
        " point config.data_dir at a complete copy of the dataset."
      )


def _require_a_trained_member(results: dict) -> None:
  """Raises reporting.NoMemberTrained when every member diverged (a nonzero exit, not a result)."""
  failure = reporting.no_member_trained(results)
  if failure is not None:
    raise failure
