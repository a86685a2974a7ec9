"""Unsupervised parsing on ListOps with a Gumbel Tree-LSTM (Paulus et al. 2021, Table 1).

The merge decisions are discrete and the loss is computed on the tree they
build, so only straight-through estimators apply (``Estimator.straight_through``:
st, st_gs, gr_mc<K>, gr_qmc<K>, zgr, reinmax, gst, gst_p).
Plain SGD, weight decay 1e-4, batch size = maximum length L, a fixed number of
epochs; after every epoch the validation and test accuracies are measured
(greedy merges), and the test accuracy at the best validation epoch is the
reported result (model selection on validation only).
"""

from __future__ import annotations

import hashlib
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import optax
from absl import logging
from flax import nnx
from ml_collections import ConfigDict

from experiments import common
from gr_jax.data import listops
from gr_jax.models import tree_lstm

DATASETS = ("listops", "synthetic")
GENERATOR_HINT = "python scripts/generate_listops.py --out_dir=DIR"


def validate(config: ConfigDict):
  estimator = common.check_estimator(config, straight_through_only=True)
  common.check_common(config)
  common.require(config.dataset in DATASETS, "dataset", f"one of {DATASETS}", config.dataset)
  common.require_int(config, "max_length", minimum=2, allowed="an int >= 2 (the paper: 10, 25 or 50)")
  common.require_int(config, "num_epochs", "num_train_examples", "eval_batch_size", minimum=1)
  common.require_int(config, "checkpoint_every", "log_every", minimum=0, allowed="an int >= 0 (0 = off)")
  common.require(isinstance(config.grad_clip_norm, (int, float)) and config.grad_clip_norm >= 0,
                 "grad_clip_norm", "a number >= 0 (0 = no clipping)", config.grad_clip_norm)
  return estimator


def _train_lines(config: ConfigDict, test_path: pathlib.Path | None) -> list[str]:
  """The training TSV lines: config.train_file, else generated (and cached)."""
  if config.train_file:
    path = pathlib.Path(config.train_file)
    if not path.is_file():
      raise FileNotFoundError(
          f"config.train_file {path} does not exist; write one with {GENERATOR_HINT}, or set"
          " --config.train_file='' to generate the training data at start."
      )
    return path.read_text().splitlines()
  exclude = listops.expressions(test_path) if test_path else set()
  # The cache key names the file whose expressions were excluded (by content).
  excluded = hashlib.sha256(test_path.read_bytes()).hexdigest()[:12] if test_path else "none"
  cache = pathlib.Path(config.cache_dir).expanduser() / (
      f"train_n{config.num_train_examples}_seed{config.data_seed}_excluding{excluded}.tsv"
  )
  if cache.is_file():
    return cache.read_text().splitlines()
  logging.info("generating %d ListOps training examples (seed %d)", config.num_train_examples, config.data_seed)
  lines = listops.generate(config.num_train_examples, config.data_seed, exclude)
  cache.parent.mkdir(parents=True, exist_ok=True)
  common.write_text_atomic(cache, "\n".join(lines) + "\n")
  return lines


def load_data(config: ConfigDict) -> dict[str, list[listops.Example]]:
  """Train/valid/test examples of length <= max_length."""
  if config.dataset == "synthetic":
    test = listops.generate(60, config.data_seed + 2)
    valid = listops.generate(60, config.data_seed + 1, set(test))
    train = listops.generate(config.num_train_examples, config.data_seed, set(test) | set(valid))
    splits = {"train": train, "valid": valid, "test": test}
  else:
    data_dir = pathlib.Path(config.data_dir or ".")
    paths = {"valid": data_dir / config.valid_file, "test": data_dir / config.test_file}
    for split, path in paths.items():
      if not path.is_file():
        raise FileNotFoundError(
            f"ListOps {split} file not found at {path}: set --config.data_dir to the directory"
            f" holding {config.test_file} and {config.valid_file} (the d20s release of Nangia &"
            f" Bowman 2018), or point --config.{split}_file at it; a validation split can also"
            f" be generated with {GENERATOR_HINT}."
        )
    splits = {split: path.read_text().splitlines() for split, path in paths.items()}
    splits["train"] = _train_lines(config, paths["test"])
    sources = {**{split: str(path) for split, path in paths.items()},
               "train": config.train_file or "the generated training data"}
  if config.dataset == "synthetic":
    sources = {split: f"generated {split} data" for split in splits}
  data = {
      split: listops.subset(listops.parse_lines(lines, sources[split]), config.max_length)
      for split, lines in splits.items()
  }
  common.require_batch_fits(config, len(data["train"]), f"training examples of length <= {config.max_length}")
  return data


