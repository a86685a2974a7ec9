"""Single-evaluation gradient estimators for categorical random variables.

Every estimator is a pure function of ``(key, logits, ...)``: the categories lie
on the last axis of ``logits``, any leading batch shape is allowed, and the
functions compose with ``jax.jit``, ``jax.vmap`` and ``jax.grad``. The
straight-through estimators (``straight_through``, ``st_gumbel_softmax``,
``gumbel_rao``) return an exact one-hot sample in the forward pass (every entry
is exactly 0 or 1) and replace only its backward pass, through
``jax.custom_vjp``.

Notation (Paulus, Maddison & Krause, "Rao-Blackwellizing the Straight-Through
Gumbel-Softmax Gradient Estimator", ICLR 2021): :math:`\\theta` are the logits,
:math:`G` i.i.d. standard Gumbels, :math:`D = \\mathrm{onehot}(\\arg\\max(\\theta
+ G))` the sample, and :math:`\\mathrm{softmax}_\\tau(x) = \\mathrm{softmax}(x /
\\tau)`. For an upstream cotangent :math:`g = \\partial f / \\partial D` the
vector-Jacobian product of the tempered softmax at a point with value :math:`s`
is

.. math::
  g^\\top \\frac{d\\, \\mathrm{softmax}_\\tau(x)}{d x} = \\frac{1}{\\tau}\\,
  s \\odot (g - \\langle g, s \\rangle),

which every estimator here uses: no :math:`n \\times n` Jacobian is formed.

Masking: logits may be ``-inf`` for impossible categories. Those categories are
never sampled and receive exactly zero gradient from every estimator.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

Array = jax.Array

# Upper bound on the number of float32 elements (num_samples x logits.size) that
# `gumbel_rao` processes at once in its backward pass; larger K is scanned in
# chunks. 2**20 elements are 4 MiB per float32 temporary (fastest on CPU).
MAX_CHUNK_ELEMENTS = 2**20

# Cap on logZ - logits_j in the GR backward pass; see `_gr_chunk_vjp`.
_MAX_LOG_RATIO = 80.0


# ---------------------------------------------------------------------------
# Argument checks (run at trace time, on static or concrete values only).
# ---------------------------------------------------------------------------


def _check_logits(logits: Array) -> None:
  if not hasattr(logits, "dtype") or not jnp.issubdtype(logits.dtype, jnp.floating):
    raise ValueError(
        "logits must be a floating-point array (float32, bfloat16, float16 or"
        f" float64); got dtype {getattr(logits, 'dtype', type(logits))}."
    )
  if logits.ndim < 1 or logits.shape[-1] < 1:
    raise ValueError(
        "logits must have at least one axis with the categories on the last"
        f" axis; got shape {logits.shape}."
    )


def _check_tau(tau: Any) -> None:
  try:
    value = float(tau)
  except (TypeError, jax.errors.ConcretizationTypeError):
    return  # A traced temperature (e.g. an annealing schedule) is allowed.
  if not value > 0.0 or math.isinf(value):
    raise ValueError(f"tau must be a finite number > 0; got tau={tau!r}.")


def _check_num_samples(num_samples: Any) -> None:
  if (
      isinstance(num_samples, bool)
      or not isinstance(num_samples, int)
      or num_samples < 1
  ):
    raise ValueError(
        "num_samples must be a Python int >= 1 (it sets array shapes); got"
        f" num_samples={num_samples!r}."
    )


def _check_sample(logits: Array, sample: Array) -> None:
  if getattr(sample, "shape", None) != logits.shape:
    raise ValueError(
        "sample must be a one-hot array with the shape of logits"
        f" {logits.shape}; got shape {getattr(sample, 'shape', None)}."
    )


def _compute_dtype(dtype) -> jnp.dtype:
  """Low-precision logits are processed in float32; float64 stays float64."""
  return jnp.promote_types(dtype, jnp.float32)


def _sample_one_hot(key: Array, logits: Array) -> Array:
  """An exact one-hot sample of Categorical(softmax(logits)), in logits' dtype."""
  index = jax.random.categorical(key, logits.astype(_compute_dtype(logits.dtype)))
  return jax.nn.one_hot(index, logits.shape[-1], dtype=logits.dtype)


