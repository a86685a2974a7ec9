"""ListOps's periodic measurement: every epoch, the greedy parses' accuracy on valid and test, and
each member's best validation epoch (kept in the checkpointed state)."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax
import numpy as np
from ml_collections import ConfigDict

from experiments import population
from experiments.evaluators import Evaluator, Values, describe


@dataclasses.dataclass
class Inputs:
  """What the epoch accuracy measures with.

  Attributes:
    correct: ``(params [P, ...], batch) -> [P]`` the members' correct greedy
      parses over a split.
    valid, test: the encoded splits (``gr_jax.data.listops.Batch``).
    steps_per_epoch: the training steps in one epoch.
  """

  correct: Callable[[Any, Any], np.ndarray]
  valid: Any
  test: Any
  steps_per_epoch: int


class EpochAccuracy(Evaluator):
  """After every epoch: each member's accuracy on valid and test; a member's best validation epoch
  so far, with its test accuracy, is its result (``state["records"]``; a diverged member's best
  epoch before it diverged stands)."""

  name = "accuracy"

  def __init__(self, config: ConfigDict, inputs: Inputs):
    del config  # every epoch
    super().__init__(inputs.steps_per_epoch)
    self.inputs = inputs

  def run(self, step: int, state: dict) -> Values:
    epoch = step // self.inputs.steps_per_epoch
    params = state["members"]["params"]
    values, self._correct = {}, {}
    for split, batch in (("valid", self.inputs.valid), ("test", self.inputs.test)):
      self._correct[split] = self.inputs.correct(params, batch)
      values[split] = {
        "accuracy": self._correct[split] / len(batch.labels),
        "epoch": np.full(len(self._correct[split]), epoch),
      }
    return values

  def summary(self, values: Values) -> str:
    return (
      f"epoch {int(values['valid']['epoch'][0])}:"
      f" valid {describe(values['valid']['accuracy'])}"
      f" test {describe(values['test']['accuracy'])}"
    )

  def update(self, state: dict, values: Values) -> dict:
    records = population.to_host(state["records"])
    valid, test = self._correct["valid"], self._correct["test"]
    better = population.to_host(state["alive"]) & (valid > records["best_valid"])
    records = {
      "best_valid": np.where(better, valid, records["best_valid"]).astype(np.int32),
      "best_test": np.where(better, test, records["best_test"]).astype(np.int32),
      "best_epoch": np.where(better, values["valid"]["epoch"], records["best_epoch"]).astype(
        np.int32
      ),
    }
    return {**state, "records": jax.device_put(records, state["alive"].sharding)}