def make_model(config: ConfigDict) -> tree_lstm.GumbelTreeLSTM:
  return tree_lstm.GumbelTreeLSTM(
      len(listops.VOCAB),
      listops.NUM_CLASSES,
      embed_dim=config.embed_dim,
      hidden_dim=config.hidden_dim,
      classifier_hidden_dim=config.classifier_hidden_dim,
      rngs=nnx.Rngs(config.seed),
  )


class Trainer:

  def __init__(self, config: ConfigDict, estimator):
    self.config, self.estimator = config, estimator
    self.graphdef, state = nnx.split(make_model(config))
    self.init_params = nnx.to_pure_dict(state)
    clip = [optax.clip_by_global_norm(config.grad_clip_norm)] if config.grad_clip_norm else []
    self.optimizer = optax.chain(
        *clip, optax.add_decayed_weights(config.weight_decay), optax.sgd(config.learning_rate)
    )
    self.tau_at = common.tau_schedule(config)
    self.train_step = jax.jit(self._train_step, donate_argnums=0)
    self.predict = jax.jit(self._predict)

  def init_state(self):
    return {
        "params": self.init_params,
        "opt_state": self.optimizer.init(self.init_params),
        # Model selection so far: the best validation epoch and its correct counts
        # (integers: accuracies are exact fractions of the splits).
        "best": {"valid": jnp.asarray(-1), "test": jnp.asarray(0), "epoch": jnp.asarray(0)},
    }

  def _loss(self, params, tokens, lengths, labels, key, tau):
    select = lambda select_key, merge_logits: self.estimator(select_key, merge_logits, tau=tau)
    logits = nnx.merge(self.graphdef, params)(tokens, lengths, key, select)
    loss = optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
    return loss, jnp.mean(jnp.argmax(logits, -1) == labels)

  def _train_step(self, state, tokens, lengths, labels, key, step):
    (loss, accuracy), grads = jax.value_and_grad(self._loss, has_aux=True)(
        state["params"], tokens, lengths, labels, key, self.tau_at(step)
    )
    updates, opt_state = self.optimizer.update(grads, state["opt_state"], state["params"])
    params = optax.apply_updates(state["params"], updates)
    return {**state, "params": params, "opt_state": opt_state}, loss, accuracy

  def _predict(self, params, tokens, lengths):
    logits = nnx.merge(self.graphdef, params)(tokens, lengths, jax.random.key(0))
    return jnp.argmax(logits, -1)

  def correct(self, params, batch: listops.Batch) -> int:
    """Greedy parses classified correctly over a split, in fixed-size (padded) eval batches."""
    size = self.config.eval_batch_size
    correct = 0
    for start in range(0, len(batch.labels), size):
      rows = np.arange(start, start + size) % len(batch.labels)  # pad by wrapping
      predictions = np.asarray(self.predict(params, batch.tokens[rows], batch.lengths[rows]))
      count = min(size, len(batch.labels) - start)
      correct += int(np.sum(predictions[:count] == batch.labels[rows][:count]))
    return correct