def _softmax_vjp(probs: Array, cotangent: Array, tau) -> Array:
  """g^T d softmax_tau(x)/dx for softmax_tau(x) = probs: probs*(g - <g,probs>)/tau."""
  inner = jnp.sum(cotangent * probs, axis=-1, keepdims=True)
  return probs * (cotangent - inner) / tau


def _zero_if_masked(logits: Array, grad: Array) -> Array:
  # probs are exactly 0 at -inf logits already; this also covers 0 * inf.
  return jnp.where(jnp.isneginf(logits), 0.0, grad)


# ---------------------------------------------------------------------------
# Straight-through (ST): gradient through softmax(logits / tau).
# ---------------------------------------------------------------------------


@jax.custom_vjp
def _straight_through(key, logits, tau):
  return _sample_one_hot(key, logits)


def _straight_through_fwd(key, logits, tau):
  return _sample_one_hot(key, logits), (logits, tau)


def _straight_through_bwd(residuals, cotangent):
  logits, tau = residuals
  dtype = _compute_dtype(logits.dtype)
  probs = jax.nn.softmax(logits.astype(dtype) / tau, axis=-1)
  grad = _softmax_vjp(probs, cotangent.astype(dtype), tau)
  return None, _zero_if_masked(logits, grad).astype(logits.dtype), None


_straight_through.defvjp(_straight_through_fwd, _straight_through_bwd)


def straight_through(key: Array, logits: Array, *, tau=1.0) -> Array:
  """Slope-annealed straight-through estimator (ST).

  .. math::
    D \\sim \\mathrm{Categorical}(\\mathrm{softmax}(\\theta)), \\qquad
    \\nabla_{\\mathrm{ST}} = \\frac{\\partial f(D)}{\\partial D}
      \\frac{d\\, \\mathrm{softmax}_\\tau(\\theta)}{d \\theta}.

  Args:
    key: a PRNG key.
    logits: float array ``[..., n]`` of unnormalized log-probabilities; ``-inf``
      marks impossible categories.
    tau: temperature > 0 of the surrogate softmax (may be traced).

  Returns:
    An exact one-hot sample ``D`` of shape and dtype of ``logits``.

  Reference: Bengio et al. 2013; Paulus et al. 2021, section 2.
  """
  _check_logits(logits)
  _check_tau(tau)
  return _straight_through(key, logits, tau)


# ---------------------------------------------------------------------------
# Gumbel-Softmax (GS) and straight-through Gumbel-Softmax (ST-GS).
# ---------------------------------------------------------------------------


def _perturbed_logits(key: Array, logits: Array) -> Array:
  """logits + G with G i.i.d. Gumbel(0, 1), in the compute dtype."""
  dtype = _compute_dtype(logits.dtype)
  return logits.astype(dtype) + jax.random.gumbel(key, logits.shape, dtype)


def gumbel_softmax(key: Array, logits: Array, *, tau=1.0) -> Array:
  """Gumbel-Softmax / Concrete relaxation (GS), with its ordinary gradient.

  .. math::
    S_\\tau = \\mathrm{softmax}_\\tau(\\theta + G), \\qquad
    \\nabla_{\\mathrm{GS}} = \\frac{\\partial f(S_\\tau)}{\\partial S_\\tau}
      \\frac{d\\, \\mathrm{softmax}_\\tau(\\theta + G)}{d\\theta}.

  The forward value is the *relaxed* sample (a point inside the simplex, not a
  one-hot vector): the loss must be defined on the simplex.

  Args:
    key: a PRNG key.
    logits: float array ``[..., n]``; ``-inf`` marks impossible categories.
    tau: temperature > 0 (may be traced).

  Returns:
    ``S_tau`` with the shape and dtype of ``logits``.

  Reference: Jang et al. 2017; Maddison et al. 2017.
  """
  _check_logits(logits)
  _check_tau(tau)
  relaxed = jax.nn.softmax(_perturbed_logits(key, logits) / tau, axis=-1)
  return relaxed.astype(logits.dtype)


