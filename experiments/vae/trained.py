"""A trained VAE workdir read back: its config and a member's model (for notebooks and scripts)."""

from __future__ import annotations

import json
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import optax
import orbax.checkpoint as ocp
from ml_collections import ConfigDict

from experiments import checkpoints
from experiments.vae.experiment import HYPERPARAMETERS
from experiments.vae.task import VAETask
from gr_jax import estimators
from gr_jax.data import mnist


def saved_config(workdir: str | pathlib.Path) -> ConfigDict:
  """The config a VAE workdir was trained with (its config.json, without the data record)."""
  saved = json.loads((pathlib.Path(workdir) / "config.json").read_text())
  saved.pop("data_used", None)
  saved.setdefault("model", "concrete")  # saved before models had names: the one-layer model
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
    members = checkpoints.read_checkpoint(path)["members"]
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
