"""Tests of gr_jax.diagnostics against closed forms and exact enumeration."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gr_jax import diagnostics, estimators

Z = 5.0  # tolerances in standard errors, as in test_estimators.py


def _gaussian_draws(mean, chol):
  def draw(key):
    z = jax.random.normal(key, (mean.shape[0],))
    return {"a": mean + chol @ z, "b": {"c": jnp.ones(2)}}  # a constant leaf: zero variance

  return draw


def test_moments_match_a_gaussian_with_known_covariance():
  rng = np.random.default_rng(0)
  mean = jnp.asarray(rng.normal(size=5), jnp.float32)
  chol = jnp.asarray(np.tril(rng.normal(size=(5, 5))), jnp.float32)
  cov = np.asarray(chol) @ np.asarray(chol).T
  r = 20_000
  stats = jax.jit(
    lambda k: diagnostics.gradient_stats(_gaussian_draws(mean, chol), k, r, chunk_size=500)
  )(jax.random.key(1))
  # mean: per-coordinate SE sqrt(Sigma_ii / R)
  np.testing.assert_array_less(np.abs(stats.mean["a"] - mean), Z * np.sqrt(np.diag(cov) / r))
  # per-coordinate variance: SE of a Gaussian sample variance is Sigma_ii sqrt(2 / (R - 1))
  np.testing.assert_array_less(
    np.abs(stats.variance["a"] - np.diag(cov)), Z * np.diag(cov) * np.sqrt(2 / (r - 1))
  )
  # trace: Var(sum of sample variances) = 2 tr(Sigma^2) / (R - 1)
  trace_se = np.sqrt(2 * np.trace(cov @ cov) / (r - 1))
  assert abs(float(stats.trace_variance) - np.trace(cov)) < Z * trace_se
  np.testing.assert_array_equal(stats.variance["b"]["c"], 0.0)
  # Against a reference: squared bias ||mu - ref||^2 and MSE = tr Sigma + bias^2.
  ref = {"a": mean + 0.3, "b": {"c": jnp.ones(2)}}
  bias2 = 5 * 0.3**2
  # SE of the squared-bias estimate: 2 |mu - ref|^T (SE of the mean) plus the trace's.
  bias_se = 2 * np.sqrt(0.09 * np.sum(cov) / r) + trace_se / r
  assert abs(float(stats.squared_bias(ref)) - bias2) < Z * bias_se
  assert abs(float(stats.mse(ref)) - (np.trace(cov) + bias2)) < Z * (trace_se + bias_se)


def test_squared_bias_is_corrected_for_monte_carlo_error():
  """An unbiased estimator against its own mean: bias^2 ~ 0, where the plug-in is tr(Sigma)/R."""
  chol = jnp.eye(50, dtype=jnp.float32)
  stats = diagnostics.gradient_stats(_gaussian_draws(jnp.zeros(50), chol), jax.random.key(2), 400)
  zero = {"a": jnp.zeros(50), "b": {"c": jnp.ones(2)}}
  plug_in = float(sum(jnp.sum(m**2) for m in jax.tree.leaves(stats.mean)) - 0.0)
  assert plug_in > 50 / 400 * 0.5  # the uncorrected value is about tr(Sigma)/R = 0.125
  # corrected: mean 0, SE ~ sqrt(2 * 50) / R
  assert abs(float(stats.squared_bias(zero))) < Z * np.sqrt(2 * 50) / 400


def test_chunking_gives_the_same_draws():
  draw = _gaussian_draws(jnp.arange(3.0), jnp.eye(3))
  a = diagnostics.gradient_stats(draw, jax.random.key(3), 120)
  b = diagnostics.gradient_stats(draw, jax.random.key(3), 120, chunk_size=40)
  np.testing.assert_allclose(a.mean["a"], b.mean["a"], rtol=1e-5)
  np.testing.assert_allclose(a.trace_variance, b.trace_variance, rtol=1e-4)
  with pytest.raises(ValueError, match="chunk_size"):
    diagnostics.gradient_stats(draw, jax.random.key(3), 120, chunk_size=7)
  with pytest.raises(ValueError, match="num_draws"):
    diagnostics.gradient_stats(draw, jax.random.key(3), 1)


def test_exact_gradient_by_enumeration_matches_analytic():
  """f(D) = <a, D_1> <b, D_2> + <w, D_3>: E f = <a, p_1><b, p_2> + <w, p_3>."""
  rng = np.random.default_rng(4)
  logits = jnp.asarray(rng.normal(size=(3, 4)))
  a, b, w = (jnp.asarray(rng.normal(size=4)) for _ in range(3))
  f = lambda d, _: (d[0] @ a) * (d[1] @ b) + d[2] @ w
  p = jax.nn.softmax(logits, axis=-1)
  jac = lambda q: jnp.diag(q) - jnp.outer(q, q)  # d softmax / d logits
  expected = jnp.stack([jac(p[0]) @ a * (p[1] @ b), jac(p[1]) @ b * (p[0] @ a), jac(p[2]) @ w])
  np.testing.assert_allclose(diagnostics.exact_gradient(f, logits), expected, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(
    diagnostics.exact_expectation(f, logits), (p[0] @ a) * (p[1] @ b) + p[2] @ w, rtol=1e-5
  )
  with pytest.raises(ValueError, match="reference_gradient"):
    diagnostics.enumerate_one_hot(30, 16)


# The small problem of test_estimators.py: n = 4, f(D) = D^T A D.
LOGITS = jnp.array([0.6, -0.4, 1.1, 0.0])
A = jnp.array(
  [[1.0, -2.0, 0.5, 3.0], [0.0, 2.0, -1.0, 1.0], [2.0, 0.5, -3.0, 0.0], [1.0, 1.0, 0.0, -1.0]]
)
TAU = 0.5


def _loss(d):
  return d @ A @ d


def test_reinforce_reference_agrees_with_exact_gradient():
  exact = diagnostics.exact_gradient(lambda d, _: _loss(d[0]), LOGITS[None])[0]

  def reinforce(key):
    def surrogate(theta):
      d = estimators.reinforce(key, theta)
      log_prob = estimators.categorical_log_prob(theta, d)
      return _loss(d) + estimators.score_function_surrogate(log_prob, _loss(d), 0.0)

    return jax.grad(surrogate)(LOGITS)

  mean, se = diagnostics.reference_gradient(reinforce, jax.random.key(5), 40_000, chunk_size=4_000)
  np.testing.assert_array_less(np.abs(mean - exact), Z * se)


def _draws(fn, key, num, **kw):
  def one(k):
    grad, d = jax.grad(lambda t: (lambda s: (_loss(s), s))(fn(k, t, tau=TAU, **kw)), has_aux=True)(
      LOGITS
    )
    return grad, jnp.argmax(d)

  grads, samples = jax.jit(jax.vmap(one))(jax.random.split(key, num))
  return np.asarray(grads, np.float64), np.asarray(samples)


@pytest.mark.parametrize("k,b", [(1, 1), (10, 1), (10, 4), (100, 2)])
def test_proposition_3_variance_decomposition(k, b):
  """Var[mean of B GR-MCK draws] = E[Var(ST-GS | D)] / (B K) + Var(GR) / B."""
  stgs, groups = _draws(estimators.st_gumbel_softmax, jax.random.key(6), 200_000)
  parts = diagnostics.variance_decomposition(stgs, groups)
  # The two terms are estimated from ST-GS draws grouped by D; GR-MCK is measured directly.
  r = 20_000
  gr, _ = _draws(estimators.gumbel_rao, jax.random.key(7 + k + b), r * b, num_samples=k)
  batched = gr.reshape(r, b, -1).mean(1)
  sq_dev = ((batched - batched.mean(0)) ** 2).sum(-1)
  measured, measured_se = sq_dev.mean(), sq_dev.std() / np.sqrt(r)
  predicted = parts.within / (b * k) + parts.between / b
  # The prediction's own error (200k ST-GS draws) is about 10x smaller than the measured SE.
  assert abs(measured - predicted) < Z * measured_se, (measured, predicted, measured_se)
  assert parts.within > 0 and parts.between > 0
  assert np.isclose(parts.total, ((stgs - stgs.mean(0)) ** 2).sum(-1).mean())


def test_exact_gradient_needs_a_two_argument_loss():
  logits = jnp.zeros((2, 3))
  with pytest.raises(TypeError, match=r"loss_fn must take two arguments, \(sample, logits\)"):
    diagnostics.exact_gradient(lambda d: jnp.sum(d), logits)
  assert diagnostics.exact_gradient(lambda d, _: jnp.sum(d[:, 0]), logits).shape == (2, 3)


def test_compare_measures_each_family_against_the_exact_gradient():
  """One call on a model of one's own: a linear encoder's logits (params W, x fixed), a quadratic
  loss of the sample. The unbiased estimators' squared bias is within Monte Carlo noise of 0 (its
  sd is at most sqrt(2) trace_var / R: the check allows 6 of those); ST-GS at tau 0.5 is biased
  far beyond it."""
  x = jnp.array([1.0, -0.5, 0.3])
  w = jax.random.normal(jax.random.key(0), (3, 2, 3)) * 0.5  # params -> logits [2, 3]
  logits_fn = lambda p: jnp.einsum("i,ijk->jk", x, p)  # noqa: E731
  target = jnp.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
  loss = lambda p, d: jnp.sum((d - target) ** 2 * jnp.array([1.0, 2.0, 3.0]))  # noqa: E731
  exact_logits = diagnostics.exact_gradient(lambda d, _: loss(w, d), logits_fn(w))
  exact = jax.vjp(logits_fn, w)[1](exact_logits)[0]  # the chain rule through the encoder
  num_draws = 4000
  results = diagnostics.compare(
    ["reinforce", "rloo2", "st_gs", "gs"],
    loss,
    w,
    jax.random.key(1),
    num_draws,
    logits_fn=logits_fn,
    tau=0.5,
    exact=exact,
    chunk_size=1000,
  )
  assert list(results) == ["reinforce", "rloo2", "st_gs", "gs"]
  for name in ("reinforce", "rloo2"):
    r = results[name]
    assert abs(r.squared_bias) < 6 * np.sqrt(2) * r.trace_variance / num_draws, (name, r)
    assert r.mse == pytest.approx(r.trace_variance + r.squared_bias)
  st_gs = results["st_gs"]
  assert st_gs.squared_bias > 20 * np.sqrt(2) * st_gs.trace_variance / num_draws
  assert results["rloo2"].loss_evaluations == 2 and results["st_gs"].loss_evaluations == 1
  assert results["reinforce"].stats.mean.shape == w.shape
  # Without the exact gradient: the variance alone.
  alone = diagnostics.compare(["st_gs"], loss, w, jax.random.key(1), 10, logits_fn=logits_fn)
  assert alone["st_gs"].squared_bias is None and alone["st_gs"].trace_variance > 0
