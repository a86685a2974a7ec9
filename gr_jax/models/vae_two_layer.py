r"""A VAE with two stochastic layers of n-ary variables: the Concrete paper's 240H~240H~784V.

Maddison et al. (2017, section 5.1, appendix D) report this model beside the
one-layer 240H~784V (:mod:`gr_jax.models.vae`): two stochastic layers
:math:`h_1, h_2` of m variables of arity n on the corners of
:math:`\{-1, 1\}^{\log_2 n}` (240 coordinates each), every "~" two tanh layers
of width 240 with Glorot kernels (D.1, D.5):

* inference :math:`q(h_1 \mid x)\, q(h_2 \mid h_1)`: ``encoder`` (x -> logits of
  h1) and ``upper_encoder`` (embed(h1) -> logits of h2);
* generation :math:`p(h_2)\, p(h_1 \mid h_2)\, p(x \mid h_1)`: learned prior
  logits (or uniform), ``upper_decoder`` (embed(h2) -> logits of h1) and
  ``decoder`` (embed(h1) -> Bernoulli logits of x).

Each inference network's input is centred by the caller's ``centering``
(appendix D.4 centres the activity of every stochastic layer): a pair (the
image's, h1's embedding's), whose running averages the experiment keeps from
``training_bound``'s ``inference_inputs``.

**Estimators through the cascade** (the paper's appendix B, sequential case).
h2's logits are computed from h1's sample, so the gradient that reaches h1's
estimator is the total one: the decoder's and the latent terms' direct
dependence on h1 plus what flows back through h2's estimator and
``upper_encoder``. Every estimator of :mod:`gr_jax.estimators` then computes
its appendix B sequential surrogate by ordinary backpropagation. REINFORCE's
score is :math:`\log q(h_1 \mid x) + \log q(h_2 \mid h_1)` (``log_q``). GS feeds
the relaxed samples forward as the one-layer model does: the networks see the
relaxed embeddings, and the latent terms are the linear extensions
:math:`\langle S, \log p - \log q\rangle`, equal to the discrete bound at the
corners.
"""

from __future__ import annotations

import math
from typing import Sequence

import jax
import jax.numpy as jnp
from flax import nnx

from gr_jax import estimators
from gr_jax.models.vae import (
  ACTIVATIONS,
  KERNEL_INITS,
  MLP,
  PRIORS,
  TrainingBound,
  bernoulli_log_likelihood,
  hypercube_embedding,
  importance_weighted,
  latent_term,
  log2_arity,
  sample_log_prob,
)


