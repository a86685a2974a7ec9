"""ZGR, ReinMax and GST (gr_jax/estimators/_deterministic.py): hand-computed cases and limits."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gr_jax import estimators
from tests.estimators.reference import (
  LOGITS,
  TAU,
  A,
  N,
  Z,
  assert_mean_close,
  estimator_draws,
  key_with_sample,
  softmax_np,
  vjp_at,
)


def test_reinmax_hand_computed():
  # theta = [log 3, 0]: p = [3/4, 1/4]; tau = 1; D = e_1; g = [0, 1].
  # pi_1 = (e_1 + p) / 2 = [3/8, 5/8]: 2 pi_1 (g - <g, pi_1>) = [-15/32, 15/32];
  # -1/2 p (g - <g, p>) = [3/32, -3/32]; sum [-3/8, 3/8].
  logits = jnp.array([np.log(3.0), 0.0])
  key = key_with_sample(logits, 1)
  _, grad = vjp_at(estimators.reinmax, key, logits, jnp.array([0.0, 1.0]), 1.0)
  np.testing.assert_allclose(grad, [-3 / 8, 3 / 8], rtol=1e-6)
  # theta = [0, 0], tau = 1, D = e_0, g = [1, 0]: pi_1 = [3/4, 1/4];
  # 2 pi_1 (g - 3/4) = [3/8, -3/8]; -1/2 p (g - 1/2) = [-1/8, 1/8]; sum [1/4, -1/4].
  logits = jnp.zeros(2)
  key = key_with_sample(logits, 0)
  _, grad = vjp_at(estimators.reinmax, key, logits, jnp.array([1.0, 0.0]), 1.0)
  np.testing.assert_allclose(grad, [0.25, -0.25], rtol=1e-6)


@pytest.mark.parametrize("index, perturbed", [(0, [1.0, 0.0, -1.0]), (1, [0.0, 1.0, -1.0]), (2, [0.0, 0.0, 1.0])])
def test_gst_hand_computed(index, perturbed):
  """theta = [1, 0, -1], gap 1: the sample's logit goes up to the max (1), the
  others down to at most max - 1 = 0; the gradient is the softmax VJP there."""
  logits = jnp.array([1.0, 0.0, -1.0])
  g = np.array([1.0, 2.0, 4.0])
  tau = 0.7
  key = key_with_sample(logits, index)
  sample, grad = vjp_at(estimators.get("gst"), key, logits, jnp.asarray(g, jnp.float32), tau)
  assert int(sample.argmax()) == index
  s = softmax_np(np.array(perturbed) / tau)
  np.testing.assert_allclose(grad, s * (g - g @ s) / tau, rtol=1e-5, atol=1e-7)


def test_gst_p_hand_computed():
  """GST-p: gap = -log(1 - p_i) / p_i with p = softmax(theta)."""
  logits_np = np.array([1.0, 0.0, -1.0])
  p = softmax_np(logits_np)
  g = np.array([1.0, 2.0, 4.0])
  for index in range(3):
    key = key_with_sample(jnp.asarray(logits_np, jnp.float32), index)
    _, grad = vjp_at(estimators.get("gst_p"), key, jnp.asarray(logits_np, jnp.float32),
                      jnp.asarray(g, jnp.float32), 1.0)
    gap = -np.log(1.0 - p[index]) / p[index]
    perturbed = np.minimum(logits_np, logits_np.max() - gap)
    perturbed[index] = logits_np.max()
    s = softmax_np(perturbed)
    np.testing.assert_allclose(grad, s * (g - g @ s), rtol=1e-5, atol=1e-7)


def test_zgr_is_unbiased_for_a_quadratic_loss():
  """E[ZGR] equals the exact gradient of E[D^T A D] = sum_i p_i A_ii (enumeration)."""
  p = softmax_np(LOGITS)
  diag = np.diag(A)
  exact = p * (diag - p @ diag)
  draws, _ = estimator_draws(estimators.zgr, 40_000, seed=12)
  assert_mean_close(draws, exact, np.zeros(N))


def test_stgs_is_biased_on_the_same_quadratic_loss():
  """The check above can fail: ST-GS's mean on the same problem is rejected."""
  p = softmax_np(LOGITS)
  diag = np.diag(A)
  exact = p * (diag - p @ diag)
  draws, _ = estimator_draws(estimators.st_gumbel_softmax, 40_000, seed=12, tau=TAU)
  with pytest.raises(AssertionError):
    assert_mean_close(draws, exact, np.zeros(N))


def test_zgr_is_the_zero_temperature_limit_of_gumbel_rao():
  """n = 4: GR-MCK at tau = 0.01 and K = 10^6, averaged over 8 backward keys that
  share one D, against ZGR at that D. The tolerance is Z standard errors of the
  average (from the 8 draws) plus the O(tau) distance of GR from its limit,
  bounded by 3 tau max|ZGR| (at tau = 0.01 the binary case below is 0.5% off)."""
  logits = jnp.asarray(LOGITS, jnp.float32)
  g = jnp.asarray([0.5, -1.0, 2.0, 0.3], jnp.float32)
  index = 2
  draws = []
  seed = 0
  for _ in range(8):
    key = key_with_sample(logits, index, start=seed)
    seed = int(jax.random.key_data(key)[-1]) + 1
    draws.append(vjp_at(lambda k, t, tau: estimators.gumbel_rao(k, t, tau=tau, num_samples=1_000_000),
                         key, logits, g, 0.01)[1])
  draws = np.array(draws)
  _, limit = vjp_at(estimators.zgr, key, logits, g, 1.0)
  tolerance = Z * draws.std(0, ddof=1) / np.sqrt(len(draws)) + 3 * 0.01 * np.abs(limit).max()
  np.testing.assert_array_less(np.abs(draws.mean(0) - limit), tolerance)


def test_zgr_is_the_limit_of_gr_exact():
  """Binary: |GR-exact(tau) - ZGR| shrinks like tau (at tau = 1e-4, below 1e-3 relative)."""
  logits = jnp.array([[0.3, -0.5], [2.0, -1.0], [-3.0, 1.0]])
  g = jnp.array([[1.0, -2.0], [0.5, 3.0], [1.0, 0.0]])
  key = jax.random.key(3)
  _, limit = vjp_at(estimators.zgr, key, logits, g, 1.0)
  errors = [np.abs(vjp_at(estimators.gumbel_rao_exact, key, logits, g, tau)[1] - limit).max()
            for tau in (1e-2, 1e-3, 1e-4)]
  assert errors[2] < 1e-3 * np.abs(limit).max(), errors
  assert errors[0] > errors[1] > errors[2], errors
