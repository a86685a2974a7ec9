"""Variational auto-encoder with n-ary discrete latent variables (Flax NNX).

The model of the paper's section 5.3 / appendix D.2, which is the 240H~784V
model of Maddison et al. (2017, section 5.1 and appendix D): m latent variables
of arity n, each one-hot sample mapped to a corner of the hypercube
{-1, 1}^(log2 n), so the decoder sees m * log2(n) inputs (240 for (n, m) in
{(2, 240), (4, 120), (8, 80), (16, 60)}), a prior over each variable (learned
logits, "sampled unconditionally from some parameters", or uniform), and
Bernoulli pixels. "~" is two tanh layers as wide as the stochastic layer
(appendix D.1) with Glorot initialization (D.5): the decoder is
240-240-240-784; the experiments set the widths and the output bias (D.3).

Every VAE here states its own bounds (the protocol the experiments call, so
that a new model is one class): :meth:`DiscreteVAE.training_bound` (the
single-sample bound an estimator differentiates, with its metrics),
:meth:`DiscreteVAE.iwae_bound` (the importance-weighted bound with exact
samples), ``INFERENCE_NETWORKS`` (the parameters whose gradient the variance
measurements read) and :meth:`DiscreteVAE.initial_centering` (what the
inference networks' inputs are centred by). The two-layer model is
:mod:`gr_jax.models.vae_two_layer`; :class:`BernoulliVAE` is the DisARM
protocol's model (one logit per binary latent).
"""

from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
from flax import nnx

from gr_jax import estimators

ACTIVATIONS = {
  "relu": jax.nn.relu,
  "tanh": jnp.tanh,
  # Keras' LeakyReLU default slope, the DisARM protocol's (its nonlinear Bernoulli VAE).
  "leaky_relu": lambda x: jax.nn.leaky_relu(x, 0.3),
}
KERNEL_INITS = {
  "glorot_uniform": nnx.initializers.glorot_uniform,
  "lecun_normal": nnx.initializers.lecun_normal,
}
PRIORS = ("learned", "uniform")
# The KL term of the single-sample training bound (:func:`kl_term`).
KL_ESTIMATES = ("sampled", "pathwise", "analytic")
# A binary latent's free logits: a two-category softmax ("two"), or one logit alpha, the logits
# (0, alpha) (Maddison et al. 2017, appendices B and C.3).
BINARY_LOGITS = ("two", "one")
# The encoder's input before centring: the pixels, or 2x - 1 in (-1, 1) (their appendix D.4).
ENCODER_INPUTS = ("x", "2x-1")
# GS's latent term: the discrete bound's linear extension at the relaxed sample, or the Binary
# Concrete densities of the logistic pre-sigmoid variable (their appendix C.2's first objective).
RELAXED_KLS = ("discrete", "concrete")


def log2_arity(arity: int) -> int:
  """log2(n) for a power of two n >= 2, else ValueError."""
  if not isinstance(arity, int) or arity < 2 or arity & (arity - 1):
    raise ValueError(f"arity must be a power of two >= 2 (2, 4, 8, 16, ...); got arity={arity!r}.")
  return arity.bit_length() - 1


def hypercube_corners(arity: int) -> jax.Array:
  """``[n, log2 n]`` matrix whose row k is the corner of category k.

  Coordinate b of row k is +1 if bit b of k is set, else -1, so the n rows are
  the n distinct corners of {-1, 1}^(log2 n).
  """
  bits = log2_arity(arity)
  k = jnp.arange(arity)[:, None]
  return 2.0 * ((k >> jnp.arange(bits)[None, :]) & 1).astype(jnp.float32) - 1.0


def hypercube_embedding(sample: jax.Array) -> jax.Array:
  """Maps ``[..., m, n]`` one-hot (or relaxed) samples to ``[..., m * log2 n]``.

  A one-hot sample goes to its corner; a relaxed sample (GS) to the convex
  combination of corners with its weights.
  """
  corners = hypercube_corners(sample.shape[-1]).astype(sample.dtype)
  embedded = sample @ corners
  return embedded.reshape(*sample.shape[:-2], -1)


