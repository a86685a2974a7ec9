"""Tests of gr_jax/models/vae_two_layer.py: the two-stochastic-layer VAE (240H~240H~784V).

On a tiny model (two binary variables per layer, a 6-pixel image) every joint
value of (h1, h2) can be enumerated: the IWAE bound is checked against the exact
log-likelihood and the ELBO, and every estimator's gradient against the
gradient of the paper's Appendix B sequential surrogate for that estimator,
written out independently: each layer's sample replaced by a function of its
logits whose value is the sample and whose Jacobian is the estimator's (for
ST-GS and GR, E[J_tau(theta + G) | D], a one-dimensional integral computed by
scipy), h2's logits computed from h1's (the cascade), differentiated by
ordinary autodiff. Float64 throughout.
"""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from scipy import integrate, special

from gr_jax import estimators
from gr_jax.models import vae, vae_two_layer

TAU = 0.7
BASELINE = -3.0  # REINFORCE's baseline, held fixed
NUM_DRAWS = 4000
X = np.array([[1.0, 0.0, 1.0, 1.0, 0.0, 0.0]])
# Every joint value of two binary variables: [4, 2 variables, 2 categories].
LAYER_VALUES = np.eye(2)[np.array([[0, 0], [0, 1], [1, 0], [1, 1]])]


@functools.lru_cache(maxsize=None)
def _model():
  """A tiny two-layer model with a non-uniform prior and weights large enough for peaked
  posteriors."""
  with jax.enable_x64(True):
    model = vae_two_layer.TwoLayerDiscreteVAE(
      2,
      2,
      encoder_widths=(5,),
      decoder_widths=(5,),
      upper_encoder_widths=(5,),
      upper_decoder_widths=(5,),
      num_pixels=X.shape[1],
      rngs=nnx.Rngs(3),
    )
    model.prior_logits.set_value(jnp.array([[0.8, -0.4], [-1.0, 0.5]]))
    graphdef, params = nnx.split(model)
    params = jax.tree.map(lambda p: 1.5 * jnp.asarray(p, jnp.float64), params)
  return graphdef, params


def _merge(params):
  return nnx.merge(_model()[0], params)


def _joint_terms(model):
  """For every (h1, h2): log p(x, h1, h2), log q(h1 | x) + log q(h2 | h1) ([4, 4] each)."""
  x = jnp.asarray(X)
  logits1 = model.encode(x)
  log_joint, log_q = np.zeros((4, 4)), np.zeros((4, 4))
  for a, h1 in enumerate(LAYER_VALUES):
    logits2 = model.encode_upper(vae.hypercube_embedding(h1[None]))
    for b, h2 in enumerate(LAYER_VALUES):
      weight = model.log_weight(x, logits1, h1[None], logits2, h2[None])[0][0]
      log_q[a, b] = (
        vae.sample_log_prob(logits1, h1[None])[0] + vae.sample_log_prob(logits2, h2[None])[0]
      )
      log_joint[a, b] = weight + log_q[a, b]
  return log_joint, log_q


def test_iwae_tends_to_the_exact_log_likelihood_and_its_m1_mean_is_the_elbo():
  with jax.enable_x64(True):
    model = _merge(_model()[1])
    log_joint, log_q = _joint_terms(model)
    log_px = special.logsumexp(log_joint)
    q = np.exp(log_q)
    assert q.sum() == pytest.approx(1.0, abs=1e-12)
    elbo = np.sum(q * (log_joint - log_q))
    assert log_px - elbo > 0.05  # a gap worth measuring
    keys = jax.random.split(jax.random.key(0), 20_000)
    bounds = jax.jit(jax.vmap(lambda k: model.iwae_bound(jnp.asarray(X), k, 1)[0]))(keys)
    # The mean of 20,000 single-sample bounds against the ELBO: 5 standard errors.
    se = np.std(bounds) / math.sqrt(len(bounds))
    assert abs(np.mean(bounds) - elbo) < 5 * se
    # IWAE with M joint samples: below log p(x) in expectation for every M, far from it at M = 10
    # and within 4 standard errors of it (bias O(1/M)) at M = 10,000; 100 draws of each.
    for m in (10, 100, 10_000):
      keys = jax.random.split(jax.random.key(m), 100)
      iwae = jax.jit(jax.vmap(lambda k, m=m: model.iwae_bound(jnp.asarray(X), k, m, 1000)[0]))(keys)
      error, se = log_px - float(np.mean(iwae)), float(np.std(iwae)) / 10
      assert error > -4 * se
      if m == 10:
        assert error > 0.3
      if m == 10_000:
        assert abs(error) < 4 * se + 1e-3 and se < 0.01


def _objective(params, key, estimator):
  """The training objective of one draw (REINFORCE: with its score-function surrogate)."""
  result = _merge(params).training_bound(jnp.asarray(X), key, estimator, TAU)
  objective = -jnp.mean(result.bound)
  if estimator.score_function:
    surrogate = estimators.score_function_surrogate(result.log_q, -result.bound, BASELINE)
    objective += jnp.mean(surrogate)
  return objective, result.samples


