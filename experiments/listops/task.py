"""The Gumbel Tree-LSTM's pure functions of one member (for
:class:`experiments.population.Trainer`): the model, its optimizer, a training step, greedy
predictions."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from ml_collections import ConfigDict

from experiments import schedules
from gr_jax.data import listops
from gr_jax.models import tree_lstm

INIT_FIELDS = ("embed_init", "leaf_init", "compose_init", "classifier_init", "output_init")


def make_model(config: ConfigDict, rngs: nnx.Rngs) -> tree_lstm.GumbelTreeLSTM:
  return tree_lstm.GumbelTreeLSTM(
    len(listops.VOCAB),
    listops.NUM_CLASSES,
    embed_dim=config.embed_dim,
    hidden_dim=config.hidden_dim,
    classifier_hidden_dim=config.classifier_hidden_dim,
    **{field: config[field] for field in INIT_FIELDS},
    rngs=rngs,
  )


def make_optimizer(config: ConfigDict):
  """Plain SGD with weight decay (and, opt-in, global-norm clipping); hyperparameters as data."""
  clip = [optax.clip_by_global_norm(config.grad_clip_norm)] if config.grad_clip_norm else []

  @optax.inject_hyperparams
  def sgd(learning_rate, weight_decay):
    return optax.chain(*clip, optax.add_decayed_weights(weight_decay), optax.sgd(learning_rate))

  return sgd


class ListOpsTask:
  """The Tree-LSTM's pure functions of one member, for :class:`experiments.population.Trainer`."""

  def __init__(self, config: ConfigDict, estimator):
    self.config, self.estimator = config, estimator
    self.graphdef = nnx.graphdef(make_model(config, nnx.Rngs(0)))
    self.make_optimizer = make_optimizer(config)
    # Only the update rule is used: the hyperparameters come from the optimizer state.
    self.optimizer = self.make_optimizer(learning_rate=0.0, weight_decay=0.0)
    self.tau_at = schedules.tau_schedule(config)

  def init_member(self, key, hyperparameters, seed):
    del seed
    params = nnx.to_pure_dict(nnx.state(make_model(self.config, nnx.Rngs(key))))
    optimizer = self.make_optimizer(
      learning_rate=hyperparameters["learning_rate"], weight_decay=hyperparameters["weight_decay"]
    )
    return {"params": params, "opt_state": optimizer.init(params)}

  @staticmethod
  def records(size: int) -> dict:
    """Model selection so far, per member: the best validation epoch and its correct counts
    (integers: accuracies are exact fractions of the splits)."""
    return {
      "best_valid": np.full(size, -1, np.int32),
      "best_test": np.zeros(size, np.int32),
      "best_epoch": np.zeros(size, np.int32),
    }

  def loss(self, params, tokens, lengths, labels, key, tau):
    select = lambda select_key, merge_logits: self.estimator(select_key, merge_logits, tau=tau)
    logits = nnx.merge(self.graphdef, params)(tokens, lengths, key, select)
    loss = optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
    return loss, jnp.mean(jnp.argmax(logits, -1) == labels)

  def train_step(self, member, hyperparameters, batch, key, step):
    tau = self.tau_at(hyperparameters["tau"], step)
    (loss, accuracy), grads = jax.value_and_grad(self.loss, has_aux=True)(
      member["params"], batch["tokens"], batch["lengths"], batch["labels"], key, tau
    )
    updates, opt_state = self.optimizer.update(grads, member["opt_state"], member["params"])
    params = optax.apply_updates(member["params"], updates)
    return {"params": params, "opt_state": opt_state}, {
      "loss": loss,
      "accuracy": accuracy,
      "tau": tau,
    }

  def predict(self, params, tokens, lengths):
    logits = nnx.merge(self.graphdef, params)(tokens, lengths, jax.random.key(0))
    return jnp.argmax(logits, -1)


def as_arrays(batch: listops.Batch) -> dict[str, np.ndarray]:
  return {"tokens": batch.tokens, "lengths": batch.lengths, "labels": batch.labels}