def train_and_evaluate(config: ConfigDict, workdir: str) -> dict:
  """Trains the Gumbel Tree-LSTM on ListOps (resuming from workdir), selects the epoch on validation.

  Plain SGD for ``num_epochs`` epochs of ``batch_size`` examples of length <=
  ``max_length``; after each epoch the greedy-parse accuracy on the validation
  and test sets is logged and a checkpoint saved. A non-finite loss stops the
  run (the best epoch so far stands, ``diverged_at_step`` records it).

  Returns:
    The results written to ``workdir/results.json``: the best validation
    epoch's accuracies (exact fractions of the splits), the configuration and
    the number of training examples requested and kept.
  """
  estimator = validate(config)
  data = load_data(config)
  encoded = {split: listops.encode(examples, config.max_length) for split, examples in data.items()}
  path = common.prepare_workdir(workdir, config)
  batches = common.EpochBatches(len(data["train"]), config.batch_size, config.seed)
  num_steps = config.num_epochs * batches.steps_per_epoch
  finished = common.finished_results(path, num_steps)
  if finished is not None:
    return finished
  trainer = Trainer(config, estimator)
  stop = common.StopSignals()  # from here on, SIGINT / SIGTERM stop with a checkpoint
  checkpointer, writer, state, start = common.start_or_resume(path, trainer.init_state())
  train_key = jax.random.fold_in(jax.random.key(config.seed), 1)
  progress = common.ProgressLogger(start, num_steps)
  train = encoded["train"]
  num_valid, num_test = len(encoded["valid"].labels), len(encoded["test"].labels)
  diverged_at = None
  logging.info("%d train / %d valid / %d test examples with L <= %d; %d steps",
               len(train.labels), num_valid, num_test, config.max_length, num_steps)
  for step in range(start + 1, num_steps + 1):
    if stop.requested:
      stop.stop(checkpointer, writer, step - 1, state)
    rows = batches.indices(step - 1)
    state, loss, accuracy = trainer.train_step(
        state, train.tokens[rows], train.lengths[rows], train.labels[rows], jax.random.fold_in(train_key, step),
        step,
    )
    if config.log_every and step % config.log_every == 0:
      progress.log(step, loss=float(loss), accuracy=float(accuracy))
      writer.write(step, "train", loss=float(loss), accuracy=float(accuracy), tau=float(trainer.tau_at(step)))
    if step % batches.steps_per_epoch == 0:
      epoch = step // batches.steps_per_epoch
      if not np.isfinite(float(loss)):
        # The parameters are no longer finite: stop; the best epoch so far stands.
        diverged_at = step
        logging.error("training diverged (loss %s) by step %d; stopping. Lower"
                      " --config.learning_rate or set --config.grad_clip_norm.", float(loss), step)
        break
      valid_correct = trainer.correct(state["params"], encoded["valid"])
      test_correct = trainer.correct(state["params"], encoded["test"])
      valid_acc, test_acc = valid_correct / num_valid, test_correct / num_test
      writer.write(step, "valid", accuracy=valid_acc, epoch=epoch)
      writer.write(step, "test", accuracy=test_acc, epoch=epoch)
      logging.info("epoch %d: valid %.4f test %.4f", epoch, valid_acc, test_acc)
      if valid_correct > int(state["best"]["valid"]):
        state["best"] = {"valid": jnp.asarray(valid_correct), "test": jnp.asarray(test_correct),
                         "epoch": jnp.asarray(epoch)}
      checkpointer.save(step, state)
    elif config.checkpoint_every and step % config.checkpoint_every == 0:
      checkpointer.save(step, state)
  stop.restore()  # Ctrl-C during the final evaluation stops at once
  if diverged_at is None:
    checkpointer.save(num_steps, state)
  best_valid, best_test = max(0, int(state["best"]["valid"])), int(state["best"]["test"])
  results = {
      "valid_accuracy": best_valid / num_valid,
      "test_accuracy": best_test / num_test,
      "valid_correct": f"{best_valid}/{num_valid}",
      "test_correct": f"{best_test}/{num_test}",
      "best_epoch": int(state["best"]["epoch"]),
      "steps": num_steps,
      "estimator": config.estimator,
      "tau": config.tau,
      "tau_schedule": config.tau_schedule,
      "final_tau": float(trainer.tau_at(num_steps)),
      "batch_size": config.batch_size,
      "learning_rate": config.learning_rate,
      "max_length": config.max_length,
      "seed": config.seed,
      "num_train_examples_requested": config.num_train_examples,
      "num_train_examples": len(train.labels),  # kept: length <= max_length
      "diverged_at_step": diverged_at,
  }
  common.write_json_atomic(path / "results.json", results)
  logging.info("results: %s", results)
  writer.close()
  checkpointer.close()
  return results