def _draws(name: str):
  """Every draw's gradient (a flat vector) and its joint value's index a * 4 + b."""
  estimator = estimators.get(name)
  params = _model()[1]
  grad = jax.grad(lambda p, k: _objective(p, k, estimator), has_aux=True)
  keys = jax.random.split(jax.random.key(7), NUM_DRAWS)
  grads, (h1, h2) = jax.jit(jax.vmap(grad, in_axes=(None, 0)))(params, keys)
  flat = np.concatenate([np.asarray(g).reshape(NUM_DRAWS, -1) for g in jax.tree.leaves(grads)], 1)
  index = lambda h: np.asarray(h)[:, 0].argmax(-1) @ np.array([2, 1])  # noqa: E731
  return flat, index(h1) * 4 + index(h2)


def _softmax_jacobian(s, tau):
  return (jnp.diag(s) - jnp.outer(s, s)) / tau


def _conditional_stgs_jacobian(logits, sample, tau):
  """E[J_tau(theta + G) | D] for one binary variable: (c / tau) [[1, -1], [-1, 1]] with c =
  E[s_0 s_1 | D] = int_0^inf sigma(d / tau) sigma(-d / tau) logistic(d - Delta) dd / sigma(Delta),
  Delta the sampled category's logit minus the other's."""
  i = int(np.argmax(sample))
  delta = float(logits[i] - logits[1 - i])
  integrand = lambda d: (  # noqa: E731
    special.expit(d / tau)
    * special.expit(-d / tau)
    * special.expit(d - delta)
    * special.expit(delta - d)
  )
  c = integrate.quad(integrand, 0, np.inf, epsabs=1e-14, epsrel=1e-12)[0] / special.expit(delta)
  return jnp.array([[1.0, -1.0], [-1.0, 1.0]]) * c / tau


def _gap_jacobian(logits, sample, tau, gap):
  i = int(np.argmax(sample))
  if gap == "p":
    p = float(jax.nn.softmax(logits)[i])
    gap = -math.log1p(-p) / p
  top = jnp.max(logits)
  x = jnp.where(jnp.arange(2) == i, top, jnp.minimum(logits, top - gap))
  return _softmax_jacobian(jax.nn.softmax(x / tau), tau)


def _jacobian(name, logits, sample):
  """The estimator's d S / d theta at one variable's logits, given its sample (rows: S)."""
  p = jax.nn.softmax(logits)
  if name == "st":
    return _softmax_jacobian(jax.nn.softmax(logits / TAU), TAU)
  if name == "zgr":
    return 0.5 * (_softmax_jacobian(p, 1.0) + jnp.outer(sample - p, sample - p))
  if name == "reinmax":
    midpoint = 0.5 * (sample + jax.nn.softmax(logits / TAU))
    return 2.0 * _softmax_jacobian(midpoint, 1.0) - 0.5 * _softmax_jacobian(p, 1.0)
  if name in ("gst", "gst_p"):
    return _gap_jacobian(logits, sample, TAU, 1.0 if name == "gst" else "p")
  return _conditional_stgs_jacobian(logits, sample, TAU)  # ST-GS, GR-MCK, GR-QMCK, GR-exact


def _surrogate_gradient(name, a, b):
  """The gradient of the Appendix B sequential surrogate at (h1, h2) = values a, b (flat)."""
  params = _model()[1]
  d1, d2 = LAYER_VALUES[a][None], LAYER_VALUES[b][None]
  x = jnp.asarray(X)
  model = _merge(params)
  logits1_at = model.encode(x)[0]
  logits2_at = model.encode_upper(vae.hypercube_embedding(d1))[0]
  jacobians = [
    jnp.stack([_jacobian(name, logits[v], d[0, v]) for v in range(2)])
    for logits, d in ((logits1_at, d1), (logits2_at, d2))
  ]

  def surrogate(params):
    model = _merge(params)
    logits1 = model.encode(x)
    if name == "reinforce":
      h1 = d1
    else:  # value d1, Jacobian jacobians[0] (the estimator's) at the sampled point
      h1 = d1 + jnp.einsum("vab,nvb->nva", jacobians[0], logits1 - jax.lax.stop_gradient(logits1))
    logits2 = model.encode_upper(vae.hypercube_embedding(h1))  # the cascade: theta^2 = h(D^1)
    if name == "reinforce":
      h2 = d2
    else:
      h2 = d2 + jnp.einsum("vab,nvb->nva", jacobians[1], logits2 - jax.lax.stop_gradient(logits2))
    bound = model.log_weight(x, logits1, h1, logits2, h2)[0]
    if name == "reinforce":
      log_q = vae.sample_log_prob(logits1, d1) + vae.sample_log_prob(logits2, d2)
      return jnp.mean(-bound + jax.lax.stop_gradient(-bound - BASELINE) * log_q)
    return jnp.mean(-bound)

  grads = jax.grad(surrogate)(params)
  return np.concatenate([np.asarray(g).ravel() for g in jax.tree.leaves(grads)])