class MLP(nnx.Module):
  """Dense layers with an activation between them (none after the last); zero biases, or
  ``bias_init(fan_in)``'s initializer per layer."""

  def __init__(
    self,
    sizes: Sequence[int],
    activation: Callable,
    *,
    kernel_init: Callable,
    rngs: nnx.Rngs,
    bias_init: Callable[[int], Callable] | None = None,
  ):
    self.layers = nnx.List(
      [
        nnx.Linear(
          a,
          b,
          kernel_init=kernel_init,
          **({"bias_init": bias_init(a)} if bias_init else {}),
          rngs=rngs,
        )
        for a, b in zip(sizes[:-1], sizes[1:])
      ]
    )
    self.activation = activation

  def __call__(self, x):
    for layer in self.layers[:-1]:
      x = self.activation(layer(x))
    return self.layers[-1](x)


def bernoulli_log_likelihood(pixel_logits: jax.Array, x: jax.Array) -> jax.Array:
  """sum_pixels log Bernoulli(x; sigmoid(logits)), over the last axis."""
  return -jnp.sum(jnp.logaddexp(0.0, jnp.where(x > 0, -pixel_logits, pixel_logits)), axis=-1)


class TrainingBound(NamedTuple):
  """What a model's ``training_bound`` returns for a batch ``[B, ...]``.

  Attributes:
    bound: ``[B]`` the single-sample bound log p(x, h) - log q(h | x) at the
      sampled h (relaxed samples for GS), whose gradient is the estimator's.
    log_q: ``[B]`` log q(h | x) of the samples, the samples held fixed: the
      score REINFORCE weights (score-function estimators only; else None).
    metrics: ``{name: [B]}``, e.g. ``kl`` = log q(h | x) - log p(h).
    samples: each stochastic layer's sample, ``[B, m, n]``.
    inference_inputs: the inputs of the inference networks, in the structure
      of the model's centring (:meth:`DiscreteVAE.initial_centering`), whose
      batch means update the running averages.
  """

  bound: jax.Array
  log_q: jax.Array
  metrics: dict[str, jax.Array]
  samples: tuple[jax.Array, ...]
  inference_inputs: Any


def latent_term(log_prior, logits, sample) -> jax.Array:
  r"""``[B]`` :math:`\sum_j \langle D_j, \log p(D_j) - \log q(D_j \mid x) \rangle` (minus a
  single-sample KL estimate), ``log_prior`` broadcastable to ``sample``."""
  log_q = jax.nn.log_softmax(logits, axis=-1)
  return jnp.sum(sample * (log_prior - log_q), axis=(-2, -1))


def kl_term(log_prior, logits, sample, kl_estimate: str = "sampled") -> jax.Array:
  r"""``[B]`` the KL term of the single-sample bound, :math:`\log q(D \mid x) - \log p(D)` or its
  expectation, summed over the variables; ``kl_estimate`` sets what its gradient is:

  * ``"sampled"``: :math:`\sum_j \langle D_j, \log q(D_j \mid x) - \log p(D_j) \rangle` at the
    sample. Its encoder gradient has two parts: the pathwise one through D (the estimator's)
    and the direct one :math:`\nabla_\theta \log q(D \mid x)` at D held fixed, whose
    expectation is 0 for exact samples (a score with no weight) but whose variance is not.
  * ``"pathwise"``: the same value with the direct part left out (q's logits held fixed in
    :math:`\log q`; the prior keeps its gradient): for exact samples the same expected
    gradient with less variance (the DisARM protocol's multi-sample surrogates leave it
    out too).
  * ``"analytic"``: the exact :math:`\mathrm{KL}(q(D \mid x) \,\|\, p(D)) = \sum_j \sum_k
    q_{jk} (\log q_{jk} - \log p_{jk})`, which does not depend on the sample: only the
    likelihood is estimated.

  For relaxed (GS) samples the direct part is not mean-zero, so ``"pathwise"`` changes
  GS's expected gradient.
  """
  log_q = jax.nn.log_softmax(logits, axis=-1)
  if kl_estimate == "analytic":
    return jnp.sum(jnp.exp(log_q) * (log_q - log_prior), axis=(-2, -1))
  if kl_estimate == "pathwise":
    logits = jax.lax.stop_gradient(logits)
  elif kl_estimate != "sampled":
    raise ValueError(f"kl_estimate must be one of {KL_ESTIMATES}; got {kl_estimate!r}.")
  return -latent_term(log_prior, logits, sample)


