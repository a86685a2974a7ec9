"""ST, GS and ST-GS (gr_jax/estimators/_straight_through.py) against closed forms."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np

from gr_jax import estimators
from tests.estimators.reference import (
  LOGITS,
  TAU,
  N,
  softmax_jacobian,
  softmax_np,
)


def test_straight_through_gradient_is_closed_form():
  w = np.array([0.3, -1.2, 2.0, 0.7])
  for tau in (0.1, 1.0, 3.0):
    grad = jax.grad(
      lambda t: jnp.sum(
        jnp.asarray(w, jnp.float32) * estimators.straight_through(jax.random.key(0), t, tau=tau)
      )
    )(jnp.asarray(LOGITS, jnp.float32))
    expected = softmax_jacobian(softmax_np(LOGITS / tau), tau).T @ w
    np.testing.assert_allclose(grad, expected, rtol=1e-5, atol=1e-6)


def test_gumbel_softmax_and_st_gs_gradients_are_closed_form():
  w = np.array([0.3, -1.2, 2.0, 0.7])
  logits = jnp.asarray(LOGITS, jnp.float32)
  for seed, tau in itertools.product(range(3), (0.2, 1.0)):
    key = jax.random.key(seed)
    relaxed = np.asarray(estimators.gumbel_softmax(key, logits, tau=tau), np.float64)
    expected = softmax_jacobian(relaxed, tau).T @ w
    grad_gs = jax.grad(lambda t: jnp.sum(w * estimators.gumbel_softmax(key, t, tau=tau)))(logits)
    np.testing.assert_allclose(grad_gs, expected, rtol=1e-4, atol=1e-5)
    sample = estimators.st_gumbel_softmax(key, logits, tau=tau)
    np.testing.assert_array_equal(sample, np.eye(N)[relaxed.argmax()])
    grad_stgs = jax.grad(lambda t: jnp.sum(w * estimators.st_gumbel_softmax(key, t, tau=tau)))(
      logits
    )
    np.testing.assert_allclose(grad_stgs, expected, rtol=1e-4, atol=1e-5)


def test_stgs_second_derivative_is_hessian_of_fixed_g_surrogate():
  """d/dtheta of v . grad_STGS equals the finite-difference derivative, at fixed G,
  of the numpy function theta -> v . J_tau(theta + G)^T w."""
  w = np.array([0.3, -1.2, 2.0, 0.7])
  v = np.array([1.0, 0.5, -0.4, 2.0])
  key = jax.random.key(3)
  logits = jnp.asarray(LOGITS, jnp.float64 if False else jnp.float32)

  def directional(t):
    grad = jax.grad(lambda t: jnp.sum(w * estimators.st_gumbel_softmax(key, t, tau=TAU)))(t)
    return jnp.sum(v * grad)

  second = np.asarray(jax.grad(directional)(logits), np.float64)
  gumbels = np.asarray(jax.random.gumbel(key, (N,)), np.float64)

  def directional_np(theta):
    s = softmax_np((theta + gumbels) / TAU)
    return v @ (s * (w - w @ s) / TAU)

  h = 1e-5
  expected = np.array(
    [(directional_np(LOGITS + h * e) - directional_np(LOGITS - h * e)) / (2 * h) for e in np.eye(N)]
  )
  np.testing.assert_allclose(second, expected, rtol=2e-3, atol=2e-4)
