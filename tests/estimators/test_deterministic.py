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


@pytest.mark.parametrize(
  "index, perturbed", [(0, [1.0, 0.0, -1.0]), (1, [0.0, 1.0, -1.0]), (2, [0.0, 0.0, 1.0])]
)
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
    _, grad = vjp_at(
      estimators.get("gst_p"),
      key,
      jnp.asarray(logits_np, jnp.float32),
      jnp.asarray(g, jnp.float32),
      1.0,
    )
    gap = -np.log(1.0 - p[index]) / p[index]
    perturbed = np.minimum(logits_np, logits_np.max() - gap)
    perturbed[index] = logits_np.max()
    s = softmax_np(perturbed)
    np.testing.assert_allclose(grad, s * (g - g @ s), rtol=1e-5, atol=1e-7)


@pytest.mark.slow
def test_zgr_is_unbiased_for_a_quadratic_loss():
  """E[ZGR] equals the exact gradient of E[D^T A D] = sum_i p_i A_ii (enumeration)."""
  p = softmax_np(LOGITS)
  diag = np.diag(A)
  exact = p * (diag - p @ diag)
  draws, _ = estimator_draws(estimators.zgr, 40_000, seed=12)
  assert_mean_close(draws, exact, np.zeros(N))


@pytest.mark.slow
def test_stgs_is_biased_on_the_same_quadratic_loss():
  """The check above can fail: ST-GS's mean on the same problem is rejected."""
  p = softmax_np(LOGITS)
  diag = np.diag(A)
  exact = p * (diag - p @ diag)
  draws, _ = estimator_draws(estimators.st_gumbel_softmax, 40_000, seed=12, tau=TAU)
  with pytest.raises(AssertionError):
    assert_mean_close(draws, exact, np.zeros(N))


@pytest.mark.slow
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
    draws.append(
      vjp_at(
        lambda k, t, tau: estimators.gumbel_rao(k, t, tau=tau, num_samples=1_000_000),
        key,
        logits,
        g,
        0.01,
      )[1]
    )
  draws = np.array(draws)
  _, limit = vjp_at(estimators.zgr, key, logits, g, 1.0)
  tolerance = Z * draws.std(0, ddof=1) / np.sqrt(len(draws)) + 3 * 0.01 * np.abs(limit).max()
  np.testing.assert_array_less(np.abs(draws.mean(0) - limit), tolerance)


@pytest.mark.slow
def test_zgr_is_the_limit_of_gr_exact():
  """Binary: |GR-exact(tau) - ZGR| shrinks like tau (at tau = 1e-4, below 1e-3 relative)."""
  logits = jnp.array([[0.3, -0.5], [2.0, -1.0], [-3.0, 1.0]])
  g = jnp.array([[1.0, -2.0], [0.5, 3.0], [1.0, 0.0]])
  key = jax.random.key(3)
  _, limit = vjp_at(estimators.zgr, key, logits, g, 1.0)
  errors = [
    np.abs(vjp_at(estimators.gumbel_rao_exact, key, logits, g, tau)[1] - limit).max()
    for tau in (1e-2, 1e-3, 1e-4)
  ]
  assert errors[2] < 1e-3 * np.abs(limit).max(), errors
  assert errors[0] > errors[1] > errors[2], errors


