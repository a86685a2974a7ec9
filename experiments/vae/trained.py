"""A trained VAE workdir read back: its config and a member's model (for notebooks and scripts)."""

from __future__ import annotations

import json
import logging as python_logging
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import optax
import orbax.checkpoint as ocp
from ml_collections import ConfigDict

from experiments import checkpoints, search
from experiments.vae import data as vae_data
from experiments.vae.experiment import HYPERPARAMETERS, paper_search
from experiments.vae.models import ADDED_FIELDS, MODELS
from experiments.vae.task import VAETask
from gr_jax import estimators

_ROOT = pathlib.Path(__file__).resolve().parents[2]
# Tuple-valued fields (JSON stores lists; ConfigDict fields of tuples take tuples).
_TUPLES = (
  "encoder_widths",
  "decoder_widths",
  "upper_encoder_widths",
  "upper_decoder_widths",
  "extra_test_samples",
)


def saved_config(workdir: str | pathlib.Path) -> ConfigDict:
  """The config a VAE workdir was trained with (its config.json, without the data record).

  Raises:
    ValueError: the workdir holds another experiment's run (one line).
    FileNotFoundError: no config.json (one line).
  """
  path = pathlib.Path(workdir) / "config.json"
  if not path.is_file():
    raise FileNotFoundError(f"{path} does not exist: {workdir} holds no run.")
  saved = json.loads(path.read_text())
  if saved.get("experiment") != "vae":
    raise ValueError(
      f"{workdir} holds a {saved.get('experiment')} run; load_trained reads VAE runs."
    )
  saved.pop("data_used", None)
  if "kernel_init" not in saved:  # saved before the Concrete model: the ReLU 784-512-256 one
    saved = {**MODELS["relu_mlp"].required, **saved, "model": "relu_mlp"}
  if isinstance(saved.get("center_inputs"), bool):  # the earlier switch: True = the pixel means
    saved["center_inputs"] = "pixel_means" if saved["center_inputs"] else "none"
  # Fields added after the run was saved: the first value each lists trains what it trained
  # (model: the one-layer "concrete", saved before models had names).
  for field, values in ADDED_FIELDS.items():
    saved.setdefault(field, values[0])
  saved.setdefault("extra_test_samples", [])
  for field in _TUPLES:
    if field in saved:
      saved[field] = tuple(saved[field])
  for field, values in saved.get("population", {}).items():
    if isinstance(values, list):
      saved["population"][field] = tuple(values)
  return ConfigDict(saved)


def _recorded_data_dir(workdir: pathlib.Path) -> str | None:
  """The directory the run read its training data from (config.json's ``data_used``), when it
  still exists: as recorded (absolute since this was recorded so), or relative to the clone (where
  the README's commands run)."""
  recorded = json.loads((workdir / "config.json").read_text()).get("data_used", {}).get("train")
  if not recorded:
    return None
  for candidate in (pathlib.Path(recorded), _ROOT / recorded):
    if candidate.is_dir():
      return str(candidate.resolve())
  return None


def _local_index(config: ConfigDict, member: int) -> int:
  """The position in this workdir's slice of population member ``member``.

  Raises:
    ValueError: the workdir does not hold that member (one line naming those it holds).
  """
  held = [m.index for m in search.members(config, HYPERPARAMETERS, paper_search)]
  if isinstance(member, bool) or not isinstance(member, int) or member not in held:
    pop = config.population
    where = (
      f" (slice {pop.shard_index} of {pop.num_shards} of a population of"
      f" {search.population_size(config)})"
      if pop.num_shards > 1
      else ""
    )
    span = f"{held[0]}-{held[-1]}" if len(held) > 1 else f"{held[0]}"
    raise ValueError(
      f"member={member!r}: this workdir holds population members {span}{where}; member is the"
      " population's index (results.json's 'member')."
    )
  return held.index(member)


class _Quiet(python_logging.Filter):
  """Drops orbax's log records while a checkpoint is read (its warnings, restore tracebacks)."""

  def filter(self, record: python_logging.LogRecord) -> bool:
    return "orbax" not in record.pathname