def sample_log_prob(logits, sample) -> jax.Array:
  """``[B]`` log q(sample) summed over the variables, the sample held fixed (no gradient)."""
  return jnp.sum(estimators.categorical_log_prob(logits, jax.lax.stop_gradient(sample)), axis=-1)


def as_binary(alpha: jax.Array) -> jax.Array:
  """``[...]`` one logit per binary latent -> ``[..., 2]`` the categorical logits (0, alpha)."""
  return jnp.stack([jnp.zeros_like(alpha), alpha], axis=-1)


def binary_concrete_log_density(y: jax.Array, log_odds: jax.Array, tau) -> jax.Array:
  r"""Log-density of the logistic pre-sigmoid variable of a Binary Concrete (Maddison et al.
  2017, appendix C.3): :math:`Y = (\alpha + L) / \tau`, :math:`L \sim \mathrm{Logistic}(0, 1)`,

  .. math:: \log f(y) = \log \tau + z - 2 \log(1 + e^{z}), \quad z = \alpha - \tau y,

  elementwise (``log_odds`` is :math:`\alpha`, broadcastable to ``y``)."""
  z = log_odds - tau * y
  return jnp.log(tau) + z - 2.0 * jax.nn.softplus(z)


def exp_concrete_log_density(y: jax.Array, logits: jax.Array, tau) -> jax.Array:
  r"""Log-density of an ExpConcrete variable, the log of a Concrete (Gumbel-softmax) sample
  (Maddison et al. 2017, appendix C.3): :math:`Y = \mathrm{log\_softmax}((\theta + G) / \tau)`,
  with respect to Lebesgue measure on its first n - 1 coordinates (the last one is
  :math:`\log(1 - \sum_{k<n} e^{y_k})`),

  .. math:: \log f(y) = \log((n - 1)!) + (n - 1) \log \tau
      + \sum_k (\theta_k - \tau y_k) - n \log \sum_k e^{\theta_k - \tau y_k} - y_n:

  the Concrete density of :math:`e^{y}` times the Jacobian :math:`\prod_{k<n} e^{y_k}`
  (:math:`-y_n` is free of the parameters: it cancels in a difference of log-densities at the
  same y, such as GS's latent term). Over the last axis;
  ``logits`` :math:`\theta` ``[..., n]`` broadcast to ``y`` (unnormalized logits give the same
  density). Returns ``[...]``."""
  n = y.shape[-1]
  z = logits - tau * y
  return (
    jax.scipy.special.gammaln(float(n))
    + (n - 1) * jnp.log(tau)
    + jnp.sum(z, axis=-1)
    - n * jax.nn.logsumexp(z, axis=-1)
    - y[..., -1]
  )