@pytest.mark.parametrize("n", [2, 4])
def test_reinmax_at_tau_one_is_zgr(n):
  """At tau = 1, pi_1 = (D + p) / 2 and ReinMax's gradient reduces to
  1/2 [(g_i - <g, p>) e_i + p (g - g_i)], which is ZGR's 1/2 [ST + DARN] written out: the same
  estimator for every arity (the field's tau = 1.0 rows of the two are one estimator twice). At
  tau = 2 they differ."""
  logits = jnp.asarray(LOGITS[:n], jnp.float32)
  g = jnp.asarray([0.4, -1.0, 0.7, 0.2][:n], jnp.float32)
  for index in range(n):
    key = key_with_sample(logits, index)
    _, reinmax = vjp_at(estimators.reinmax, key, logits, g, 1.0)
    _, zgr = vjp_at(estimators.zgr, key, logits, g, 1.0)
    p = softmax_np(np.asarray(logits, np.float64))
    g64, b = np.asarray(g, np.float64), float(np.dot(g, p))
    closed_form = 0.5 * ((g64[index] - b) * np.eye(n)[index] + p * (g64 - g64[index]))
    np.testing.assert_allclose(reinmax, closed_form, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(zgr, closed_form, rtol=1e-5, atol=1e-7)
    _, reinmax_at_two = vjp_at(estimators.reinmax, key, logits, g, 2.0)
    assert np.max(np.abs(reinmax_at_two - closed_form)) > 1e-2


def test_reinmax_hand_computed_at_tau_not_one():
  # theta = [log 3, 0], tau = 2: softmax(theta / 2) = [sqrt3, 1] / (sqrt3 + 1); D = e_1, g = [0, 1].
  # pi_1 = (e_1 + softmax(theta / 2)) / 2, and 2 pi_1 (g - <g, pi_1>) = [-1, 1] 2 pi_1,0 pi_1,1
  # = [-1, 1] sqrt3 / 4; -1/2 p (g - <g, p>) = [3/32, -3/32] as at tau = 1.
  logits = jnp.array([np.log(3.0), 0.0])
  key = key_with_sample(logits, 1)
  _, grad = vjp_at(estimators.reinmax, key, logits, jnp.array([0.0, 1.0]), 2.0)
  np.testing.assert_allclose(grad, [-np.sqrt(3) / 4 + 3 / 32, np.sqrt(3) / 4 - 3 / 32], rtol=1e-6)
  # tau = 1/2: softmax(2 theta) = [9/10, 1/10]; D = e_0, g = [1, 0]: pi_1 = [0.95, 0.05];
  # 2 pi_1 (g - 0.95) = [0.095, -0.095]; -1/2 p (g - 3/4) = [-3/32, 3/32]; sum [1/800, -1/800].
  key = key_with_sample(logits, 0)
  _, grad = vjp_at(estimators.reinmax, key, logits, jnp.array([1.0, 0.0]), 0.5)
  np.testing.assert_allclose(grad, [1 / 800, -1 / 800], rtol=1e-4)


# ---------------------------------------------------------------------------
# Second derivatives: the Hessian of each estimator's stated surrogate (the
# perturbation, or the distribution in a stop-gradient, held fixed), checked
# against central finite differences of the surrogate's gradient written out
# in float64 numpy (step 1e-6: truncation error ~1e-12, rounding ~1e-10).
# ---------------------------------------------------------------------------


def _softmax_vjp_np(s, w, tau=1.0):
  return s * (w - w @ s) / tau


def _gst_gradient(theta0, index, tau, gap_rule):
  """theta -> J_tau(theta + c)^T w with GST's perturbation c computed at theta0 and fixed."""
  p = softmax_np(theta0)
  gap = 1.0 if gap_rule == "1.0" else -np.log1p(-p[index]) / p[index]
  x = np.minimum(theta0, theta0.max() - gap)
  x[index] = theta0.max()
  return lambda theta, w: _softmax_vjp_np(softmax_np((theta + x - theta0) / tau), w, tau)


def _reinmax_gradient(theta0, index, tau):
  """theta -> grad of 2 softmax(theta + c) - softmax(theta) / 2, c= log pi_1(theta0) - theta0."""
  pi_1 = 0.5 * (np.eye(len(theta0))[index] + softmax_np(theta0 / tau))
  shift = np.log(pi_1) - theta0
  return lambda theta, w: (
    2.0 * _softmax_vjp_np(softmax_np(theta + shift), w)
    - 0.5 * _softmax_vjp_np(softmax_np(theta), w)
  )


def _zgr_gradient(theta0, index, tau):
  """theta -> gradient of (softmax(theta) + (D - p0) log p_D(theta)) / 2, p0 = softmax(theta0)."""
  del tau
  d, p0 = np.eye(len(theta0))[index], softmax_np(theta0)
  return lambda theta, w: (
    0.5 * (_softmax_vjp_np(softmax_np(theta), w) + (w @ (d - p0)) * (d - softmax_np(theta)))
  )


SURROGATES = {
  "gst": lambda theta0, index, tau: _gst_gradient(theta0, index, tau, "1.0"),
  "gst_p": lambda theta0, index, tau: _gst_gradient(theta0, index, tau, "p"),
  "reinmax": _reinmax_gradient,
  "zgr": _zgr_gradient,
}


def _second_derivative(name, logits_np, index, tau, w, v):
  """(library d/dtheta <v, grad>, finite differences of the surrogate's <v, grad>), float64."""
  with jax.enable_x64(True):
    logits = jnp.asarray(logits_np)
    key = key_with_sample(logits, index)
    estimator = estimators.get(name)

    def directional(theta):
      grad = jax.grad(lambda t: jnp.sum(jnp.asarray(w) * estimator(key, t, tau=tau)))(theta)
      return jnp.sum(jnp.asarray(v) * grad)

    library = np.asarray(jax.grad(directional)(logits))
  gradient = SURROGATES[name](logits_np, index, tau)
  step = 1e-6
  expected = np.array(
    [
      (v @ gradient(logits_np + step * e, w) - v @ gradient(logits_np - step * e, w)) / (2 * step)
      for e in np.eye(len(logits_np))
    ]
  )
  return library, expected


def test_gst_second_derivative_of_the_issue_example():
  """GST-1.0 at logits [0.2, 0.5, -0.1], D = 0, tau 0.5, w = [1, -2, 0.5], v = [0.3, 1, -0.7]:
  the surrogate's finite differences give [0.611, -0.742, 0.130] (the review's numbers);
  before the fix the library returned [0, 0, 0]."""
  library, expected = _second_derivative(
    "gst",
    np.array([0.2, 0.5, -0.1]),
    0,
    0.5,
    np.array([1.0, -2.0, 0.5]),
    np.array([0.3, 1.0, -0.7]),
  )
  np.testing.assert_allclose(expected, [0.611, -0.742, 0.130], atol=1e-3)
  np.testing.assert_allclose(library, expected, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", list(SURROGATES))
@pytest.mark.parametrize("index, tau", [(0, 0.5), (2, 1.0), (3, 2.0)])
def test_second_derivative_is_the_hessian_of_the_surrogate(name, index, tau):
  w = np.array([0.7, -1.3, 2.1, 0.4])
  v = np.array([1.0, -0.5, 0.25, 2.0])
  library, expected = _second_derivative(name, np.array([0.6, -0.4, 1.1, 0.0]), index, tau, w, v)
  np.testing.assert_allclose(library, expected, rtol=1e-6, atol=1e-8)


def test_zgr_ignores_tau_in_its_first_derivative():
  """ZGR has no temperature: at tau = 0.3 its gradient is the tau-free closed form (softmax of the
  logits themselves), the same as at tau = 1."""
  logits = jnp.asarray(LOGITS[:4], jnp.float32)
  g = np.array([0.4, -1.0, 0.7, 0.2])
  for index in range(4):
    key = key_with_sample(logits, index)
    _, at_tau = vjp_at(estimators.zgr, key, logits, jnp.asarray(g, jnp.float32), 0.3)
    expected = _zgr_gradient(np.asarray(logits, np.float64), index, 0.3)(
      np.asarray(logits, np.float64), g
    )
    np.testing.assert_allclose(at_tau, expected, rtol=1e-5, atol=1e-7)


def test_gst_p_is_accurate_where_the_sample_is_nearly_certain():
  """p_D = 1 - 1.5e-7 in float32: the gap -log(1 - p_D) / p_D must come from the other
  categories' mass, not from 1 - p_D (which rounds away in float32): the gradient within 1e-5 of
  float64's (it was 37 % off)."""
  logits = jnp.array([0.0, np.log(1.5e-7)], jnp.float32)
  g = jnp.array([0.3, -0.7])

  def gradient(theta):
    gst_p = lambda t: estimators.gapped_straight_through(jax.random.key(0), t, tau=0.5, gap="p")  # noqa: E731
    return np.asarray(jax.grad(lambda t: jnp.sum(g * gst_p(t)))(theta), np.float64)

  ours = gradient(logits)
  with jax.enable_x64(True):
    reference = gradient(jnp.asarray(logits, jnp.float64))
  assert np.abs(reference).max() > 0
  np.testing.assert_allclose(ours, reference, rtol=1e-5)