@jax.custom_vjp
def _st_gumbel_softmax(key, logits, tau):
  return _st_gumbel_softmax_fwd(key, logits, tau)[0]


def _st_gumbel_softmax_fwd(key, logits, tau):
  perturbed = _perturbed_logits(key, logits)
  sample = jax.nn.one_hot(
      jnp.argmax(perturbed, axis=-1), logits.shape[-1], dtype=logits.dtype
  )
  relaxed = jax.nn.softmax(perturbed / tau, axis=-1)
  return sample, (logits, relaxed, tau)


def _st_gumbel_softmax_bwd(residuals, cotangent):
  logits, relaxed, tau = residuals
  grad = _softmax_vjp(relaxed, cotangent.astype(relaxed.dtype), tau)
  return None, _zero_if_masked(logits, grad).astype(logits.dtype), None


_st_gumbel_softmax.defvjp(_st_gumbel_softmax_fwd, _st_gumbel_softmax_bwd)


def st_gumbel_softmax(key: Array, logits: Array, *, tau=1.0) -> Array:
  """Straight-through Gumbel-Softmax estimator (ST-GS).

  .. math::
    D = \\mathrm{onehot}(\\arg\\max_i(\\theta_i + G_i)), \\qquad
    \\nabla_{\\mathrm{STGS}} = \\frac{\\partial f(D)}{\\partial D}
      \\frac{d\\, \\mathrm{softmax}_\\tau(\\theta + G)}{d\\theta}

  with the same Gumbels :math:`G` in both. The forward value is the exact
  one-hot ``D``.

  Args:
    key: a PRNG key. With the same key, ``gumbel_softmax`` returns the relaxed
      sample ``S_tau`` at the same ``G``, and ``D = onehot(argmax(S_tau))``.
    logits: float array ``[..., n]``; ``-inf`` marks impossible categories.
    tau: temperature > 0 (may be traced).

  Returns:
    An exact one-hot sample of the shape and dtype of ``logits``.

  Reference: Jang et al. 2017; Paulus et al. 2021, eq. (5).
  """
  _check_logits(logits)
  _check_tau(tau)
  return _st_gumbel_softmax(key, logits, tau)


# ---------------------------------------------------------------------------
# Gumbel-Rao (GR-MCK).
# ---------------------------------------------------------------------------


def _uniform_open(key: Array, shape, dtype) -> Array:
  """U ~ Uniform(0, 1) with U > 0, so that -log(U) is finite and > 0."""
  return jax.random.uniform(key, shape, dtype, minval=jnp.finfo(dtype).tiny)


