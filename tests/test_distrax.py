"""gr_jax.distrax: distrax distributions with exact one-hot samples and gr_jax's gradients.

The mean gradient of f(D) = log p(x, D) - log q(D), scored with distrax's log_prob, is compared
with the exact references of tests/adapters_reference.py (computed without the library).
"""

import distrax  # the test extra installs it: a failing import fails the suite
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gr_jax import distrax as gdx
from gr_jax import estimators
from tests.adapters_reference import (
  A_BIN,
  LOGITS_BIN,
  PRIOR,
  PRIOR_BIN,
  TAU,
  THETA,
  W_BIN,
  A,
  W,
  X,
  binary_reference,
  categorical_reference,
  expected_stgs,
)
from tests.estimators.reference import assert_mean_close


def log_normal(mu):
  return -0.5 * (X - mu) ** 2 - 0.5 * jnp.log(2 * jnp.pi)


def categorical_elbo(key, theta, estimator):
  q = gdx.OneHotCategorical(logits=theta, estimator=estimator, tau=TAU)
  z, log_q = q.sample_and_log_prob(seed=key)
  mu = z[0] @ W[0] + z[1] @ W[1] + z[0] @ jnp.asarray(A, jnp.float32) @ z[1]
  log_p = distrax.OneHotCategorical(logits=jnp.asarray(PRIOR, jnp.float32)).log_prob(z)
  return log_normal(mu) + jnp.sum(log_p - log_q)


def binary_elbo(key, logits, estimator):
  q = gdx.Bernoulli(logits=logits, estimator=estimator, tau=TAU)
  v, log_q = q.sample_and_log_prob(seed=key)
  log_p = distrax.Bernoulli(logits=jnp.asarray(PRIOR_BIN, jnp.float32)).log_prob(v)
  return log_normal(v @ W_BIN + A_BIN * v[0] * v[1]) + jnp.sum(log_p - log_q)


def gradient_draws(elbo, theta, estimator, num_draws=20_000):
  keys = jax.random.split(jax.random.key(0), num_draws)
  grad = jax.vmap(jax.grad(elbo, argnums=1), in_axes=(0, None, None))
  return np.asarray(jax.jit(grad, static_argnums=2)(keys, jnp.asarray(theta), estimator))


@pytest.mark.parametrize("estimator", ["st_gs", "gr_mc10"])
def test_categorical_gradient_is_the_estimators_expectation(estimator):
  h, _, _ = categorical_reference()
  draws = gradient_draws(categorical_elbo, THETA, estimator)
  for j in range(2):
    assert_mean_close(draws[:, j], *expected_stgs(THETA[j], h[j]))


def test_binary_gradient_is_gr_exacts_expectation():
  h, _, _ = binary_reference()
  draws = gradient_draws(binary_elbo, LOGITS_BIN, "gr_exact")
  for j in range(2):
    cotangents = np.stack([np.zeros(2), h[j]], axis=-1)
    target, target_se = expected_stgs(np.array([0.0, LOGITS_BIN[j]]), cotangents)
    assert_mean_close(draws[:, j], target[1], target_se[1])


def test_samples_are_the_estimators_one_hots_and_jit_takes_the_distribution():
  logits = jnp.array([[0.3, -1.0, 0.8], [2.0, 0.0, -0.5]])
  d = gdx.OneHotCategorical(logits=logits, estimator="gr_mc10", tau=jnp.array([0.5, 2.0]))
  sample = d.sample(seed=jax.random.key(4), sample_shape=(5,))
  assert sample.shape == (5, 2, 3) and sample.dtype == jnp.float32
  expected = estimators.st_gumbel_softmax(jax.random.key(4), jnp.broadcast_to(logits, (5, 2, 3)))
  np.testing.assert_array_equal(sample, expected)  # common random numbers with the library
  jitted = jax.jit(lambda dist, key: dist.sample(seed=key, sample_shape=(5,)))
  np.testing.assert_array_equal(jitted(d, jax.random.key(4)), sample)
  b = gdx.Bernoulli(probs=jnp.full((3,), 0.3), estimator="gr_exact")
  assert b.sample(seed=jax.random.key(0), sample_shape=(2,)).shape == (2, 3)


@pytest.mark.parametrize(
  "name, reason",
  [("gs", "relaxed"), ("rloo2", "gr_jax.estimators.rloo"), ("gr_exact", "two categories")],
)
def test_refusals_name_the_reason(name, reason):
  with pytest.raises(ValueError, match=reason):
    gdx.OneHotCategorical(logits=jnp.zeros(3), estimator=name)