@functools.lru_cache(maxsize=None)
def _joint_probabilities():
  with jax.enable_x64(True):
    return np.exp(_joint_terms(_merge(_model()[1]))[1]).ravel()


def _expected_surrogate_gradient(name):
  """sum over the 16 joint values of q(h1, h2 | x) times the surrogate's gradient there."""
  probabilities = _joint_probabilities()
  return sum(probabilities[j] * _surrogate_gradient(name, j // 4, j % 4) for j in range(16))


@pytest.mark.parametrize("name", ["st", "zgr", "reinmax", "gst", "gst_p", "gr_exact", "reinforce"])
def test_deterministic_estimators_give_their_sequential_surrogates_gradient_draw_by_draw(name):
  """Given (h1, h2) these estimators' gradients are deterministic: every draw equals the
  surrogate's gradient at its (h1, h2), and the draws' mean tends to the enumerated expectation."""
  with jax.enable_x64(True):
    grads, joint = _draws(name)
    references = {j: _surrogate_gradient(name, j // 4, j % 4) for j in np.unique(joint)}
    for j, reference in references.items():
      group = grads[joint == j]
      np.testing.assert_allclose(
        group, np.broadcast_to(reference, group.shape), rtol=1e-7, atol=1e-10
      )
    expected = _expected_surrogate_gradient(name)
    # The draws' mean against the exact expectation: 5 standard errors of the mean.
    se = grads.std(0) / math.sqrt(NUM_DRAWS)
    assert np.all(np.abs(grads.mean(0) - expected) <= 5 * se + 1e-9)
    if name == "reinforce":  # unbiased: the enumerated expectation is the ELBO's gradient
      np.testing.assert_allclose(expected, _elbo_gradient(), rtol=1e-9, atol=1e-12)


def _elbo_gradient():
  """The exact gradient of -ELBO by enumerating the 16 joint values."""

  def negative_elbo(params):
    model = _merge(params)
    x = jnp.asarray(X)
    logits1 = model.encode(x)
    total = 0.0
    for h1 in LAYER_VALUES:
      logits2 = model.encode_upper(vae.hypercube_embedding(h1[None]))
      for h2 in LAYER_VALUES:
        weight = model.log_weight(x, logits1, h1[None], logits2, h2[None])[0][0]
        log_q = vae.sample_log_prob(logits1, h1[None])[0]
        log_q = log_q + vae.sample_log_prob(logits2, h2[None])[0]
        total = total - jnp.exp(log_q) * weight
    return total

  grads = jax.grad(negative_elbo)(_model()[1])
  return np.concatenate([np.asarray(g).ravel() for g in jax.tree.leaves(grads)])


@pytest.mark.parametrize("name", ["st_gs", "gr_mc5", "gr_qmc5", "gr_qmc5_no_tent"])
def test_gumbel_rao_family_gives_the_sequential_surrogate_with_the_conditional_jacobian(name):
  """ST-GS and GR draw their Jacobians: given (h1, h2) their mean is the surrogate's gradient
  with E[J_tau(theta + G) | D] in each layer (the two layers' noises are independent given the
  samples). Each joint value with at least 40 draws is checked against its group's mean, and the
  overall mean against the enumerated expectation: 5 standard errors each."""
  with jax.enable_x64(True):
    grads, joint = _draws(name)
    checked = 0
    for j in np.unique(joint):
      group = grads[joint == j]
      if len(group) < 40:
        continue
      reference = _surrogate_gradient(name, j // 4, j % 4)
      se = group.std(0) / math.sqrt(len(group))
      assert np.all(np.abs(group.mean(0) - reference) <= 5 * se + 1e-9), j
      checked += 1
    assert checked >= 4
    expected = _expected_surrogate_gradient(name)
    se = grads.std(0) / math.sqrt(NUM_DRAWS)
    assert np.all(np.abs(grads.mean(0) - expected) <= 5 * se + 1e-9)


def test_gumbel_softmax_feeds_the_relaxed_samples_through_the_cascade():
  """GS's gradient is the ordinary one of the bound at the relaxed samples S_j = softmax((theta_j
  + G_j) / tau), G_j = gumbel(split(key)[j]) (the documented keys), h2's logits from S_1."""
  with jax.enable_x64(True):
    params = _model()[1]
    x = jnp.asarray(X)

    def relaxed_objective(params, key):
      model = _merge(params)
      key1, key2 = jax.random.split(key)
      logits1 = model.encode(x)
      s1 = jax.nn.softmax((logits1 + jax.random.gumbel(key1, logits1.shape, jnp.float64)) / TAU)
      logits2 = model.encode_upper(vae.hypercube_embedding(s1))
      s2 = jax.nn.softmax((logits2 + jax.random.gumbel(key2, logits2.shape, jnp.float64)) / TAU)
      return -jnp.mean(model.log_weight(x, logits1, s1, logits2, s2)[0])

    gs = estimators.get("gs")
    for seed in range(5):
      key = jax.random.key(seed)
      ours = jax.grad(lambda p: _objective(p, key, gs)[0])(params)
      theirs = jax.grad(relaxed_objective)(params, key)
      for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(theirs), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