def load_trained(
  workdir: str | pathlib.Path,
  member: int = 0,
  config: ConfigDict | None = None,
  data_dir: str | None = None,
):
  """A trained member of a VAE workdir's latest checkpoint, ready to encode, decode and evaluate.

  Args:
    workdir: the run's --workdir.
    member: the population member, as results.json and summary.md number it
      (0 for a single run; a job-array slice holds some members only).
    config: the run's config (default: :func:`saved_config`).
    data_dir: where the run's dataset is. Default: where the run read it
      (config.json's ``data_used``), then the config's data_dir, $GR_JAX_DATA,
      the cache and (the config's ``download``) a download.

  Returns:
    ``(config, state, task, data, step)``: ``state`` holds the member's
    ``params`` (``task.model(state["params"])`` is the model), REINFORCE
    ``baseline`` and ``input_mean`` (the inference inputs' centring); ``data``
    the splits as the run used them (``{"train", "valid", "test"}``, uint8;
    the validation and test images binary); ``step`` the checkpoint's step (the
    newest that reads: a damaged one is passed over).

  Raises:
    ValueError: another experiment's workdir, or a member it does not hold.
    FileNotFoundError: no config.json, no checkpoint, or no data.
  """
  workdir = pathlib.Path(workdir)
  config = config or saved_config(workdir)
  local = _local_index(config, member)
  directory = workdir / "checkpoints"
  steps = sorted(
    (int(p.name) for p in directory.iterdir() if p.name.isdigit()) if directory.is_dir() else (),
    reverse=True,
  )
  if not steps:
    raise FileNotFoundError(f"{directory} holds no checkpoint: train the run first.")
  config.data_dir = data_dir or _recorded_data_dir(workdir) or config.data_dir
  loaded = vae_data.load(config)
  splits = {"train": loaded.train, "valid": loaded.valid, "test": loaded.test}
  config.pixel_means = loaded.pixel_means.tolist()  # for tasks built from this config
  task = VAETask(config, estimators.get("st_gs"), loaded.pixel_means)
  hyperparameters = {k: jnp.float32(config[k]) for k in HYPERPARAMETERS}
  template = task.init_member(jax.random.key(0), hyperparameters, 0)
  quiet = _Quiet()
  python_logging.getLogger().addFilter(quiet)
  for handler in python_logging.getLogger().handlers:
    handler.addFilter(quiet)
  try:
    for step in steps:
      path = (directory / str(step) / "default").absolute()
      try:
        return config, _read_member(path, template, local, config), task, splits, step
      except Exception as e:  # noqa: BLE001 - orbax raises many kinds for damaged files
        if step == steps[-1]:
          raise FileNotFoundError(
            f"no checkpoint in {directory} reads (the oldest, step {step}:"
            f" {type(e).__name__}: {str(e).strip().splitlines()[0][:200]})."
          ) from None
  finally:
    python_logging.getLogger().removeFilter(quiet)
    for handler in python_logging.getLogger().handlers:
      handler.removeFilter(quiet)


def _read_member(path: pathlib.Path, template: dict, local: int, config: ConfigDict) -> dict:
  """The member's params, baseline and input centring from one checkpoint."""
  checkpointer = ocp.StandardCheckpointer()
  if "members" in checkpointer.metadata(path).item_metadata.tree:
    # Only the member's parameters, baseline and centring are needed: read the checkpoint as
    # saved (string keys) and put the member's leaves into their structures.
    members = checkpoints.read_checkpoint(path)["members"]
    pick = lambda tree: [np.asarray(a)[local] for a in jax.tree.leaves(tree)]  # noqa: E731
    structure = lambda tree: jax.tree.structure(tree)  # noqa: E731
    return {
      "params": jax.tree.unflatten(structure(template["params"]), pick(members["params"])),
      "baseline": template["baseline"]._replace(
        mean=jnp.asarray(pick(members["baseline"]["mean"])[0])
      ),
      "input_mean": jax.tree.unflatten(
        structure(template["input_mean"]), [jnp.asarray(a) for a in pick(members["input_mean"])]
      )
      if "input_mean" in members
      else template["input_mean"],
    }
  # A single-run checkpoint written before populations (params at the top level).
  old_optimizer = optax.chain(
    optax.add_decayed_weights(config.weight_decay),
    optax.sgd(config.learning_rate, momentum=config.momentum or None),
  )
  old = {
    "params": template["params"],
    "opt_state": old_optimizer.init(template["params"]),
    "baseline": template["baseline"],
  }
  return {**checkpointer.restore(path, old), "input_mean": template["input_mean"]}
