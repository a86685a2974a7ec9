"""gr_jax.numpyro: NumPyro distributions with exact one-hot samples and gr_jax's gradients.

The statistical tests compare NumPyro's Trace_ELBO gradient, averaged over fixed keys, with
values computed without the library (tests/adapters_reference.py): the estimator's expected
gradient and the true ELBO gradient, both from enumerating the latents.
"""

import jax
import jax.numpy as jnp
import numpy as np
import numpyro  # the test extra installs it: a failing import fails the suite
import numpyro.distributions as dist
import optax
import pytest

from gr_jax import numpyro as gnp
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
  expected_st,
  expected_stgs,
)
from tests.estimators.reference import assert_mean_close, softmax_np


def categorical_model(estimator):
  del estimator  # the guide's
  with numpyro.plate("latents", 2):
    z = numpyro.sample("z", gnp.OneHotCategorical(jnp.asarray(PRIOR, jnp.float32)))
  mu = z[0] @ W[0] + z[1] @ W[1] + z[0] @ jnp.asarray(A, jnp.float32) @ z[1]
  numpyro.sample("x", dist.Normal(mu, 1.0), obs=X)


def categorical_guide(estimator):
  theta = numpyro.param("theta", jnp.asarray(THETA, jnp.float32))
  with numpyro.plate("latents", 2):
    numpyro.sample("z", gnp.OneHotCategorical(theta, estimator=estimator, tau=TAU))


def binary_model(estimator):
  del estimator  # the guide's
  with numpyro.plate("latents", 2):
    v = numpyro.sample("v", dist.Bernoulli(logits=jnp.asarray(PRIOR_BIN, jnp.float32)))
  numpyro.sample("x", dist.Normal(v @ W_BIN + A_BIN * v[0] * v[1], 1.0), obs=X)


def binary_guide(estimator):
  logits = numpyro.param("theta", jnp.asarray(LOGITS_BIN, jnp.float32))
  with numpyro.plate("latents", 2):
    numpyro.sample("v", gnp.Bernoulli(logits, estimator=estimator, tau=TAU))


def elbo_gradient_draws(model, guide, estimator, theta, num_draws=20_000, seed=0):
  """num_draws gradients of the ELBO (minus gnp.Trace_ELBO's loss) in theta, at fixed keys."""
  elbo = gnp.Trace_ELBO()

  def one(key):
    loss = lambda theta: elbo.loss(key, {"theta": theta}, model, guide, estimator)
    return -jax.grad(loss)(jnp.asarray(theta, jnp.float32))

  keys = jax.random.split(jax.random.key(seed), num_draws)
  return np.asarray(jax.jit(jax.vmap(one))(keys), np.float64)


def assert_resolves_the_bias(draws, target, true_grad):
  """The checks can fail: the estimator's target is > 5 standard errors from the true one."""
  se = draws.std(0) / np.sqrt(len(draws))
  assert np.max(np.abs(target - true_grad) / se) > 5


@pytest.mark.parametrize("estimator", ["st", "st_gs", "gr_mc10"])
def test_categorical_elbo_gradient_is_the_estimators_expectation(estimator):
  h, q, true_grad = categorical_reference()
  draws = elbo_gradient_draws(categorical_model, categorical_guide, estimator, THETA)
  for j in range(2):
    if estimator == "st":
      target, target_se = expected_st(THETA[j], h[j], q[j])
    else:
      target, target_se = expected_stgs(THETA[j], h[j])
    # The direct term -grad log q(D) at D fixed has mean 0: it only adds variance.
    assert_mean_close(draws[:, j], target, target_se)
    assert_resolves_the_bias(draws[:, j], target, true_grad[j])


@pytest.mark.parametrize("estimator", ["st_gs", "gr_mc10", "gr_exact"])
def test_binary_elbo_gradient_is_the_estimators_expectation(estimator):
  """Bernoulli(l) is the two-category one-hot of logits (0, l): its gradient is the l entry."""
  h, p, true_grad = binary_reference()
  draws = elbo_gradient_draws(binary_model, binary_guide, estimator, LOGITS_BIN)
  for j in range(2):
    two_logits = np.array([0.0, LOGITS_BIN[j]])
    cotangents = np.stack([np.zeros(2), h[j]], axis=-1)  # df/dD = (0, df/dv) at v = 0, 1
    target, target_se = expected_stgs(two_logits, cotangents)
    assert_mean_close(draws[:, j], target[1], target_se[1])
    assert_resolves_the_bias(draws[:, j], target[1], true_grad[j])