def conditional_gumbel(
    key: Array, logits: Array, sample: Array, num_samples: int
) -> Array:
  """K samples of ``logits + G`` conditioned on ``argmax(logits + G) = sample``.

  With :math:`i` the index of the one-hot ``sample``,
  :math:`\\log Z = \\mathrm{logsumexp}(\\theta)` and :math:`E_j \\sim
  \\mathrm{Exp}(1)` i.i.d. (Maddison et al. 2014; Paulus et al. 2021, eq. 8):

  .. math::
    (\\theta + G)_j \\mid D \\overset{d}{=} \\begin{cases}
      \\log Z - \\log E_i & j = i, \\\\
      -\\log\\left(E_j e^{-\\theta_j} + E_i e^{-\\log Z}\\right) & j \\ne i,
    \\end{cases}

  computed in log space (``logaddexp``), so it is finite for logits of any
  scale; ``-inf`` logits give ``-inf``.

  Args:
    key: a PRNG key.
    logits: float array ``[..., n]``.
    sample: one-hot array of the shape of ``logits`` (the conditioning value).
    num_samples: K, a Python int >= 1.

  Returns:
    Array ``[K, ..., n]`` in the compute dtype of ``logits`` (float32 for
    low-precision logits) whose argmax over the last axis equals ``sample``.
  """
  _check_logits(logits)
  _check_sample(logits, sample)
  _check_num_samples(num_samples)
  dtype = _compute_dtype(logits.dtype)
  logits = logits.astype(dtype)
  is_top = sample.astype(bool)
  log_exp = jnp.log(-jnp.log(_uniform_open(key, (num_samples, *logits.shape), dtype)))
  log_z = jax.nn.logsumexp(logits, axis=-1, keepdims=True)
  log_exp_top = jnp.sum(jnp.where(is_top, log_exp, 0.0), axis=-1, keepdims=True)
  top = log_z - log_exp_top
  others = -jnp.logaddexp(log_exp - logits, log_exp_top - log_z)
  return jnp.where(is_top, top, others)


def _gr_chunk_vjp(key, chunk_size, inv_probs, is_top, is_masked, cotangent, tau):
  """Sum over `chunk_size` conditional samples of s * (g - <g, s>).

  Under the conditioning argmax = i, with E ~ Exp(1) i.i.d. and
  r_j = (E_j / E_i) exp(logZ - logits_j),

      softmax_tau(logits + G)_j  is proportional to  (1 + r_j)^(-1/tau)  (j != i),
                                                     1                 (j = i),

  which follows from `conditional_gumbel` by subtracting the top coordinate:
  three transcendental operations per element (a log for E_j, log1p and exp)
  and no log-sum-exp over K. exp(logZ - logits_j) is capped at e^80
  (`inv_probs`), and r may overflow to +inf, whose limit 0 is exact: either
  way the entry is below e^(-80/tau) next to the top entry's 1, under float32
  resolution for tau <= 4. Masked categories are set to exactly zero.

  Args:
    key: PRNG key of this chunk.
    chunk_size: number of conditional samples in the chunk.
    inv_probs: ``[V, n]`` min(exp(logZ - logits), e^80).
    is_top, is_masked: ``[V, n]`` booleans (the sample; ``-inf`` logits).
    cotangent: ``[V, n]`` upstream cotangent g.
    tau: temperature.

  Returns:
    ``[V, n]`` sum over the chunk of ``s_k * (g - <g, s_k>)``.
  """
  others_key, top_key = jax.random.split(key)
  dtype = inv_probs.dtype
  num_vars = inv_probs.shape[0]
  exps = -jnp.log(_uniform_open(others_key, (chunk_size, *inv_probs.shape), dtype))
  exp_top = -jnp.log(_uniform_open(top_key, (chunk_size, num_vars, 1), dtype))
  ratio = exps * (inv_probs / exp_top)
  unnormalized = jnp.exp(-jnp.log1p(ratio) / tau)
  unnormalized = jnp.where(is_top, 1.0, jnp.where(is_masked, 0.0, unnormalized))
  # Materialize once: otherwise XLA fuses (and so recomputes) the random
  # number generation into each of the reductions below.
  unnormalized = jax.lax.optimization_barrier(unnormalized)
  inv_norm = 1.0 / jnp.sum(unnormalized, axis=-1)  # [c, V]
  inner = jnp.einsum("cvn,vn->cv", unnormalized, cotangent) * inv_norm  # <g, s_k>
  # sum_k s_k * (g - <g, s_k>) with s_k = u_k / z_k, as two contractions over k.
  weight_sum = jnp.einsum("cvn,cv->vn", unnormalized, inv_norm)
  weighted_inner = jnp.einsum("cvn,cv->vn", unnormalized, inner * inv_norm)
  return cotangent * weight_sum - weighted_inner


