"""gr_jax.models.categorical_vae: the GST / ReinMax categorical MNIST VAE, against closed forms."""

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from gr_jax import estimators
from gr_jax.models import categorical_vae, vae


def _model(latents=4, categories=8, **kwargs):
  return categorical_vae.CategoricalVAE(latents, categories, rngs=nnx.Rngs(0), **kwargs)


def _grey(batch=5, seed=0):
  return jnp.asarray(np.random.default_rng(seed).random((batch, 784)), jnp.float32)


def test_shapes_and_pytorchs_linear_initialization():
  model = _model()
  assert model.encode(_grey()).shape == (5, 4, 8)
  assert model.decode(jnp.zeros((5, 4, 8))).shape == (5, 784)
  sizes = [(784, 512), (512, 256), (256, 32), (32, 256), (256, 512), (512, 784)]
  layers = [*model.encoder.layers, *model.decoder.layers]
  for (fan_in, fan_out), layer in zip(sizes, layers):
    bound = 1 / math.sqrt(fan_in)
    for value in (layer.kernel.get_value(), layer.bias.get_value()):
      assert value.shape[-1] == fan_out
      # Uniform in +-1/sqrt(fan_in): inside it, and reaching near both ends.
      assert np.abs(value).max() <= bound and np.abs(value).max() > 0.9 * bound
      assert value.min() < -0.5 * bound and value.max() > 0.5 * bound


def test_grey_log_likelihood_is_minus_the_binary_cross_entropy():
  logits = jnp.asarray(np.random.default_rng(1).normal(size=(3, 784)) * 3, jnp.float32)
  x = _grey(3)
  p = 1 / (1 + np.exp(-np.asarray(logits, np.float64)))
  want = np.sum(x * np.log(p) + (1 - x) * np.log1p(-p), -1)
  np.testing.assert_allclose(categorical_vae.grey_log_likelihood(logits, x), want, rtol=1e-5)
  binary = (x > 0.5).astype(jnp.float32)
  np.testing.assert_allclose(
    categorical_vae.grey_log_likelihood(logits, binary),
    vae.bernoulli_log_likelihood(logits, binary),
    rtol=1e-6,
  )


def test_the_kl_is_exact_and_the_bound_uses_the_estimators_sample():
  model = _model(latents=3, categories=4)
  x = _grey(2)
  logits = model.encode(x)
  q = np.asarray(jax.nn.softmax(logits), np.float64)
  want = np.sum(q * np.log(q), axis=(-2, -1)) + 3 * np.log(4)
  # float32: the sum of q log q cancels L log C to ~1e-7 near the uniform start.
  np.testing.assert_allclose(model.exact_kl(logits), want, rtol=1e-5, atol=1e-6)
  key = jax.random.key(2)
  result = model.training_bound(x, key, estimators.get("st_gs"), 0.5)
  sample = estimators.st_gumbel_softmax(key, logits, tau=0.5)
  np.testing.assert_array_equal(result.samples[0], sample)
  expected = categorical_vae.grey_log_likelihood(model.decode(sample), x) - want
  np.testing.assert_allclose(result.bound, expected, rtol=1e-5, atol=1e-4)
  # RLOO-2 evaluates the likelihood itself; the same exact KL is subtracted.
  rloo = model.training_bound(x, key, estimators.get("rloo2"), 0.5)
  np.testing.assert_allclose(rloo.metrics["kl"], model.exact_kl(logits))
  assert rloo.bound.shape == (2,) and np.all(rloo.bound < -rloo.metrics["kl"])


def test_iwae_approaches_the_enumerated_log_likelihood():
  """Two variables of three categories: log p(x) = log sum_D p(x | D) / 9 by enumeration; the
  IWAE bound at M = 4000 is within 0.05 nats of it (its expected gap shrinks as 1/M, and one
  draw of it may lie above log p(x) by its standard deviation, ~0.03 here)."""
  model = _model(latents=2, categories=3, encoder_widths=(16,), decoder_widths=(16,))
  x = _grey(3, seed=4)
  corners = [jnp.eye(3)[jnp.array(ids)] for ids in itertools.product(range(3), repeat=2)]
  log_px = jax.nn.logsumexp(
    jnp.stack([categorical_vae.grey_log_likelihood(model.decode(d), x) for d in corners]), axis=0
  ) - math.log(9)
  iwae = model.iwae_bound(x, jax.random.key(0), 4000)
  np.testing.assert_allclose(iwae, log_px, atol=0.05)


def test_gsts_relu_on_the_logits_and_bad_arguments():
  assert np.all(np.asarray(_model(logits_activation="relu").encode(_grey())) >= 0)
  with pytest.raises(ValueError, match="logits_activation must be one of"):
    _model(logits_activation="tanh")
  with pytest.raises(ValueError, match="num_categories >= 2"):
    _model(categories=1)


@pytest.mark.parametrize("latents, categories", [(2, 3), (6, 3)])  # 9 and 729 configurations
def test_the_expected_likelihood_sums_every_configuration(latents, categories):
  model = _model(latents, categories, encoder_widths=(16,), decoder_widths=(16,))
  x = _grey(2, seed=5)
  logits = model.encode(x)
  log_q = np.asarray(jax.nn.log_softmax(logits), np.float64)
  want = np.zeros(2)
  for ids in itertools.product(range(categories), repeat=latents):
    corner = jnp.eye(categories)[jnp.array(ids)]
    weight = np.exp(sum(log_q[:, j, k] for j, k in enumerate(ids)))
    want += weight * np.asarray(categorical_vae.grey_log_likelihood(model.decode(corner), x))
  np.testing.assert_allclose(model.expected_likelihood(x, logits), want, rtol=1e-5)


def test_the_exact_likelihood_gradient_is_the_encoders_exact_and_the_decoders_at_the_sample():
  """Their exact method: the encoder's gradient is that of E_q[log p(x | D)] - KL (enumerated),
  the decoder's that of log p(x | D) at the estimator's sample; the value is the sample's."""
  exact = _model(2, 3, encoder_widths=(16,), decoder_widths=(16,), likelihood_gradient="exact")
  x, key, st = _grey(4, seed=6), jax.random.key(3), estimators.get("st")
  params = nnx.state(exact, nnx.Param)
  graphdef = nnx.graphdef(exact)

  def grads(objective):
    return jax.grad(lambda p: objective(nnx.merge(graphdef, p)))(params)

  training = grads(lambda m: jnp.mean(m.training_bound(x, key, st, 1.0).bound))
  expected = grads(lambda m: jnp.mean(m.exact_bound(x)))
  sample = st(key, exact.encode(x), tau=1.0)
  at_sample = grads(lambda m: jnp.mean(categorical_vae.grey_log_likelihood(m.decode(sample), x)))
  for got, want in zip(jax.tree.leaves(training["encoder"]), jax.tree.leaves(expected["encoder"])):
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
  for got, want in zip(jax.tree.leaves(training["decoder"]), jax.tree.leaves(at_sample["decoder"])):
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
  value = exact.training_bound(x, key, st, 1.0).bound
  logits = exact.encode(x)
  want = categorical_vae.grey_log_likelihood(exact.decode(sample), x) - exact.exact_kl(logits)
  np.testing.assert_allclose(value, want, rtol=1e-5)
  with pytest.raises(ValueError, match="enumerates C \\*\\* L = 10\\^30 configurations"):
    _model(30, 10, likelihood_gradient="exact")