def test_numpyros_own_elbos_agree_and_add_no_score_term():
  """has_rsample: TraceGraph_ELBO treats the site as reparameterized (no REINFORCE term), so
  NumPyro's Trace_ELBO, TraceGraph_ELBO and gnp.Trace_ELBO give one loss and one gradient."""
  key, params = jax.random.key(3), {"theta": jnp.asarray(THETA, jnp.float32)}
  results = [
    jax.value_and_grad(
      lambda p: elbo.loss(key, p, categorical_model, categorical_guide, "gr_mc10")
    )(params)
    for elbo in (gnp.Trace_ELBO(), numpyro.infer.Trace_ELBO(), numpyro.infer.TraceGraph_ELBO())
  ]
  for loss, grad in results[1:]:
    np.testing.assert_allclose(loss, results[0][0], rtol=1e-6)
    np.testing.assert_allclose(grad["theta"], results[0][1]["theta"], rtol=1e-5, atol=1e-6)


MIXTURE_LOCS = np.array([-2.0, 2.0])


def mixture_data(num=100):
  rng = np.random.default_rng(0)
  labels = rng.integers(0, 2, num)
  return jnp.asarray(MIXTURE_LOCS[labels] + 0.5 * rng.normal(size=num), jnp.float32), labels


def mixture_model(x, estimator):
  del estimator  # the guide's
  locs = numpyro.param("locs", jnp.array([-0.5, 0.5]))
  with numpyro.plate("data", x.shape[0]):
    z = numpyro.sample("z", gnp.OneHotCategorical(jnp.zeros(2)))
    numpyro.sample("x", dist.Normal(z @ locs, 0.5), obs=x)


def mixture_guide(x, estimator):
  logits = numpyro.param("assignment_logits", jnp.zeros((x.shape[0], 2)))
  with numpyro.plate("data", x.shape[0]):
    numpyro.sample("z", gnp.OneHotCategorical(logits, estimator=estimator, tau=0.5))


@pytest.mark.parametrize("estimator", ["gr_mc10", "st_gs"])
def test_svi_learns_a_gaussian_mixture(estimator):
  """SVI over 100 categorical assignments finds the two clusters (sd 0.5, 2 apart from 0)."""
  x, labels = mixture_data()
  svi = numpyro.infer.SVI(mixture_model, mixture_guide, optax.adam(0.05), gnp.Trace_ELBO())
  result = svi.run(jax.random.key(0), 1500, x, estimator, progress_bar=False)
  # The cluster means of 100 points are within 0.15 of +-2 (SE 0.07); a mixture that did
  # not learn stays near its initial +-0.5.
  np.testing.assert_allclose(result.params["locs"], MIXTURE_LOCS, atol=0.25)
  assignments = np.argmax(result.params["assignment_logits"], -1)
  assert np.mean(assignments == labels) > 0.95
  assert np.mean(result.losses[-100:]) < np.mean(result.losses[:100]) - 100


def test_shapes_expand_to_event_and_plates():
  d = gnp.OneHotCategorical(jnp.zeros((4, 3)), estimator="gr_mc10", tau=0.5)
  assert (d.batch_shape, d.event_shape) == ((4,), (3,))
  sample = d.sample(jax.random.key(0), (2,))
  assert sample.shape == (2, 4, 3) and sample.dtype == jnp.float32
  np.testing.assert_array_equal(sample.sum(-1), 1.0)  # exact one-hots
  assert set(np.unique(sample)) <= {0.0, 1.0}
  assert d.log_prob(sample).shape == (2, 4)
  assert d.expand((5, 4)).sample(jax.random.key(0)).shape == (5, 4, 3)
  assert d.to_event(1).log_prob(sample).shape == (2,)
  b = gnp.Bernoulli(probs=jnp.full((4,), 0.3), estimator="gr_exact")
  assert (b.batch_shape, b.event_shape, b.sample(jax.random.key(0), (2,)).shape) == (
    (4,),
    (),
    (2, 4),
  )
  np.testing.assert_allclose(b.logits, np.log(0.3 / 0.7), rtol=1e-6)

  def guide():
    with numpyro.plate("outer", 5, dim=-2), numpyro.plate("inner", 4):
      numpyro.sample("z", gnp.OneHotCategorical(jnp.zeros(3), estimator="st_gs"))
      numpyro.sample("v", gnp.Bernoulli(jnp.zeros(()), estimator="gr_exact"))

  trace = numpyro.handlers.trace(numpyro.handlers.seed(guide, 0)).get_trace()
  assert trace["z"]["value"].shape == (5, 4, 3) and trace["v"]["value"].shape == (5, 4)


def test_same_key_same_sample_for_every_estimator():
  """Common random numbers: the estimator changes the gradient, never D."""
  logits = jnp.array([[0.3, -1.0, 0.8], [2.0, 0.0, -0.5]])
  samples = [
    gnp.OneHotCategorical(logits, estimator=name).sample(jax.random.key(5), (7,))
    for name in (None, "st", "st_gs", "gr_mc10", "gr_qmc16", "zgr", "reinmax", "gst")
  ]
  for sample in samples[1:]:
    np.testing.assert_array_equal(sample, samples[0])