class TwoLayerDiscreteVAE(nnx.Module):
  r"""q(h1 | x) q(h2 | h1) and p(h2) p(h1 | h2) p(x | h1), m n-ary variables per layer.

  The bounds follow the protocol of :class:`gr_jax.models.vae.DiscreteVAE`.
  The two layers' samples come from the halves of ``jax.random.split(key)``:
  layer 1 from the first, layer 2 from the second.
  """

  # (label, parameter) of each stochastic layer's inference network.
  INFERENCE_NETWORKS = (("layer1", "encoder"), ("layer2", "upper_encoder"))

  def __init__(
    self,
    num_vars: int,
    arity: int,
    *,
    encoder_widths: Sequence[int] = (240, 240),
    decoder_widths: Sequence[int] = (240, 240),
    upper_encoder_widths: Sequence[int] = (240, 240),
    upper_decoder_widths: Sequence[int] = (240, 240),
    activation: str = "tanh",
    kernel_init: str = "glorot_uniform",
    prior: str = "learned",
    num_pixels: int = 784,
    rngs: nnx.Rngs,
  ):
    for name, value, allowed in (
      ("activation", activation, ACTIVATIONS),
      ("kernel_init", kernel_init, KERNEL_INITS),
      ("prior", prior, PRIORS),
    ):
      if value not in allowed:
        raise ValueError(f"{name} must be one of {sorted(allowed)}; got {value!r}.")
    self.latent_dim = num_vars * log2_arity(arity)
    self.num_vars, self.arity, self.num_pixels = num_vars, arity, num_pixels
    act, init = ACTIVATIONS[activation], KERNEL_INITS[kernel_init]()
    logits = num_vars * arity

    def mlp(sizes):
      return MLP(sizes, act, kernel_init=init, rngs=rngs)

    self.encoder = mlp([num_pixels, *encoder_widths, logits])
    self.upper_encoder = mlp([self.latent_dim, *upper_encoder_widths, logits])
    self.upper_decoder = mlp([self.latent_dim, *upper_decoder_widths, logits])
    self.decoder = mlp([self.latent_dim, *decoder_widths, num_pixels])
    self.prior_logits = nnx.Param(jnp.zeros((num_vars, arity))) if prior == "learned" else None

  def _as_variables(self, flat: jax.Array) -> jax.Array:
    return flat.reshape(*flat.shape[:-1], self.num_vars, self.arity)

  def log_prior(self) -> jax.Array:
    """``[m, n]`` log p(h2_j = k) (a scalar -log n for the uniform prior)."""
    if self.prior_logits is None:
      return jnp.asarray(-math.log(self.arity))
    return jax.nn.log_softmax(self.prior_logits.get_value(), axis=-1)

  def encode(self, x: jax.Array) -> jax.Array:
    """``[B, 784]`` (centred) images -> ``[B, m, n]`` logits of q(h1 | x)."""
    return self._as_variables(self.encoder(x))

  def encode_upper(self, h1_embedding: jax.Array) -> jax.Array:
    """``[B, m log2 n]`` (centred) embeddings of h1 -> ``[B, m, n]`` logits of q(h2 | h1)."""
    return self._as_variables(self.upper_encoder(h1_embedding))

  def log_conditional_prior(self, h2: jax.Array) -> jax.Array:
    """``[B, m, n]`` samples of h2 -> ``[B, m, n]`` log p(h1 | h2)."""
    logits = self._as_variables(self.upper_decoder(hypercube_embedding(h2)))
    return jax.nn.log_softmax(logits, axis=-1)

  def decode(self, h1: jax.Array) -> jax.Array:
    """``[..., m, n]`` samples of h1 -> ``[..., 784]`` Bernoulli logits of p(x | h1)."""
    return self.decoder(hypercube_embedding(h1))

  def initial_centering(self) -> tuple[jax.Array, jax.Array]:
    """Zeros for the two inference inputs: the image ``[784]`` and h1's embedding
    ``[m log2 n]``."""
    return (
      jnp.zeros(self.num_pixels, jnp.float32),
      jnp.zeros(self.latent_dim, jnp.float32),
    )

  def log_weight(self, x, logits1, h1, logits2, h2) -> tuple[jax.Array, jax.Array, jax.Array]:
    r"""``[B]`` log p(x, h1, h2) - log q(h1, h2 | x) for one joint sample, and its two layers'
    :math:`\log q - \log p` terms (kl_layer1, kl_layer2):

    .. math::
      \log p(x \mid h_1) + \langle h_1, \log p(h_1 \mid h_2) - \log q(h_1 \mid x) \rangle
        + \langle h_2, \log p(h_2) - \log q(h_2 \mid h_1) \rangle.
    """
    kl1 = -latent_term(self.log_conditional_prior(h2), logits1, h1)
    kl2 = -latent_term(self.log_prior(), logits2, h2)
    return bernoulli_log_likelihood(self.decode(h1), x) - kl1 - kl2, kl1, kl2

  def training_bound(
    self, x, key, estimator: estimators.Estimator, tau, centering=(0.0, 0.0)
  ) -> TrainingBound:
    """The single-sample bound at h1 = estimator(key1, ...), h2 = estimator(key2, ...): h2's
    logits are computed from h1's sample (the cascade); ``metrics``: ``kl`` and each layer's
    ``kl_layer1``, ``kl_layer2``."""
    key1, key2 = jax.random.split(key)
    image_mean, h1_mean = centering
    logits1 = self.encode(x - image_mean)
    h1 = estimator(key1, logits1, tau=tau)
    h1_embedding = hypercube_embedding(h1)
    logits2 = self.encode_upper(h1_embedding - h1_mean)
    h2 = estimator(key2, logits2, tau=tau)
    bound, kl1, kl2 = self.log_weight(x, logits1, h1, logits2, h2)
    log_q = None
    if estimator.score_function:
      log_q = sample_log_prob(logits1, h1) + sample_log_prob(logits2, h2)
    metrics = {"kl": kl1 + kl2, "kl_layer1": kl1, "kl_layer2": kl2}
    return TrainingBound(bound, log_q, metrics, (h1, h2), (x, h1_embedding))

  def iwae_bound(self, x, key, num_samples: int, chunk_size: int = 100, centering=(0.0, 0.0)):
    r"""Importance-weighted bound with M joint samples drawn ancestrally (h1 ~ q(h1 | x), then
    h2 ~ q(h2 | h1)), ``chunk_size`` at a time, as the one-layer model's.

    .. math:: \log \frac{1}{M} \sum_{k=1}^{M}
      \frac{p(x, h_1^k, h_2^k)}{q(h_1^k \mid x)\, q(h_2^k \mid h_1^k)}

    Returns:
      ``[B]`` bounds in nats.
    """
    image_mean, h1_mean = centering
    logits1 = self.encode(x - image_mean)

    def one_sample(sample_key):
      key1, key2 = jax.random.split(sample_key)
      h1 = estimators.reinforce(key1, logits1)
      logits2 = self.encode_upper(hypercube_embedding(h1) - h1_mean)
      h2 = estimators.reinforce(key2, logits2)
      return self.log_weight(x, logits1, h1, logits2, h2)[0]

    return importance_weighted(
      lambda keys: jax.vmap(one_sample)(keys), key, num_samples, chunk_size, x.shape[:-1]
    )
