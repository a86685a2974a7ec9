r"""The categorical MNIST VAE of the straight-through line's benchmark (GST, ReinMax).

The model of Fan et al. (ICML 2022, chijames/GST ``gumbel_softmax_vae.py``) and Liu et al.
(NeurIPS 2023, LiyuanLucasLiu/ReinMax ``mnist_vae/model/vae.py``), after Jang et al.'s
categorical VAE notebook: L latent variables of C categories each (their ``--latent-dim L``
and ``--categorical-dim C``; a shape "C x L", e.g. 8x4 is 4 variables of 8 categories), an
encoder 784-512-256-(L C) with ReLU and no activation on the logits (ReinMax; GST applies a
ReLU to the logits: ``logits_activation="relu"``), a decoder (L C)-256-512-784 that reads the
one-hot samples flattened, a uniform prior, the exact KL

.. math:: \mathrm{KL}(q(D \mid x) \,\|\, p) = \sum_{j=1}^{L} \sum_{k=1}^{C} q_{jk} \log q_{jk}
  + L \log C,

and Bernoulli pixel likelihoods whose targets are the grey levels x in [0, 1] (their
``binary_cross_entropy`` against ``ToTensor()`` images: :func:`grey_log_likelihood`; on binary
images it is the Bernoulli log-likelihood). Layers start as PyTorch's ``nn.Linear``: kernel and
bias uniform in :math:`\pm 1/\sqrt{\text{fan-in}}`.

The training bound at one sample D of the estimator is :math:`\log p(x \mid D) -
\mathrm{KL}(q(D \mid x) \,\|\, p)`: the likelihood estimated, the KL exact (so its gradient
is the same for every estimator, as theirs). With ``likelihood_gradient="exact"`` (their
``exact`` method, where :math:`C^L \le` ``MAX_CONFIGURATIONS``) the encoder's gradient of the
expected likelihood is exact, :math:`\nabla \sum_D q(D \mid x) \log p(x \mid D)` over every
configuration, and the decoder trains at the estimator's sample held fixed; the value is the
sample's bound. :meth:`CategoricalVAE.exact_bound` is the expected bound itself, the reference of
the estimators' gradient bias. The IWAE bound uses exact samples and the uniform prior. The
protocol the experiments call is :class:`gr_jax.models.vae.DiscreteVAE`'s.
"""

from __future__ import annotations

import math
from typing import Sequence

import jax
import jax.numpy as jnp
from flax import nnx

from gr_jax import diagnostics, estimators
from gr_jax.models import vae

LOGITS_ACTIVATIONS = ("none", "relu")
LIKELIHOOD_GRADIENTS = ("estimator", "exact")
# Their exact method's bound (categorical_dim ** latent_dim < 16384), the 8x4 shape's 4096.
MAX_CONFIGURATIONS = 16_384


def enumerable(num_latents: int, num_categories: int) -> bool:
  """Whether every configuration of L variables of C categories can be enumerated
  (C ** L <= MAX_CONFIGURATIONS)."""
  return num_categories**num_latents <= MAX_CONFIGURATIONS


def torch_linear_init(fan_in: int):
  """PyTorch's ``nn.Linear`` initializer: uniform in :math:`\\pm 1/\\sqrt{\\text{fan-in}}`."""
  bound = 1.0 / math.sqrt(fan_in)
  return lambda key, shape, dtype=jnp.float32: jax.random.uniform(key, shape, dtype, -bound, bound)


def grey_log_likelihood(pixel_logits: jax.Array, x: jax.Array) -> jax.Array:
  r"""``[...]`` :math:`\sum_i x_i \log \sigma(\ell_i) + (1 - x_i) \log(1 - \sigma(\ell_i))`
  over the last axis: minus PyTorch's ``binary_cross_entropy`` summed, for targets in [0, 1]."""
  return -jnp.sum(x * jax.nn.softplus(-pixel_logits) + (1 - x) * jax.nn.softplus(pixel_logits), -1)


