"""Stacked estimators compute the paper's Appendix B surrogates (hierarchical models).

Appendix B writes ST-GS and GR-MCK for a layer of independent variables
(parallel case) and for a cascade theta^j = h(D^{j-1}) (sequential case) as
surrogate objectives: L_m = (df/dD^m)* S^m and L_j = ((dL_{j+1}/dD^j)* +
(df/dD^j)*) S^j, with S^j the tempered softmax at theta^j + G^j (ST-GS) or the
average of it over the K conditional samples (GR-MCK), * a stop-gradient. The
library's claim is that calling its estimators layer after layer and taking
jax.grad computes exactly the gradient of these surrogates. The references
below write that gradient out by hand in float64 numpy, from the same Gumbels
(``jax.random.gumbel(key, logits.shape)``, the documented common random
numbers) and the same K conditional samples (``conditional_gumbel(fold_in(key,
1), ...)``, the documented backward samples); they agree to float64 rounding.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gr_jax import estimators

N_CATEGORIES = 4
TAU = 0.6
NUM_SAMPLES = 7
RNG = np.random.default_rng(2021)
W_H = RNG.normal(size=(2, N_CATEGORIES, N_CATEGORIES))  # h_j(d) = 2 tanh(W_j d + b_j)
B_H = RNG.normal(size=(2, N_CATEGORIES))
A_F = RNG.normal(size=(3, N_CATEGORIES))
B_F = RNG.normal(size=(N_CATEGORIES, N_CATEGORIES))


def _h(layer, d, xp):
  return 2.0 * xp.tanh(W_H[layer] @ d + B_H[layer])


def _h_jacobian(layer, d):
  return (2.0 * (1.0 - np.tanh(W_H[layer] @ d + B_H[layer]) ** 2))[:, None] * W_H[layer]


def _f(d1, d2, d3, xp):
  """A nonlinear loss of all three variables."""
  return (
    xp.sin(A_F[0] @ d1)
    + d1 @ B_F @ d3
    + (A_F[2] @ d3) ** 2
    + xp.exp(0.3 * (A_F[1] @ d2)) * (d2 @ d3)
  )


def _f_partials(d1, d2, d3):
  """(df/dD^1, df/dD^2, df/dD^3), by hand."""
  e = np.exp(0.3 * (A_F[1] @ d2))
  return (
    np.cos(A_F[0] @ d1) * A_F[0] + B_F @ d3,
    0.3 * e * (d2 @ d3) * A_F[1] + e * d3,
    B_F.T @ d1 + 2.0 * (A_F[2] @ d3) * A_F[2] + e * d2,
  )


def _softmax(x):
  e = np.exp(x - x.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)


def _surrogate_jacobian(name, key, logits, sample):
  """d S / d theta of the surrogate S at theta = logits (rows: S, columns: theta), float64.

  ST-GS: the tempered softmax at logits + G; GR-MCK: its average over the K
  conditional samples.
  """
  if name == "st_gs":
    points = (np.asarray(logits) + np.asarray(jax.random.gumbel(key, logits.shape, jnp.float64)))[
      None
    ]
  else:
    points = np.asarray(
      estimators.conditional_gumbel(jax.random.fold_in(key, 1), logits, sample, NUM_SAMPLES)
    )
  s = _softmax(points / TAU)  # [K, ..., n]
  jacobians = (s[..., :, None] * np.eye(N_CATEGORIES) - s[..., :, None] * s[..., None, :]) / TAU
  return jacobians.mean(0)


ESTIMATORS = {
  "st_gs": estimators.st_gumbel_softmax,
  "gr_mc": lambda k, t, tau: estimators.gumbel_rao(k, t, tau=tau, num_samples=NUM_SAMPLES),
}


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_sequential_case_equals_appendix_b_surrogate(name):
  estimator = ESTIMATORS[name]
  with jax.enable_x64(True):
    theta1 = jnp.asarray(RNG.normal(size=N_CATEGORIES))
    for seed in range(5):
      keys = jax.random.split(jax.random.key(seed), 3)

      def loss(theta):
        d1 = estimator(keys[0], theta, tau=TAU)
        d2 = estimator(keys[1], _h(0, d1, jnp), tau=TAU)
        d3 = estimator(keys[2], _h(1, d2, jnp), tau=TAU)
        return _f(d1, d2, d3, jnp), (d1, d2, d3)

      grad, samples = jax.grad(loss, has_aux=True)(theta1)
      d1, d2, d3 = (np.asarray(d) for d in samples)
      theta2, theta3 = _h(0, d1, np), _h(1, d2, np)
      jac1, jac2, jac3 = (
        _surrogate_jacobian(name, k, jnp.asarray(t), jnp.asarray(d))
        for k, t, d in zip(keys, (theta1, theta2, theta3), (d1, d2, d3))
      )
      partial1, partial2, partial3 = _f_partials(d1, d2, d3)
      # L_3, then L_2 and L_1 with the upstream total derivative dL_{j+1}/dD^j held fixed.
      total3 = partial3
      total2 = partial2 + _h_jacobian(1, d2).T @ (jac3.T @ total3)
      total1 = partial1 + _h_jacobian(0, d1).T @ (jac2.T @ total2)
      np.testing.assert_allclose(np.asarray(grad), jac1.T @ total1, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_parallel_case_equals_appendix_b_surrogate(name):
  estimator = ESTIMATORS[name]
  with jax.enable_x64(True):
    logits = jnp.asarray(RNG.normal(size=(3, N_CATEGORIES)))
    for seed in range(5):
      key = jax.random.key(100 + seed)

      def loss(theta):
        samples = estimator(key, theta, tau=TAU)
        return _f(*samples, jnp), samples

      grad, samples = jax.grad(loss, has_aux=True)(logits)
      samples = np.asarray(samples)
      jacobians = _surrogate_jacobian(name, key, logits, jnp.asarray(samples))  # [3, n, n]
      partials = _f_partials(*samples)
      expected = np.stack([jacobians[j].T @ partials[j] for j in range(3)])
      np.testing.assert_allclose(np.asarray(grad), expected, rtol=1e-10, atol=1e-12)
