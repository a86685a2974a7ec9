"""The VAE's periodic measurements: the encoder gradient's variance and MSE, and a validation
bound."""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any, Callable

import jax
import numpy as np
from absl import logging
from ml_collections import ConfigDict

from experiments import reporting
from experiments.evaluators.base import Evaluator, Values


@dataclasses.dataclass
class Inputs:
  """What the VAE's evaluators measure with.

  Attributes:
    scorer: the population's jitted IWAE bounds and gradient measurements
      (``experiments.vae.Scorer``).
    valid: the validation images ``[N, 784]``.
    fixed_batch: the training batch the gradients are measured on ``[B, 784]``.
    timed_evaluation: called with the seconds an IWAE evaluation of the
      population took, its number of images and its M (the progress line's
      estimate of the final evaluation).
  """

  scorer: Any
  valid: np.ndarray
  fixed_batch: jax.Array
  timed_evaluation: Callable[[float, int, int], None]


class GradientMeasurements(Evaluator):
  """The encoder gradient's variance every ``variance_every`` steps and its MSE against REINFORCE
  every ``mse_every`` steps (the paper's Figure 2), on a fixed batch, ``variance_draws`` draws."""

  name = "encoder gradient"

  def __init__(self, config: ConfigDict, inputs: Inputs):
    super().__init__(math.gcd(config.variance_every, config.mse_every))
    self.config, self.inputs = config, inputs

  def _mse_due(self, step: int) -> bool:
    return bool(self.config.mse_every) and step % self.config.mse_every == 0

  def due(self, step: int, last_step: int) -> bool:
    variance = self.config.variance_every and step % self.config.variance_every == 0
    return bool(variance) or self._mse_due(step)

  def run(self, step: int, state: dict) -> Values:
    mse = self._mse_due(step)
    logging.info(
      "step %d: measuring the encoder gradient's variance%s (%d draws)",
      step,
      " and MSE" * mse,
      self.config.variance_draws,
    )
    return {
      "train": self.inputs.scorer.gradient_measurements(state, self.inputs.fixed_batch, step, mse)
    }


class ValidationBound(Evaluator):
  """The IWAE bound on the validation images with ``periodic_eval_samples`` samples every
  ``eval_every`` steps (not at the last step: the final evaluation follows)."""

  name = "validation"
  at_last_step = False

  def __init__(self, config: ConfigDict, inputs: Inputs):
    super().__init__(config.eval_every)
    self.num_samples, self.inputs = config.periodic_eval_samples, inputs

  def run(self, step: int, state: dict) -> Values:
    t0 = time.perf_counter()
    nll = self.inputs.scorer.nll(state, self.inputs.valid, step, self.num_samples, "valid")
    self.inputs.timed_evaluation(time.perf_counter() - t0, len(self.inputs.valid), self.num_samples)
    return {"valid": {"nll": nll, "num_samples": np.full(len(nll), self.num_samples)}}

  def summary(self, values: Values) -> str:
    return f"nll (M={self.num_samples}) {reporting.describe(values['valid']['nll'])}"