def importance_weighted(log_weights_fn, key, num_samples: int, chunk_size: int, batch_shape):
  r""":math:`\log \frac{1}{M} \sum_k w_k` over ``num_samples`` draws, ``chunk_size`` at a time.

  ``log_weights_fn(keys [c]) -> [c, B]`` gives the log weights of the draws of
  ``keys``; chunk i draws with ``split(fold_in(key, i), chunk_size)``. A running
  log-sum-exp keeps the memory O(chunk_size * B) whatever M is; M is rounded up
  to whole chunks only in compute (surplus draws are masked out of the sum).
  """
  chunk_size = min(chunk_size, num_samples)
  num_chunks = -(-num_samples // chunk_size)

  def body(running, index):
    keys = jax.random.split(jax.random.fold_in(key, index), chunk_size)
    log_w = log_weights_fn(keys)  # [c, B]
    valid = (index * chunk_size + jnp.arange(chunk_size)) < num_samples
    log_w = jnp.where(valid[:, None], log_w, -jnp.inf)
    return jnp.logaddexp(running, jax.nn.logsumexp(log_w, axis=0)), None

  init = jnp.full(batch_shape, -jnp.inf)
  total, _ = jax.lax.scan(body, init, jnp.arange(num_chunks))
  return total - math.log(num_samples)


class DiscreteVAE(nnx.Module):
  r"""q(D | x) = prod_j Cat(D_j; softmax(enc(x)_j)), p(D) = prod_j Cat(D_j; softmax(prior_j)),
  p(x | D) = Bernoulli(dec(embed(D))).

  With ``prior="learned"`` the prior logits are a ``[m, n]`` parameter
  initialized at zero (a fresh model starts at the uniform prior); with
  ``"uniform"`` the prior is fixed at 1/n. ``kl_estimate`` is the single-sample
  bound's KL term (:func:`kl_term`: ``"sampled"``, ``"pathwise"`` or
  ``"analytic"``); the IWAE bound does not read it.

  Three choices of Maddison et al. (2017) that the defaults do not make:
  ``binary_logits="one"`` (arity 2: one logit :math:`\alpha_j` per latent from
  the encoder and the prior, the logits :math:`(0, \alpha_j)`; the same family
  of distributions as two free logits, parameterized by their difference),
  ``encoder_input="2x-1"`` (the encoder sees 2x - 1 minus its centring, the
  activity in (-1, 1) of their appendix D.4; its running average is of 2x - 1)
  and ``relaxed_kl="concrete"`` (GS: the latent term is
  :math:`\log p_{\tau_p}(Y) - \log q_\tau(Y \mid x)` of the relaxed variable, on binary
  latents the logistic pre-sigmoid variable (:func:`binary_concrete_log_density`),
  on n-ary ones the ExpConcrete log-sample (:func:`exp_concrete_log_density`), with the
  prior at temperature ``relaxed_prior_tau``, 0 meaning the posterior's tau).
  """

  # (label, parameter) of each stochastic layer's inference network.
  INFERENCE_NETWORKS = (("layer1", "encoder"),)

  def __init__(
    self,
    num_vars: int,
    arity: int,
    *,
    encoder_widths: Sequence[int] = (240, 240),
    decoder_widths: Sequence[int] = (240, 240),
    activation: str = "tanh",
    kernel_init: str = "glorot_uniform",
    prior: str = "learned",
    kl_estimate: str = "sampled",
    binary_logits: str = "two",
    encoder_input: str = "x",
    relaxed_kl: str = "discrete",
    relaxed_prior_tau: float = 0.0,
    num_pixels: int = 784,
    rngs: nnx.Rngs,
  ):
    for name, value, allowed in (
      ("activation", activation, ACTIVATIONS),
      ("kernel_init", kernel_init, KERNEL_INITS),
      ("prior", prior, PRIORS),
      ("kl_estimate", kl_estimate, KL_ESTIMATES),
      ("binary_logits", binary_logits, BINARY_LOGITS),
      ("encoder_input", encoder_input, ENCODER_INPUTS),
      ("relaxed_kl", relaxed_kl, RELAXED_KLS),
    ):
      if value not in allowed:
        raise ValueError(f"{name} must be one of {sorted(allowed)}; got {value!r}.")
    if binary_logits != "two" and arity != 2:
      raise ValueError(
        f"binary_logits={binary_logits!r} is for binary latents (arity 2); got arity {arity}."
      )
    if not relaxed_prior_tau >= 0:
      raise ValueError(f"relaxed_prior_tau must be >= 0 (0: tau); got {relaxed_prior_tau!r}.")
    latent_dim = num_vars * log2_arity(arity)
    self.num_vars, self.arity, self.num_pixels = num_vars, arity, num_pixels
    self.kl_estimate = kl_estimate
    self.one_logit = binary_logits == "one"
    self.encoder_input = encoder_input
    self.relaxed_kl, self.relaxed_prior_tau = relaxed_kl, relaxed_prior_tau
    act, init = ACTIVATIONS[activation], KERNEL_INITS[kernel_init]()
    logits_shape = (num_vars,) if self.one_logit else (num_vars, arity)
    self.encoder = MLP(
      [num_pixels, *encoder_widths, math.prod(logits_shape)], act, kernel_init=init, rngs=rngs
    )
    self.decoder = MLP([latent_dim, *decoder_widths, num_pixels], act, kernel_init=init, rngs=rngs)
    self.prior_logits = nnx.Param(jnp.zeros(logits_shape)) if prior == "learned" else None

  def log_prior(self) -> jax.Array:
    """``[m, n]`` log p(D_j = k) (broadcastable: a scalar -log n for the uniform prior)."""
    if self.prior_logits is None:
      return jnp.asarray(-math.log(self.arity))
    logits = self.prior_logits.get_value()
    return jax.nn.log_softmax(as_binary(logits) if self.one_logit else logits, axis=-1)

  def encode(self, x: jax.Array) -> jax.Array:
    """``[B, 784]`` encoder inputs -> ``[B, m, n]`` logits of q(D | x)."""
    if self.one_logit:
      return as_binary(self.encoder(x))
    return self.encoder(x).reshape(*x.shape[:-1], self.num_vars, self.arity)

  def inference_input(self, x: jax.Array) -> jax.Array:
    """The encoder's input before centring (``encoder_input``): x, or 2x - 1."""
    return 2.0 * x - 1.0 if self.encoder_input == "2x-1" else x

  def decode(self, sample: jax.Array) -> jax.Array:
    """``[..., m, n]`` samples -> ``[..., 784]`` Bernoulli logits of p(x | D)."""
    return self.decoder(hypercube_embedding(sample))

  def initial_centering(self) -> jax.Array:
    """``[784]`` zeros: what the encoder's input is centred by at the start (its running average,
    or the experiment's fixed pixel means)."""
    return jnp.zeros(self.num_pixels, jnp.float32)

  def log_weight(self, x, logits, sample) -> jax.Array:
    r"""log p(x, D) - log q(D | x) per example (``[B]``), for one sample D.

    .. math::
      \log p(x \mid D) + \sum_j \langle D_j, \log p(D_j) - \log q(D_j \mid x) \rangle

    with the model's prior (learned or uniform). For one-hot D this is the usual
    single-sample bound. For a relaxed GS sample S the same expression is used
    with S in place of D (the decoder sees the relaxed embedding, and the
    q and prior terms are the cross-entropy terms <S, log p - log q>): the
    linear extension of the discrete bound to the simplex, equal to it at the
    corners.
    """
    return bernoulli_log_likelihood(self.decode(sample), x) + latent_term(
      self.log_prior(), logits, sample
    )

  def training_bound(
    self, x, key, estimator: estimators.Estimator, tau, centering=0.0
  ) -> TrainingBound:
    r"""The training objective per example: :meth:`log_weight` at D = estimator(key, logits).

    ``centering`` is subtracted from the encoder's input only (the running
    average of the inputs, or the training pixel means); the likelihood is of
    x itself. ``metrics["kl"]`` is the KL term (:func:`kl_term`, as
    ``kl_estimate`` says: the sample's :math:`\log q(D \mid x) - \log p(D)`,
    or the exact KL); ``log_q`` feeds REINFORCE's surrogate. The multi-sample
    estimators' surrogate is :meth:`_multi_sample_bound`'s.
    """
    inputs = self.inference_input(x)
    logits = self.encode(inputs - centering)
    if estimator.multi_sample:
      return self._multi_sample_bound(x, key, estimator, logits, inputs)
    if estimator.relaxed and self.relaxed_kl == "concrete":
      sample, kl = self._concrete_sample_and_kl(key, logits, tau)
    else:
      sample = estimator(key, logits, tau=tau)
      kl = kl_term(self.log_prior(), logits, sample, self.kl_estimate)
    bound = bernoulli_log_likelihood(self.decode(sample), x) - kl
    log_q = sample_log_prob(logits, sample) if estimator.score_function else None
    return TrainingBound(bound, log_q, {"kl": kl}, (sample,), inputs)

  def _concrete_sample_and_kl(self, key, logits, tau):
    r"""GS's relaxed sample and the Concrete KL term :math:`\sum_j \log q_\tau(Y_j \mid x) -
    \log p_{\tau_p}(Y_j)`, drawn from GS's Gumbels at ``key`` (so the sample is
    ``estimators.gumbel_softmax(key, logits, tau)``): on binary latents at the logistic
    pre-sigmoid variable :math:`Y_j = (\alpha_j + G_{j1} - G_{j0}) / \tau`, on n-ary ones
    at the ExpConcrete log-sample :math:`Y_j = \mathrm{log\_softmax}((\theta_j + G_j) /
    \tau)`."""
    gumbels = jax.random.gumbel(key, logits.shape, jnp.float32)
    log_prior = jnp.broadcast_to(self.log_prior(), logits.shape)
    prior_tau = self.relaxed_prior_tau if self.relaxed_prior_tau > 0 else tau
    if self.arity != 2:
      y = jax.nn.log_softmax((logits + gumbels) / tau, axis=-1)
      kl = exp_concrete_log_density(y, logits, tau) - exp_concrete_log_density(
        y, log_prior, prior_tau
      )
      return jnp.exp(y), jnp.sum(kl, axis=-1)
    log_odds = logits[..., 1] - logits[..., 0]
    y = (log_odds + gumbels[..., 1] - gumbels[..., 0]) / tau
    sample = jnp.stack([jax.nn.sigmoid(-y), jax.nn.sigmoid(y)], axis=-1)
    prior_log_odds = log_prior[..., 1] - log_prior[..., 0]
    kl = binary_concrete_log_density(y, log_odds, tau) - binary_concrete_log_density(
      y, prior_log_odds, prior_tau
    )
    return sample, jnp.sum(kl, axis=-1)

  def _multi_sample_bound(self, x, key, estimator, logits, inputs) -> TrainingBound:
    r"""The surrogate of a multi-sample estimator (RLOO, DisARM) of the single-sample bound.

    Each evaluation is :meth:`log_weight` at a sample with q's logits held
    fixed: the encoder's gradient is the estimator's alone (the direct term
    :math:`-\nabla \log q(D)` has expectation 0; the DisARM protocol's code
    leaves it out too), the decoder and the prior get the mean of their
    pathwise gradients over the evaluations. ``bound`` is the mean bound
    over them, ``metrics["kl"]`` the mean sampled KL.
    """
    fixed = jax.lax.stop_gradient(logits)

    def bound_and_kl(sample):
      kl = -latent_term(self.log_prior(), fixed, sample)
      return bernoulli_log_likelihood(self.decode(sample), x) - kl, kl

    bound, kls = estimator(key, logits, f=bound_and_kl, has_aux=True)
    return TrainingBound(bound, None, {"kl": jnp.mean(kls, axis=0)}, (), inputs)

  def iwae_bound(self, x, key, num_samples: int, chunk_size: int = 100, centering=0.0):
    r"""Importance-weighted bound (Burda et al. 2016) with exact discrete samples.

    .. math:: \log \frac{1}{M} \sum_{k=1}^{M} \frac{p(x, D^k)}{q(D^k \mid x)},
      \quad D^k \sim q(\cdot \mid x)

    computed ``chunk_size`` samples at a time (:func:`importance_weighted`), so
    the memory is O(chunk_size * B) whatever M is.

    Args:
      x: ``[B, 784]`` images.
      key: a PRNG key.
      num_samples: M.
      chunk_size: samples per chunk.
      centering: subtracted from the encoder's input (as in training).

    Returns:
      ``[B]`` bounds in nats.
    """
    logits = self.encode(self.inference_input(x) - centering)

    def log_weights(keys):
      samples = jax.vmap(lambda k: estimators.reinforce(k, logits))(keys)
      return jax.vmap(lambda d: self.log_weight(x, logits, d))(samples)  # [c, B]

    return importance_weighted(log_weights, key, num_samples, chunk_size, x.shape[:-1])


class BernoulliVAE(DiscreteVAE):
  r"""The Bernoulli VAE of the DisARM protocol (Dong, Mnih & Tucker 2020; Yin & Zhou 2019).

  m binary latents, one logit :math:`\alpha_j` each from the encoder (the
  categorical logits of the library's one-hot convention are :math:`(0,
  \alpha_j)`: category 1 is "b = 1"), learned prior logits (one per latent,
  zero at the start), the decoder's input the latents as :math:`2b - 1`
  (the hypercube embedding; the protocol's ``demean_input`` for the decoder).
  Linear (``hidden_widths=()``: 784 -> m logits, m -> 784) or non-linear (two
  hidden layers of 200 with LeakyReLU on each side). The bounds are
  :class:`DiscreteVAE`'s.
  """

  def __init__(
    self,
    num_vars: int = 200,
    *,
    encoder_widths: Sequence[int] = (),
    decoder_widths: Sequence[int] = (),
    activation: str = "leaky_relu",
    kernel_init: str = "glorot_uniform",
    prior: str = "learned",
    kl_estimate: str = "sampled",
    num_pixels: int = 784,
    rngs: nnx.Rngs,
  ):
    super().__init__(
      num_vars,
      2,
      encoder_widths=encoder_widths,
      decoder_widths=decoder_widths,
      activation=activation,
      kernel_init=kernel_init,
      prior=prior,
      kl_estimate=kl_estimate,
      binary_logits="one",
      num_pixels=num_pixels,
      rngs=rngs,
    )
