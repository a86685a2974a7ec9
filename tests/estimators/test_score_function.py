"""REINFORCE, the log-probability and the baseline (gr_jax/estimators/_score_function.py)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gr_jax import estimators
from tests.estimators.reference import (
  LOGITS,
  A,
  N,
  assert_mean_close,
  quadratic_loss,
  softmax_np,
)


@pytest.mark.slow
def test_reinforce_is_unbiased_against_enumeration():
  """Mean of the score-function gradient with a baseline equals the exact gradient."""
  p = softmax_np(LOGITS)
  losses = np.array([A[i, i] for i in range(N)])
  exact = p * (losses - p @ losses)  # d/dtheta sum_i p_i f(e_i)
  baseline = 0.5

  def one(key):
    def surrogate(theta):
      d = estimators.reinforce(key, theta)
      loss = quadratic_loss(d)
      log_prob = estimators.categorical_log_prob(theta, d)
      return loss + estimators.score_function_surrogate(log_prob, loss, baseline)

    return jax.grad(surrogate)(jnp.asarray(LOGITS, jnp.float32))

  draws = np.asarray(
    jax.jit(jax.vmap(one))(jax.random.split(jax.random.key(5), 40_000)), np.float64
  )
  assert_mean_close(draws, exact, np.zeros(N))


def test_categorical_log_prob_and_masks():
  logits = jnp.array([0.0, -jnp.inf, 1.0])
  d = jnp.array([0.0, 0.0, 1.0])
  expected = 1.0 - np.log(1.0 + np.e)
  np.testing.assert_allclose(estimators.categorical_log_prob(logits, d), expected, rtol=1e-6)
  grad = jax.grad(lambda t: estimators.categorical_log_prob(t, d))(logits)
  assert np.isfinite(np.asarray(grad)).all() and grad[1] == 0.0


def test_running_mean_baseline():
  baseline = estimators.RunningMeanBaseline(decay=0.5)
  state = baseline.init()
  update = jax.jit(baseline.update)
  state = update(state, jnp.array([2.0, 4.0]))
  assert float(state.mean) == 3.0  # the first update takes the batch mean
  state = update(state, jnp.array([5.0]))
  assert float(state.mean) == 4.0 and int(state.count) == 2
  with pytest.raises(ValueError, match="decay"):
    estimators.RunningMeanBaseline(decay=1.0)