def test_log_prob_is_the_discrete_distributions_and_linear_in_the_value():
  logits = jnp.array([0.3, -1.0, 0.8])
  d = gnp.OneHotCategorical(logits, estimator="st_gs")
  log_q = np.log(softmax_np(np.asarray(logits, np.float64)))
  np.testing.assert_allclose(d.log_prob(jnp.eye(3)), log_q, rtol=1e-6)
  np.testing.assert_allclose(jax.grad(d.log_prob)(jnp.eye(3)[1]), log_q, rtol=1e-6)
  b = gnp.Bernoulli(jnp.array(0.4), estimator="st")
  np.testing.assert_allclose(b.log_prob(1.0), np.log(1 / (1 + np.exp(-0.4))), rtol=1e-6)
  np.testing.assert_allclose(jax.grad(b.log_prob)(0.0), 0.4, rtol=1e-6)


def test_masked_categories_and_masked_sites():
  """-inf logits: never drawn, zero gradient, log_prob -inf only where the value takes them;
  .mask(False) removes a site's log_prob and so its score-term gradient."""
  logits = jnp.array([[0.0, -jnp.inf, 1.0]] * 500)

  def draw(theta):
    d = gnp.OneHotCategorical(theta, estimator="gr_mc10", tau=0.5)
    return d.sample(jax.random.key(2)) @ jnp.array([1.0, 5.0, -2.0])

  samples = gnp.OneHotCategorical(logits, estimator="gr_mc10").sample(jax.random.key(2))
  assert samples[:, 1].sum() == 0
  grad = jax.grad(lambda t: draw(t).sum())(logits)
  assert np.all(grad[:, 1] == 0) and np.all(np.isfinite(grad))
  d = gnp.OneHotCategorical(logits[0])
  assert np.isfinite(d.log_prob(jnp.eye(3)[0])) and d.log_prob(jnp.eye(3)[1]) == -jnp.inf
  masked = gnp.OneHotCategorical(logits[0], estimator="st").mask(False)
  assert jax.grad(lambda t: masked.log_prob(jnp.eye(3)[0]))(logits[0]).sum() == 0


def test_tau_traced_and_per_variable():
  logits = jnp.array([[0.3, -1.0, 0.8], [2.0, 0.0, -0.5]])
  cotangent = jnp.array([1.0, -2.0, 0.5])

  def grad(tau):
    sample = lambda t: gnp.OneHotCategorical(t, estimator="st", tau=tau).sample(jax.random.key(0))
    return jax.grad(lambda t: jnp.sum(sample(t) @ cotangent))(logits)

  per_variable = jax.jit(grad)(jnp.array([0.5, 2.0]))
  np.testing.assert_allclose(per_variable[0], grad(0.5)[0], rtol=1e-6)
  np.testing.assert_allclose(per_variable[1], grad(2.0)[1], rtol=1e-6)


@pytest.mark.parametrize(
  "name, reason",
  [
    ("gs", "relaxed"),
    ("reinforce", "TraceGraph_ELBO"),
    ("rloo4", "gr_jax.estimators.rloo"),
    ("disarm", "gr_jax.estimators.disarm"),
    ("st_gs_x2", "num_particles=2"),
    ("nope", "unknown estimator"),
  ],
)
def test_refused_estimators_name_the_reason(name, reason):
  with pytest.raises(ValueError, match=reason) as error:
    gnp.OneHotCategorical(jnp.zeros(3), estimator=name)
  assert "\n" not in str(error.value)


def test_one_line_errors_for_bad_sites():
  with pytest.raises(ValueError, match="'gr_exact' is for two categories"):
    gnp.OneHotCategorical(jnp.zeros(3), estimator="gr_exact")
  with pytest.raises(ValueError, match="exactly one of logits and probs"):
    gnp.Bernoulli()

  def plain_guide(estimator):
    numpyro.sample("z", dist.Categorical(logits=jnp.zeros(3)))

  with pytest.raises(ValueError, match="guide site 'z' is discrete .* without a gradient"):
    gnp.Trace_ELBO().loss(jax.random.key(0), {}, plain_guide, plain_guide, None)

  def index_model(estimator):
    with numpyro.plate("latents", 2):
      numpyro.sample("z", dist.Categorical(logits=jnp.zeros(3)))

  with pytest.raises(ValueError, match="model site 'z' scores the guide's one-hot sample"):
    gnp.Trace_ELBO().loss(
      jax.random.key(0), {"theta": jnp.asarray(THETA)}, index_model, categorical_guide, "st_gs"
    )