class CategoricalVAE(nnx.Module):
  """q(D | x) = prod_j Cat(D_j; softmax(enc(x)_j)), p(D) uniform, p(x | D) = Bernoulli(dec(D)).

  Args:
    num_latents: L, the number of categorical variables.
    num_categories: C, the categories of each.
    encoder_widths, decoder_widths: the hidden layers (512, 256) and (256, 512).
    activation: "relu" (theirs) or "leaky_relu".
    logits_activation: "none" (ReinMax) or "relu" (GST).
    likelihood_gradient: "estimator", or "exact" (by enumeration; C ** L <= MAX_CONFIGURATIONS).
    num_pixels: 784.
  """

  INFERENCE_NETWORKS = (("layer1", "encoder"),)

  def __init__(
    self,
    num_latents: int,
    num_categories: int,
    *,
    encoder_widths: Sequence[int] = (512, 256),
    decoder_widths: Sequence[int] = (256, 512),
    activation: str = "relu",
    logits_activation: str = "none",
    likelihood_gradient: str = "estimator",
    num_pixels: int = 784,
    rngs: nnx.Rngs,
  ):
    for name, value, allowed in (
      ("activation", activation, ("relu", "leaky_relu")),
      ("logits_activation", logits_activation, LOGITS_ACTIVATIONS),
      ("likelihood_gradient", likelihood_gradient, LIKELIHOOD_GRADIENTS),
    ):
      if value not in allowed:
        raise ValueError(f"{name} must be one of {allowed}; got {value!r}.")
    if num_categories < 2 or num_latents < 1:
      raise ValueError(
        f"need num_latents >= 1 and num_categories >= 2; got {num_latents}, {num_categories}."
      )
    self.num_latents, self.num_categories, self.num_pixels = num_latents, num_categories, num_pixels
    self.logits_activation = logits_activation
    self.likelihood_gradient = likelihood_gradient
    if likelihood_gradient == "exact" and not self.enumerable:
      raise ValueError(
        f"likelihood_gradient='exact' enumerates C ** L = {num_categories}^{num_latents}"
        f" configurations; at most {MAX_CONFIGURATIONS}."
      )
    act = vae.ACTIVATIONS[activation]
    init = nnx.initializers.variance_scaling(1.0 / 3.0, "fan_in", "uniform")  # +-1/sqrt(fan_in)
    flat = num_latents * num_categories
    self.encoder = vae.MLP(
      [num_pixels, *encoder_widths, flat],
      act,
      kernel_init=init,
      bias_init=torch_linear_init,
      rngs=rngs,
    )
    self.decoder = vae.MLP(
      [flat, *decoder_widths, num_pixels],
      act,
      kernel_init=init,
      bias_init=torch_linear_init,
      rngs=rngs,
    )

  def encode(self, x: jax.Array) -> jax.Array:
    """``[B, 784]`` -> ``[B, L, C]`` logits of q(D | x)."""
    logits = self.encoder(x)
    if self.logits_activation == "relu":
      logits = jax.nn.relu(logits)
    return logits.reshape(*x.shape[:-1], self.num_latents, self.num_categories)

  def decode(self, sample: jax.Array) -> jax.Array:
    """``[..., L, C]`` samples (flattened, as theirs) -> ``[..., 784]`` pixel logits."""
    return self.decoder(sample.reshape(*sample.shape[:-2], -1))

  def log_prior(self) -> jax.Array:
    """The uniform prior's log p(D_j = k), a scalar."""
    return jnp.asarray(-math.log(self.num_categories))

  def initial_centering(self) -> jax.Array:
    """``[784]`` zeros: their encoder sees the images as they are."""
    return jnp.zeros(self.num_pixels, jnp.float32)

  def exact_kl(self, logits: jax.Array) -> jax.Array:
    """``[B]`` KL(q(D | x) || uniform), summed over the variables."""
    log_q = jax.nn.log_softmax(logits, axis=-1)
    return jnp.sum(jnp.exp(log_q) * log_q, axis=(-2, -1)) + self.num_latents * math.log(
      self.num_categories
    )

  @property
  def enumerable(self) -> bool:
    """Whether every configuration can be enumerated (C ** L <= MAX_CONFIGURATIONS)."""
    return enumerable(self.num_latents, self.num_categories)

  def expected_likelihood(self, x, logits, *, decoder_gradient: bool = True) -> jax.Array:
    r"""``[...]`` :math:`\sum_D q(D \mid x) \log p(x \mid D)` over all :math:`C^L` configurations
    (``x`` ``[..., 784]``, ``logits`` ``[..., L, C]``); without ``decoder_gradient`` the decoder's
    likelihoods are held fixed (their exact method: the encoder's gradient only).

    Each configuration is decoded once for the whole batch: with its pixel logits
    :math:`\ell_D`, the grey log-likelihood is

    .. math:: \log p(x \mid D) = x^\top \ell_D - \textstyle\sum_i \mathrm{softplus}(\ell_{D,i}),

    so the batch's likelihoods are one ``[..., 784] x [784, C^L]`` product, not a
    ``[C^L, B, 784]`` array of pixel terms."""
    configurations = diagnostics.enumerate_one_hot(
      self.num_latents, self.num_categories, MAX_CONFIGURATIONS
    )  # [c, L, C]
    pixel_logits = self.decode(configurations)  # [c, 784]
    likelihood = x @ pixel_logits.T - jnp.sum(jax.nn.softplus(pixel_logits), axis=-1)  # [..., c]
    if not decoder_gradient:
      likelihood = jax.lax.stop_gradient(likelihood)
    log_q = jax.nn.log_softmax(logits, axis=-1)
    weight = jnp.exp(jnp.einsum("clk,...lk->...c", configurations, log_q))
    return jnp.sum(weight * likelihood, axis=-1)

  def exact_bound(self, x, centering=0.0) -> jax.Array:
    """``[B]`` the expected single-sample bound E_q[log p(x | D)] - KL, exactly (its gradient is
    every estimator's target)."""
    logits = self.encode(x - centering)
    return self.expected_likelihood(x, logits) - self.exact_kl(logits)

  def training_bound(
    self, x, key, estimator: estimators.Estimator, tau, centering=0.0
  ) -> vae.TrainingBound:
    r"""``log p(x | D) - KL(q || p)`` at D = estimator(key, logits): the likelihood estimated, the
    KL exact (a multi-sample estimator evaluates the likelihood; the KL is added as it is)."""
    logits = self.encode(x - centering)
    kl = self.exact_kl(logits)
    if estimator.multi_sample:
      likelihood = estimator(key, logits, f=lambda d: grey_log_likelihood(self.decode(d), x))
      return vae.TrainingBound(likelihood - kl, None, {"kl": kl}, (), x)
    sample = estimator(key, logits, tau=tau)
    if self.likelihood_gradient == "exact":
      sample = jax.lax.stop_gradient(sample)  # the decoder's input only
      expected = self.expected_likelihood(x, logits, decoder_gradient=False)
      likelihood = grey_log_likelihood(self.decode(sample), x)
      bound = likelihood + expected - jax.lax.stop_gradient(expected) - kl
      return vae.TrainingBound(bound, None, {"kl": kl}, (sample,), x)
    bound = grey_log_likelihood(self.decode(sample), x) - kl
    log_q = vae.sample_log_prob(logits, sample) if estimator.score_function else None
    return vae.TrainingBound(bound, log_q, {"kl": kl}, (sample,), x)

  def iwae_bound(self, x, key, num_samples: int, chunk_size: int = 100, centering=0.0):
    r""":math:`\log \frac{1}{M} \sum_k p(x \mid D^k) p(D^k) / q(D^k \mid x)` with exact samples
    (``[B]``; :func:`gr_jax.models.vae.importance_weighted`)."""
    logits = self.encode(x - centering)
    log_q = jax.nn.log_softmax(logits, axis=-1)

    def log_weights(keys):
      samples = jax.vmap(lambda k: estimators.reinforce(k, logits))(keys)
      return jax.vmap(
        lambda d: (
          grey_log_likelihood(self.decode(d), x)
          + jnp.sum(d * (self.log_prior() - log_q), axis=(-2, -1))
        )
      )(samples)

    return vae.importance_weighted(log_weights, key, num_samples, chunk_size, x.shape[:-1])
