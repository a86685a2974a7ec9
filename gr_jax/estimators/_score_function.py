r"""REINFORCE (the score function) with a running-mean baseline.

Part of :mod:`gr_jax.estimators` (its docstring states the conventions).
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp

from gr_jax.estimators._core import (
  Array,
  _check_logits,
  _check_one_hot,
  _check_tau,
  _compute_dtype,
  _gumbel_max,
  _public,
)

# ---------------------------------------------------------------------------
# REINFORCE (score function) with a running-mean baseline.
# ---------------------------------------------------------------------------


def categorical_log_prob(logits: Array, sample: Array) -> Array:
  r"""log Categorical(sample; softmax(logits)), summed over the last axis.

  .. math:: \log p_\theta(D) = \langle D, \theta \rangle -
    \mathrm{logsumexp}(\theta)

  Args:
    logits: float array ``[..., n]``; ``-inf`` marks impossible categories
      (they contribute nothing where the sample is 0, without NaN).
    sample: one-hot array of the shape of ``logits``. Concrete values are
      checked to be one-hot (or all-NaN rows, the sample of a degenerate row);
      under ``jit`` they cannot be, and a soft sample gives a meaningless sum.

  Returns:
    Array ``[...]`` of log-probabilities, in the compute dtype.
  """
  _check_logits(logits)
  _check_one_hot(logits, sample)
  log_probs = jax.nn.log_softmax(logits.astype(_compute_dtype(logits.dtype)), axis=-1)
  return jnp.sum(jnp.where(sample.astype(bool), log_probs, 0.0), axis=-1)


@_public
def reinforce(key: Array, logits: Array, *, tau: float | Array = 1.0) -> Array:
  r"""A one-hot sample that passes no gradient, for the score-function estimator.

  REINFORCE (Williams 1992) differentiates the surrogate
  :func:`score_function_surrogate` instead of the sample. ``tau`` is accepted
  for a uniform estimator signature (and checked) but not used.

  Returns:
    An exact one-hot sample of the shape and dtype of ``logits``.
  """
  _check_logits(logits)
  _check_tau(tau, logits)  # unused, but checked like every estimator's
  return jax.lax.stop_gradient(_gumbel_max(key, logits)[1])


def score_function_surrogate(log_prob: Array, loss: Array, baseline) -> Array:
  r"""Surrogate whose gradient is the REINFORCE estimator with a baseline.

  .. math::
    \nabla_\theta \left[\mathrm{sg}(f(D) - b)\, \log p_\theta(D)\right]
      = (f(D) - b)\, \nabla_\theta \log p_\theta(D).

  Add it to the loss (whose own gradient supplies the direct term
  :math:`\partial f / \partial \theta`); its value is not a loss.

  Args:
    log_prob: ``[...]`` log-probabilities of the samples (e.g. from
      :func:`categorical_log_prob`, summed over independent variables).
    loss: ``[...]`` loss values f(D), broadcastable to ``log_prob``.
    baseline: scalar or broadcastable baseline b (no gradient flows into it).

  Returns:
    The surrogate, shape of ``log_prob``.
  """
  advantage = jax.lax.stop_gradient(loss - baseline)
  return advantage * log_prob


class BaselineState(NamedTuple):
  """State of :class:`RunningMeanBaseline`: the mean and the update count."""

  mean: Array
  count: Array


@dataclasses.dataclass(frozen=True)
class RunningMeanBaseline:
  r"""Exponential running mean of the loss, the REINFORCE baseline of the paper.

  .. math:: b_{t+1} = \beta b_t + (1 - \beta) \bar f_t, \qquad b_1 = \bar f_0

  Pure functions, usable inside a jitted train step (the state is an array
  pytree to carry in the train state)::

    baseline = RunningMeanBaseline(decay=0.99)
    state = baseline.init()
    surrogate = score_function_surrogate(log_prob, loss, state.mean)
    state = baseline.update(state, loss)

  Attributes:
    decay: beta in [0, 1).
  """

  decay: float = 0.99

  def __post_init__(self):
    if not 0.0 <= self.decay < 1.0:
      raise ValueError(f"decay must lie in [0, 1); got decay={self.decay!r}.")

  def init(self) -> BaselineState:
    return BaselineState(mean=jnp.zeros((), jnp.float32), count=jnp.zeros((), jnp.int32))

  def update(self, state: BaselineState, loss: Array) -> BaselineState:
    """Folds the mean of ``loss`` (no gradient) into the running mean."""
    batch_mean = jnp.mean(jax.lax.stop_gradient(loss)).astype(jnp.float32)
    mean = jnp.where(
      state.count == 0,
      batch_mean,
      self.decay * state.mean + (1.0 - self.decay) * batch_mean,
    )
    return BaselineState(mean=mean, count=state.count + 1)