def _gumbel_rao_grad(key, logits, sample, cotangent, tau, num_samples):
  """(1/K) sum_k g^T J(softmax_tau at the k-th conditional sample), chunked."""
  dtype = _compute_dtype(logits.dtype)
  num_categories = logits.shape[-1]
  logits = logits.astype(dtype).reshape(-1, num_categories)
  log_inv_probs = jax.nn.logsumexp(logits, axis=-1, keepdims=True) - logits
  chunk_vjp = functools.partial(
      _gr_chunk_vjp,
      inv_probs=jnp.exp(jnp.minimum(log_inv_probs, _MAX_LOG_RATIO)),
      is_top=sample.reshape(logits.shape).astype(bool),
      is_masked=jnp.isneginf(logits),
      cotangent=cotangent.astype(dtype).reshape(logits.shape),
      tau=tau,
  )
  chunk_size = max(1, min(num_samples, MAX_CHUNK_ELEMENTS // max(1, logits.size)))
  num_full_chunks, last = divmod(num_samples, chunk_size)
  if num_full_chunks == 1 and last == 0:
    total = chunk_vjp(key, chunk_size)
  else:

    def body(total, index):
      return total + chunk_vjp(jax.random.fold_in(key, index), chunk_size), None

    total, _ = jax.lax.scan(body, jnp.zeros_like(logits), jnp.arange(num_full_chunks))
    if last:
      total = total + chunk_vjp(jax.random.fold_in(key, num_full_chunks), last)
  return (total / (num_samples * tau)).reshape(sample.shape)


@functools.partial(jax.custom_vjp, nondiff_argnums=(3,))
def _gumbel_rao(key, logits, tau, num_samples):
  return _sample_one_hot(jax.random.split(key)[0], logits)


def _gumbel_rao_fwd(key, logits, tau, num_samples):
  sample_key, backward_key = jax.random.split(key)
  sample = _sample_one_hot(sample_key, logits)
  return sample, (backward_key, logits, sample, tau)


def _gumbel_rao_bwd(num_samples, residuals, cotangent):
  backward_key, logits, sample, tau = residuals
  grad = _gumbel_rao_grad(backward_key, logits, sample, cotangent, tau, num_samples)
  return None, grad.astype(logits.dtype), None


_gumbel_rao.defvjp(_gumbel_rao_fwd, _gumbel_rao_bwd)


def gumbel_rao(key: Array, logits: Array, *, tau=1.0, num_samples: int = 10) -> Array:
  """Gumbel-Rao Monte Carlo estimator (GR-MCK), Paulus et al. 2021.

  Forward: an exact one-hot sample :math:`D \\sim
  \\mathrm{Categorical}(\\mathrm{softmax}(\\theta))`. Backward: the upstream
  cotangent times the Monte Carlo average of the tempered-softmax Jacobian at
  K conditional Gumbel samples:

  .. math::
    \\nabla_{\\mathrm{GRMC}K} = \\frac{\\partial f(D)}{\\partial D}\\,
      \\frac{1}{K} \\sum_{k=1}^{K} J_\\tau(\\theta + G^k), \\qquad
    J_\\tau(x) = \\frac{d\\, \\mathrm{softmax}_\\tau(x)}{dx},
    \\quad \\theta + G^k \\overset{iid}{\\sim} \\theta + G \\mid D.

  The :math:`G^k` are held fixed: the Jacobian is evaluated at the conditional
  samples and no derivative is taken through the conditional sampling path.
  This is the paper's Appendix A pseudo-code and the estimator that its
  Propositions 1-3 are about: since :math:`E[J_\\tau(\\theta + G) \\mid D]` is
  estimated without bias, :math:`E[\\nabla_{\\mathrm{GRMC}K} \\mid D] =
  E[\\nabla_{\\mathrm{STGS}} \\mid D]`, and for K = 1 the estimator has exactly
  the distribution of ST-GS. The sentence of the paper's section 3.2 that takes
  the *total* derivative through :math:`G^k` (which depends on
  :math:`\\theta` through the reparameterization of eq. 8) describes a
  different estimator: its mean is not ST-GS's, and since the conditional
  tempered softmax tends to the constant ``D`` as tau -> 0, its total
  derivative, and with it the mean, tends to 0.

  Cost and memory: the vector-Jacobian product is
  :math:`\\frac{1}{\\tau} s^k \\odot (g - \\langle g, s^k \\rangle)`, O(K n) per
  variable. The residuals saved for the backward pass are the key, the logits
  and the sample; the K conditional samples are regenerated from the key in
  the backward pass, at most ``MAX_CHUNK_ELEMENTS`` (2**20) of the
  ``K x logits.size`` elements at a time, scanned over chunks. The backward
  pass therefore holds O(min(K, c) * logits.size + logits.size) floats with
  ``c = max(1, 2**20 // logits.size)``: a few 4 MiB float32 buffers for any K
  (about 26 MiB in all for K = 1000 at logits (200, 60, 16), measured by
  ``scripts/bench_estimators.py``).

  Args:
    key: a PRNG key.
    logits: float array ``[..., n]`` (float32, bfloat16, float16 or float64;
      low precision is computed in float32); ``-inf`` marks impossible
      categories.
    tau: temperature > 0 of the surrogate softmax (may be traced).
    num_samples: K >= 1, the number of conditional Gumbel samples.

  Returns:
    An exact one-hot sample of the shape and dtype of ``logits``.
  """
  _check_logits(logits)
  _check_tau(tau)
  _check_num_samples(num_samples)
  return _gumbel_rao(key, logits, tau, num_samples)


# ---------------------------------------------------------------------------
# REINFORCE (score function) with a running-mean baseline.
# ---------------------------------------------------------------------------


def categorical_log_prob(logits: Array, sample: Array) -> Array:
  """log Categorical(sample; softmax(logits)), summed over the last axis.

  .. math:: \\log p_\\theta(D) = \\langle D, \\theta \\rangle -
    \\mathrm{logsumexp}(\\theta)

  Args:
    logits: float array ``[..., n]``; ``-inf`` marks impossible categories
      (they contribute nothing where the sample is 0, without NaN).
    sample: one-hot array of the shape of ``logits``.

  Returns:
    Array ``[...]`` of log-probabilities, in the compute dtype.
  """
  _check_logits(logits)
  _check_sample(logits, sample)
  log_probs = jax.nn.log_softmax(logits.astype(_compute_dtype(logits.dtype)), axis=-1)
  return jnp.sum(jnp.where(sample.astype(bool), log_probs, 0.0), axis=-1)


def reinforce(key: Array, logits: Array, *, tau=1.0) -> Array:
  """A one-hot sample that passes no gradient, for the score-function estimator.

  REINFORCE (Williams 1992) differentiates the surrogate
  :func:`score_function_surrogate` instead of the sample. ``tau`` is accepted
  for a uniform estimator signature and ignored.

  Returns:
    An exact one-hot sample of the shape and dtype of ``logits``.
  """
  del tau
  _check_logits(logits)
  return jax.lax.stop_gradient(_sample_one_hot(key, logits))


def score_function_surrogate(log_prob: Array, loss: Array, baseline) -> Array:
  """Surrogate whose gradient is the REINFORCE estimator with a baseline.

  .. math::
    \\nabla_\\theta \\left[\\mathrm{sg}(f(D) - b)\\, \\log p_\\theta(D)\\right]
      = (f(D) - b)\\, \\nabla_\\theta \\log p_\\theta(D).

  Add it to the loss (whose own gradient supplies the direct term
  :math:`\\partial f / \\partial \\theta`); its value is not a loss.

  Args:
    log_prob: ``[...]`` log-probabilities of the samples (e.g. from
      :func:`categorical_log_prob`, summed over independent variables).
    loss: ``[...]`` loss values f(D), broadcastable to ``log_prob``.
    baseline: scalar or broadcastable baseline b (no gradient flows into it).

  Returns:
    The surrogate, shape of ``log_prob``.
  """
  advantage = jax.lax.stop_gradient(loss - baseline)
  return advantage * log_prob


class BaselineState(NamedTuple):
  """State of :class:`RunningMeanBaseline`: the mean and the update count."""

  mean: Array
  count: Array


@dataclasses.dataclass(frozen=True)
class RunningMeanBaseline:
  """Exponential running mean of the loss, the REINFORCE baseline of the paper.

  .. math:: b_{t+1} = \\beta b_t + (1 - \\beta) \\bar f_t, \\qquad b_1 = \\bar f_0

  Pure functions, usable inside a jitted train step (the state is an array
  pytree to carry in the train state)::

    baseline = RunningMeanBaseline(decay=0.99)
    state = baseline.init()
    surrogate = score_function_surrogate(log_prob, loss, state.mean)
    state = baseline.update(state, loss)

  Attributes:
    decay: beta in [0, 1).
  """

  decay: float = 0.99

  def __post_init__(self):
    if not 0.0 <= self.decay < 1.0:
      raise ValueError(f"decay must lie in [0, 1); got decay={self.decay!r}.")

  def init(self) -> BaselineState:
    return BaselineState(mean=jnp.zeros((), jnp.float32), count=jnp.zeros((), jnp.int32))

  def update(self, state: BaselineState, loss: Array) -> BaselineState:
    """Folds the mean of ``loss`` (no gradient) into the running mean."""
    batch_mean = jnp.mean(jax.lax.stop_gradient(loss)).astype(jnp.float32)
    mean = jnp.where(
        state.count == 0,
        batch_mean,
        self.decay * state.mean + (1.0 - self.decay) * batch_mean,
    )
    return BaselineState(mean=mean, count=state.count + 1)


# ---------------------------------------------------------------------------
# Look-up by config name.
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Estimator:
  """An estimator chosen by name: call it as ``estimator(key, logits, tau=...)``.

  Attributes:
    name: the config name ("st", "st_gs", "gs", "gr_mc<K>", "reinforce").
    fn: the estimator function ``(key, logits, *, tau) -> sample``.
    relaxed: True for GS, whose sample is a point of the simplex.
    score_function: True for REINFORCE: add :func:`score_function_surrogate`.
  """

  name: str
  fn: Callable[..., Array]
  relaxed: bool = False
  score_function: bool = False

  def __call__(self, key: Array, logits: Array, *, tau=1.0) -> Array:
    return self.fn(key, logits, tau=tau)


VALID_NAMES = ("st", "st_gs", "gs", "gr_mc<K> (K >= 1, e.g. gr_mc100)", "reinforce")

_ESTIMATORS = {
    "st": Estimator("st", straight_through),
    "st_gs": Estimator("st_gs", st_gumbel_softmax),
    "gs": Estimator("gs", gumbel_softmax, relaxed=True),
    "reinforce": Estimator("reinforce", reinforce, score_function=True),
}


def get(name: str) -> Estimator:
  """The estimator for a config name.

  Args:
    name: "st", "st_gs", "gs", "reinforce", or "gr_mc<K>" with K >= 1 (for
      example "gr_mc100" is :func:`gumbel_rao` with ``num_samples=100``).

  Returns:
    An :class:`Estimator`.

  Raises:
    ValueError: for an unknown name, listing the valid ones.
  """
  if isinstance(name, str):
    if name in _ESTIMATORS:
      return _ESTIMATORS[name]
    match = re.fullmatch(r"gr_mc([1-9][0-9]*)", name)
    if match:
      num_samples = int(match.group(1))
      return Estimator(name, functools.partial(gumbel_rao, num_samples=num_samples))
  raise ValueError(
      f"unknown estimator {name!r}; valid names: {', '.join(VALID_NAMES)}."
  )
