"""Tests of gr_jax.models.vae: shapes, the hypercube embedding, the KL term, the IWAE bound."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from gr_jax import estimators
from gr_jax.models import vae


@pytest.mark.parametrize("arity,num_vars", [(2, 240), (4, 120), (8, 80), (16, 60)])
def test_shapes(arity, num_vars):
  model = vae.DiscreteVAE(num_vars, arity, rngs=nnx.Rngs(0))
  x = jnp.zeros((3, 784))
  logits = model.encode(x)
  assert logits.shape == (3, num_vars, arity)
  sample = jax.nn.one_hot(jnp.zeros((3, num_vars), jnp.int32), arity)
  assert vae.hypercube_embedding(sample).shape == (3, 240)
  assert model.decode(sample).shape == (3, 784)


def test_hypercube_corners_are_distinct_corners():
  for arity in (2, 4, 8, 16):
    corners = np.asarray(vae.hypercube_corners(arity))
    bits = int(math.log2(arity))
    assert corners.shape == (arity, bits)
    assert set(np.unique(corners)) == {-1.0, 1.0}
    assert len({tuple(c) for c in corners}) == arity
  # category 5 = 0b0101 -> (+1, -1, +1, -1) in bit order
  np.testing.assert_array_equal(vae.hypercube_corners(16)[5], [1, -1, 1, -1])
  relaxed = jnp.array([[0.5, 0.5, 0.0, 0.0]])
  np.testing.assert_allclose(vae.hypercube_embedding(relaxed[None]), [[0.0, -1.0]])


@pytest.mark.parametrize("arity", [3, 6, 1, 0])
def test_arity_must_be_power_of_two(arity):
  with pytest.raises(ValueError, match="arity must be a power of two"):
    vae.DiscreteVAE(4, arity, rngs=nnx.Rngs(0))


# Two variables of arity 3: the 9 joint samples are enumerated exactly.
_LOGITS = jnp.array([[[0.3, -1.2, 0.8], [1.5, 0.1, -0.4]]])
_LOG_PRIOR = jax.nn.log_softmax(jnp.array([[0.2, 0.0, -0.5], [-1.0, 0.4, 0.3]]), axis=-1)
_SAMPLES = [
  jnp.stack([jax.nn.one_hot(a, 3), jax.nn.one_hot(b, 3)])[None] for a in range(3) for b in range(3)
]


def _q_of(sample):
  return float(jnp.prod(jnp.sum(sample * jax.nn.softmax(_LOGITS, axis=-1), axis=-1)))


def test_analytic_kl_is_the_closed_form_and_the_expected_sampled_kl():
  q = np.asarray(jax.nn.softmax(_LOGITS, axis=-1), np.float64)
  p = np.exp(np.asarray(_LOG_PRIOR, np.float64))
  closed_form = np.sum(q * np.log(q / p))
  analytic = vae.kl_term(_LOG_PRIOR, _LOGITS, _SAMPLES[0], "analytic")
  np.testing.assert_allclose(analytic, [closed_form], rtol=1e-5)
  expected_sampled = sum(
    _q_of(d) * vae.kl_term(_LOG_PRIOR, _LOGITS, d, "sampled") for d in _SAMPLES
  )
  np.testing.assert_allclose(expected_sampled, [closed_form], rtol=1e-5)
  for d in _SAMPLES:  # "pathwise" is "sampled"'s value
    np.testing.assert_array_equal(
      vae.kl_term(_LOG_PRIOR, _LOGITS, d, "pathwise"),
      vae.kl_term(_LOG_PRIOR, _LOGITS, d, "sampled"),
    )


def test_the_kl_terms_gradients():
  """With the sample held fixed, "sampled"'s logit gradient is the direct term d - q (whose
  expectation over exact samples is 0), "pathwise"'s is 0; through the sample both are
  log q - log p. "analytic"'s logit gradient is the closed form q (log q - log p - KL_j) and
  the gradient of the enumerated expectation sum_D q(D) (log q(D) - log p(D)); the prior's
  gradient is the same for all three in expectation."""
  q = jax.nn.softmax(_LOGITS, axis=-1)
  grad = lambda estimate, argnums, d: jax.grad(
    lambda lp, lg, s: jnp.sum(vae.kl_term(lp, lg, s, estimate)), argnums
  )(_LOG_PRIOR, _LOGITS, d)
  direct = []
  for d in _SAMPLES:
    np.testing.assert_allclose(grad("sampled", 1, d), d - q, atol=1e-6)
    np.testing.assert_array_equal(grad("pathwise", 1, d), jnp.zeros_like(q))
    through_sample = jnp.log(q) - _LOG_PRIOR
    np.testing.assert_allclose(grad("sampled", 2, d), through_sample, atol=1e-6)
    np.testing.assert_allclose(grad("pathwise", 2, d), through_sample, atol=1e-6)
    np.testing.assert_array_equal(grad("pathwise", 0, d), grad("sampled", 0, d))
    direct.append(_q_of(d) * grad("sampled", 1, d))
  np.testing.assert_allclose(sum(direct), jnp.zeros_like(q), atol=1e-6)
  kl_per_variable = jnp.sum(q * (jnp.log(q) - _LOG_PRIOR), axis=-1, keepdims=True)
  np.testing.assert_allclose(
    grad("analytic", 1, _SAMPLES[0]), q * (jnp.log(q) - _LOG_PRIOR - kl_per_variable), atol=1e-6
  )
  enumerated = jax.grad(
    lambda lg: sum(
      jnp.prod(jnp.sum(d * jax.nn.softmax(lg, axis=-1), axis=-1))
      * jnp.sum(vae.kl_term(_LOG_PRIOR, lg, d, "sampled"))
      for d in _SAMPLES
    )
  )(_LOGITS)
  np.testing.assert_allclose(grad("analytic", 1, _SAMPLES[0]), enumerated, atol=1e-6)
  expected_prior_grad = sum(_q_of(d) * grad("sampled", 0, d) for d in _SAMPLES)
  np.testing.assert_allclose(grad("analytic", 0, _SAMPLES[0]), expected_prior_grad, atol=1e-6)


def test_an_unknown_kl_estimate_is_refused_naming_the_field():
  with pytest.raises(
    ValueError, match=r"kl_estimate must be one of \['analytic', 'pathwise', 'sampled'\]"
  ):
    vae.DiscreteVAE(4, 2, kl_estimate="exact", rngs=nnx.Rngs(0))
  with pytest.raises(ValueError, match="kl_estimate must be one of"):
    vae.kl_term(_LOG_PRIOR, _LOGITS, _SAMPLES[0], "exact")


class _FixedPosterior(vae.DiscreteVAE):
  """One latent variable; the encoder returns given logits."""

  def __init__(self, logits, **kwargs):
    super().__init__(1, logits.shape[-1], **kwargs)
    self.fixed_logits = nnx.Variable(logits)

  def encode(self, x):
    return jnp.broadcast_to(self.fixed_logits.get_value(), (*x.shape[:-1], 1, self.arity))


def _exact_log_px(model, x):
  """log p(x) = log sum_D p(D) p(x | D) by enumerating the 8 values of D."""
  arity = model.arity
  samples = jax.nn.one_hot(jnp.arange(arity), arity)[:, None, :]  # [n, 1, n]
  log_lik = jnp.stack([vae.bernoulli_log_likelihood(model.decode(d[None]), x) for d in samples])
  return jax.nn.logsumexp(log_lik, axis=0) - math.log(arity)


def test_iwae_equals_log_px_when_q_is_the_posterior():
  base = vae.DiscreteVAE(1, 8, decoder_widths=(16,), num_pixels=784, rngs=nnx.Rngs(1))
  x = (jax.random.uniform(jax.random.key(0), (1, 784)) < 0.3).astype(jnp.float32)
  arity = 8
  samples = jax.nn.one_hot(jnp.arange(arity), arity)[:, None, :]
  log_lik = jnp.stack([vae.bernoulli_log_likelihood(base.decode(d[None]), x)[0] for d in samples])
  posterior_logits = log_lik - jax.nn.logsumexp(log_lik)
  model = _FixedPosterior(posterior_logits, decoder_widths=(16,), rngs=nnx.Rngs(1))
  model.decoder = base.decoder
  exact = _exact_log_px(model, x)
  for m in (1, 7, 50):
    bound = model.iwae_bound(x, jax.random.key(m), m, chunk_size=4)
    # Every importance weight equals p(x): exact up to float32 rounding.
    np.testing.assert_allclose(bound, exact, rtol=0, atol=1e-3)


def test_iwae_tightens_with_m_towards_log_px():
  model = _FixedPosterior(jnp.zeros(8), decoder_widths=(16,), rngs=nnx.Rngs(2))
  x = (jax.random.uniform(jax.random.key(1), (1, 784)) < 0.3).astype(jnp.float32)
  exact = float(_exact_log_px(model, x)[0])
  repeats = 200
  means = {}
  for m in (1, 10, 100):
    keys = jax.random.split(jax.random.key(m), repeats)
    draws = np.asarray(
      jax.jit(jax.vmap(lambda k, m=m: model.iwae_bound(x, k, m, chunk_size=25)[0]))(keys)
    )
    means[m] = (draws.mean(), draws.std() / np.sqrt(repeats))
  # The expected bound increases with M and stays below log p(x); the
  # differences are checked against 3 standard errors of the means.
  (m1, s1), (m10, s10), (m100, s100) = means[1], means[10], means[100]
  assert m1 + 3 * np.hypot(s1, s10) < m10
  assert m10 < m100 + 3 * np.hypot(s10, s100)
  assert m100 < exact + 3 * s100
  assert exact - m100 < exact - m1


def _binary_pair(num_vars=6, widths=(16,)):
  """A two-logit and a one-logit binary model with equal logit differences everywhere."""
  kwargs = dict(encoder_widths=widths, decoder_widths=widths, prior="learned")
  two = vae.DiscreteVAE(num_vars, 2, binary_logits="two", rngs=nnx.Rngs(3), **kwargs)
  one = vae.DiscreteVAE(num_vars, 2, binary_logits="one", rngs=nnx.Rngs(3), **kwargs)
  rng = np.random.default_rng(0)
  two.prior_logits.set_value(jnp.asarray(rng.normal(size=(num_vars, 2)), jnp.float32))
  one.prior_logits.set_value(two.prior_logits.get_value() @ jnp.array([-1.0, 1.0]))
  # The encoder's outputs are [m, 2] row-major: output 2j + k is logit k of latent j.
  last_two, last_one = two.encoder.layers[-1], one.encoder.layers[-1]
  last_one.kernel.set_value(
    last_two.kernel.get_value()[:, 1::2] - last_two.kernel.get_value()[:, 0::2]
  )
  last_one.bias.set_value(last_two.bias.get_value()[1::2] - last_two.bias.get_value()[0::2])
  return two, one


def test_one_logit_per_binary_latent_is_the_same_distribution_at_equal_differences():
  """binary_logits="one": q(D | x), p(D), the sample at a key and both bounds are those of the
  two-logit model whose logit differences it holds (the same family, another parameterization)."""
  two, one = _binary_pair()
  # The same hidden layers and decoder: NNX draws each layer's initial weights by position.
  np.testing.assert_array_equal(
    two.decoder.layers[0].kernel.get_value(), one.decoder.layers[0].kernel.get_value()
  )
  x = jnp.asarray(np.random.default_rng(1).random((5, 784)) < 0.3, jnp.float32)
  log_q_two = jax.nn.log_softmax(two.encode(x), axis=-1)
  log_q_one = jax.nn.log_softmax(one.encode(x), axis=-1)
  np.testing.assert_allclose(log_q_one, log_q_two, atol=2e-6)
  np.testing.assert_allclose(one.log_prior(), two.log_prior(), atol=1e-6)
  assert one.encode(x).shape == (5, 6, 2) and one.prior_logits.get_value().shape == (6,)
  st_gs, key = estimators.get("st_gs"), jax.random.key(4)
  bound_two = two.training_bound(x, key, st_gs, 0.5)
  bound_one = one.training_bound(x, key, st_gs, 0.5)
  np.testing.assert_array_equal(bound_one.samples[0], bound_two.samples[0])
  np.testing.assert_allclose(bound_one.bound, bound_two.bound, rtol=1e-5)
  np.testing.assert_allclose(one.iwae_bound(x, key, 20), two.iwae_bound(x, key, 20), rtol=1e-5)
  with pytest.raises(ValueError, match="binary_logits='one' is for binary latents"):
    vae.DiscreteVAE(4, 4, binary_logits="one", rngs=nnx.Rngs(0))


def test_the_encoder_sees_two_x_minus_one_minus_its_centring():
  x = jnp.asarray(np.random.default_rng(2).random((4, 784)) < 0.4, jnp.float32)
  centring = jnp.full(784, 0.2)
  plain = vae.DiscreteVAE(5, 4, encoder_widths=(8,), decoder_widths=(8,), rngs=nnx.Rngs(0))
  signed = vae.DiscreteVAE(
    5, 4, encoder_widths=(8,), decoder_widths=(8,), encoder_input="2x-1", rngs=nnx.Rngs(0)
  )
  key, st_gs = jax.random.key(0), estimators.get("st_gs")
  result = signed.training_bound(x, key, st_gs, 0.5, centring)
  np.testing.assert_array_equal(result.inference_inputs, 2 * x - 1)  # what the average tracks
  np.testing.assert_allclose(
    jax.nn.log_softmax(signed.encode(2 * x - 1 - centring)),
    jax.nn.log_softmax(plain.encode(2 * x - 1 - centring)),
    rtol=1e-6,
  )
  # The same encoder at another input: the bounds differ from the plain model's, the likelihood
  # is still of x (the decoder's target).
  assert not np.allclose(result.bound, plain.training_bound(x, key, st_gs, 0.5, centring).bound)


def test_binary_concrete_log_density_is_the_logistics():
  """Y = (alpha + L) / tau with L ~ Logistic(0, 1) is Logistic(alpha / tau, 1 / tau)."""
  from scipy import stats

  y = np.linspace(-30, 30, 121)
  for alpha, tau in ((0.0, 1.0), (2.5, 0.5), (-4.0, 0.1), (1.0, 3.0)):
    want = stats.logistic.logpdf(y, loc=alpha / tau, scale=1 / tau)
    got = vae.binary_concrete_log_density(jnp.asarray(y), alpha, tau)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_gs_with_the_concrete_kl_samples_gs_and_scores_the_logistic_densities():
  from scipy import stats

  model = vae.DiscreteVAE(
    6,
    2,
    encoder_widths=(8,),
    decoder_widths=(8,),
    binary_logits="one",
    relaxed_kl="concrete",
    relaxed_prior_tau=0.5,
    rngs=nnx.Rngs(0),
  )
  model.prior_logits.set_value(jnp.linspace(-1.0, 1.0, 6))
  x = jnp.asarray(np.random.default_rng(3).random((3, 784)) < 0.3, jnp.float32)
  key, tau = jax.random.key(7), 0.64
  result = model.training_bound(x, key, estimators.get("gs"), tau)
  logits = model.encode(x)
  np.testing.assert_allclose(
    result.samples[0], estimators.gumbel_softmax(key, logits, tau=tau), atol=1e-6
  )
  # Y from the sample itself, in float64: log(S1 / S0).
  s = np.asarray(result.samples[0], np.float64)
  y = np.log(s[..., 1]) - np.log(s[..., 0])
  alpha = np.asarray(logits[..., 1] - logits[..., 0], np.float64)
  prior_alpha = np.linspace(-1.0, 1.0, 6)
  kl = stats.logistic.logpdf(y, alpha / tau, 1 / tau) - stats.logistic.logpdf(
    y, prior_alpha / 0.5, 1 / 0.5
  )
  np.testing.assert_allclose(result.metrics["kl"], kl.sum(-1), rtol=1e-4, atol=1e-3)


def test_exp_concrete_log_density_against_the_gumbels_it_is_made_of():
  """n = 2: Y = (log sigmoid(-Z), log sigmoid(Z)) with Z = (alpha + L) / tau logistic, so in the
  first coordinate f(y_0) = f_Z(z) / sigmoid(z) (closed form, scipy). n = 3: from the Gumbels
  themselves, D_k = (theta_k + G_k) - (theta_2 + G_2) has the density of a one-dimensional
  integral over G_2 (scipy's quad), and Y_k = D_k / tau - log(1 + e^{D_0/tau} + e^{D_1/tau})
  for k < 2 has Jacobian determinant e^{y_2} / tau^2."""
  from scipy import integrate, special, stats

  logits, tau = np.array([0.3, -1.2]), 0.7
  z = np.linspace(-12.0, 12.0, 49)
  y = np.stack([special.log_expit(-z), special.log_expit(z)], axis=-1)
  want = stats.logistic.logpdf(z, (logits[1] - logits[0]) / tau, 1 / tau) - special.log_expit(z)
  theta = np.array([0.5, -0.3, 1.0])
  gumbel = stats.gumbel_r.pdf
  with jax.enable_x64(True):
    got = vae.exp_concrete_log_density(jnp.asarray(y), jnp.asarray(logits), tau)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
    for tau, d in ((0.5, (0.4, -1.0)), (1.0, (2.0, 0.3)), (2.0, (-1.5, -0.5))):
      density_d, _ = integrate.quad(
        lambda g: (
          gumbel(g)
          * gumbel(d[0] + g + theta[2] - theta[0])
          * gumbel(d[1] + g + theta[2] - theta[1])
        ),
        -10.0,  # the Gumbel density is below 1e-9000 beyond, and below 1e-25 past 60
        60.0,
        epsabs=1e-13,
      )
      y = np.array([*d, 0.0]) / tau
      y = y - special.logsumexp(y)
      want = np.log(density_d) + 2 * np.log(tau) - y[2]
      got = vae.exp_concrete_log_density(jnp.asarray(y), jnp.asarray(theta), tau)
      np.testing.assert_allclose(got, want, rtol=1e-8)


def test_gs_with_the_concrete_kl_on_n_ary_latents_scores_the_exp_concrete_densities():
  """The sample is GS's at the key; the KL term is log q - log p at Y = log(sample), prior at
  relaxed_prior_tau; at n = 2 the n-ary formula gives the binary path's KL (the Jacobian of
  the change of coordinates cancels in the difference)."""
  from scipy.special import logsumexp

  x = jnp.asarray(np.random.default_rng(3).random((3, 784)) < 0.3, jnp.float32)
  key, tau = jax.random.key(7), 0.64
  kwargs = dict(encoder_widths=(8,), decoder_widths=(8,), relaxed_kl="concrete", rngs=nnx.Rngs(0))
  model = vae.DiscreteVAE(5, 4, relaxed_prior_tau=0.5, **kwargs)
  model.prior_logits.set_value(jnp.linspace(-1.0, 1.0, 20).reshape(5, 4))
  result = model.training_bound(x, key, estimators.get("gs"), tau)
  logits = model.encode(x)
  sample = estimators.gumbel_softmax(key, logits, tau=tau)
  np.testing.assert_allclose(result.samples[0], sample, atol=1e-6)
  y = np.log(np.asarray(sample, np.float64))
  log_prior = np.asarray(jax.nn.log_softmax(model.prior_logits.get_value()), np.float64)

  def log_density(theta, t):  # the ExpConcrete density written out, less its -y_n term
    z = theta - t * y
    return np.log(math.factorial(3)) + 3 * np.log(t) + z.sum(-1) - 4 * logsumexp(z, axis=-1)

  kl = log_density(np.asarray(logits, np.float64), tau) - log_density(log_prior, 0.5)
  np.testing.assert_allclose(result.metrics["kl"], kl.sum(-1), rtol=1e-4, atol=2e-3)
  # n = 2: the n-ary formula's KL is the binary path's.
  binary = vae.DiscreteVAE(6, 2, **kwargs)
  bound = binary.training_bound(x, key, estimators.get("gs"), tau)
  two = np.log(np.asarray(bound.samples[0], np.float64))
  theta = np.asarray(binary.encode(x), np.float64)
  prior = np.asarray(jax.nn.log_softmax(binary.prior_logits.get_value()), np.float64)
  with jax.enable_x64(True):
    n_ary = np.asarray(
      vae.exp_concrete_log_density(two, theta, tau) - vae.exp_concrete_log_density(two, prior, tau)
    )
  np.testing.assert_allclose(bound.metrics["kl"], np.sum(n_ary, -1), rtol=1e-4, atol=2e-3)
