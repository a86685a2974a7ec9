r"""Single-evaluation gradient estimators for categorical random variables.

Every estimator is a pure function of ``(key, logits, ...)``: the categories lie
on the last axis of ``logits``, any leading batch shape is allowed, and the
functions compose with ``jax.jit``, ``jax.vmap`` and ``jax.grad``. The
straight-through estimators (``straight_through``, ``st_gumbel_softmax``,
``gumbel_rao``) return an exact one-hot sample in the forward pass (every entry
is exactly 0 or 1) and replace only its backward pass, through
``jax.custom_vjp``.

Notation (Paulus, Maddison & Krause, "Rao-Blackwellizing the Straight-Through
Gumbel-Softmax Gradient Estimator", ICLR 2021): :math:`\theta` are the logits,
:math:`G` i.i.d. standard Gumbels, :math:`D = \mathrm{onehot}(\arg\max(\theta
+ G))` the sample, and :math:`\mathrm{softmax}_\tau(x) = \mathrm{softmax}(x /
\tau)`. For an upstream cotangent :math:`g = \partial f / \partial D` the
vector-Jacobian product of the tempered softmax at a point with value :math:`s`
is

.. math::
  g^\top \frac{d\, \mathrm{softmax}_\tau(x)}{d x} = \frac{1}{\tau}\,
  s \odot (g - \langle g, s \rangle),

which every estimator here uses: no :math:`n \times n` Jacobian is formed.

Conventions shared by every estimator:

* **Common random numbers.** With the same key, every one-hot estimator samples
  the same ``D = onehot(argmax(logits + G))``, with ``G`` drawn as
  ``jax.random.gumbel(key, logits.shape)`` (in float32 for low-precision
  logits); ``gumbel_softmax`` relaxes the same ``G``. Randomness that a
  backward pass needs is drawn from ``jax.random.fold_in(key, 1)``.
* **Temperature.** ``tau`` is a number > 0 or an array of them broadcastable to
  ``logits.shape[:-1] + (1,)`` (one temperature per variable); it may be
  traced (annealing). Concrete values are checked.
* **Masks.** ``-inf`` logits mark impossible categories: they are never sampled
  and receive exactly zero gradient.
* **Degenerate rows.** A row of logits that defines no distribution (a NaN
  entry, a ``+inf`` entry, or every entry ``-inf``) gives a sample row of NaN
  (all entries) and NaN gradients for that row, so that the problem shows in the
  loss rather than only in the gradients; other rows are unaffected.
* **Second derivatives.** The backward pass of ST and ST-GS is the derivative of
  their surrogate (the tempered softmax at :math:`\theta` or :math:`\theta +
  G`, with :math:`G` held fixed), and differentiating it again gives that
  surrogate's second derivative. Differentiating the backward pass of
  ``gumbel_rao`` raises a ``ValueError``: it regenerates its conditional samples
  inside a custom batching rule that JAX cannot differentiate, and
  differentiating through the conditional reparameterization would give the
  total-derivative estimator the paper's Appendix A rejects.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_batching import custom_vmap

Array = jax.Array

# Upper bound on the number of float32 elements (num_samples x logits.size,
# counting every vmapped batch) that `gumbel_rao` processes at once in its
# backward pass; larger K is scanned in chunks. 2**20 elements are 4 MiB per
# float32 temporary (fastest on CPU).
MAX_CHUNK_ELEMENTS = 2**20

# logZ - logits_j is split as head + tail with head <= _HEAD_LOG_RATIO; see
# `_gr_chunk_vjp`. Any value in about [45, 70] keeps float32 from overflowing
# and the tail formula free of cancellation.
_HEAD_LOG_RATIO = 60.0

# `jax.random.fold_in(key, _BACKWARD_STREAM)` seeds a backward pass's randomness.
_BACKWARD_STREAM = 1


# ---------------------------------------------------------------------------
# Argument checks (run at trace time, on static or concrete values only).
# ---------------------------------------------------------------------------


def _concrete(x) -> np.ndarray | None:
  """The value of ``x`` as a numpy array, or None when it is traced."""
  try:
    return np.asarray(x)
  except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
    return None


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


def _check_tau(tau: Any, logits: Array):
  """tau as a number or an array broadcastable to logits.shape[:-1] + (1,).

  Raises ValueError for a wrong shape, and for concrete values that are not
  finite and > 0. Returns tau unchanged (a Python number stays one).
  """
  variable_shape = logits.shape[:-1] + (1,)
  try:
    dtype = jnp.result_type(tau)
  except TypeError:
    dtype = None
  if isinstance(tau, bool) or dtype is None or not jnp.issubdtype(dtype, jnp.number):
    raise ValueError(f"tau must be a real number > 0 or an array of them; got {tau!r}.")
  shape = np.shape(tau)
  try:
    fits = np.broadcast_shapes(shape, variable_shape) == variable_shape
  except ValueError:
    fits = False
  if not fits:
    raise ValueError(
        "tau must be a scalar or an array broadcastable to logits.shape[:-1] + (1,)"
        f" = {variable_shape} (one temperature per variable); got shape {shape}."
    )
  value = _concrete(tau)
  if value is not None and not np.all(np.isfinite(value) & (value > 0)):
    bad = value.flat[np.argmin(np.isfinite(value.ravel()) & (value.ravel() > 0))]
    raise ValueError(f"tau must be finite and > 0; got tau={bad!r}.")
  return tau


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


def _check_one_hot(logits: Array, sample: Array) -> None:
  """sample must have logits' shape and, where concrete, one-hot (or all-NaN) rows."""
  if getattr(sample, "shape", None) != logits.shape:
    raise ValueError(
        "sample must be a one-hot array with the shape of logits"
        f" {logits.shape}; got shape {getattr(sample, 'shape', None)}."
    )
  value = _concrete(sample)
  if value is None:
    return
  value = value.astype(np.float64).reshape(-1, logits.shape[-1])
  nan_rows = np.isnan(value).all(-1)
  one_hot_rows = np.isin(value, (0.0, 1.0)).all(-1) & (value.sum(-1) == 1.0)
  bad = ~(one_hot_rows | nan_rows)
  if bad.any():
    row = int(np.argmax(bad))
    raise ValueError(
        "sample must be one-hot (entries 0 or 1, one 1 per row; a soft or relaxed"
        f" sample is not allowed); row {row} of the flattened sample is"
        f" {value[row].tolist()}."
    )


def _compute_dtype(dtype) -> jnp.dtype:
  """Low-precision logits are processed in float32; float64 stays float64."""
  return jnp.promote_types(dtype, jnp.float32)


def _typed_key(key: Array) -> Array:
  """A new-style typed key (raw uint32 keys are wrapped), for batching rules."""
  if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
    return key
  return jax.random.wrap_key_data(key)


# ---------------------------------------------------------------------------
# Shared pieces: the Gumbel-max sample, degenerate rows, the softmax VJP.
# ---------------------------------------------------------------------------


def _invalid_rows(logits: Array) -> Array:
  """``[..., 1]`` True where a row defines no distribution (NaN, +inf, all -inf)."""
  bad_entry = jnp.isnan(logits) | jnp.isposinf(logits)
  return (jnp.any(bad_entry, axis=-1) | jnp.all(jnp.isneginf(logits), axis=-1))[..., None]


def _perturbed_logits(key: Array, logits: Array) -> Array:
  """logits + G with G = jax.random.gumbel(key, logits.shape), in the compute dtype."""
  dtype = _compute_dtype(logits.dtype)
  return logits.astype(dtype) + jax.random.gumbel(key, logits.shape, dtype)


def _gumbel_max(key: Array, logits: Array) -> tuple[Array, Array]:
  """(logits + G, the one-hot argmax in logits' dtype, NaN rows where invalid)."""
  perturbed = _perturbed_logits(key, logits)
  sample = jax.nn.one_hot(jnp.argmax(perturbed, axis=-1), logits.shape[-1], dtype=logits.dtype)
  return perturbed, jnp.where(_invalid_rows(logits), jnp.nan, sample).astype(logits.dtype)


def _softmax_vjp(probs: Array, cotangent: Array, tau) -> Array:
  """g^T d softmax_tau(x)/dx for softmax_tau(x) = probs: probs*(g - <g,probs>)/tau."""
  inner = jnp.sum(cotangent * probs, axis=-1, keepdims=True)
  return probs * (cotangent - inner) / tau


def _finish_grad(logits: Array, grad: Array) -> Array:
  """Zero at -inf logits (also covering 0 * inf), NaN on invalid rows, logits' dtype."""
  grad = jnp.where(jnp.isneginf(logits), 0.0, grad)
  return jnp.where(_invalid_rows(logits), jnp.nan, grad).astype(logits.dtype)


def _as_compute(tau, logits: Array):
  """tau in the compute dtype of logits (a Python number stays one)."""
  if isinstance(tau, (int, float)):
    return tau
  return jnp.asarray(tau, _compute_dtype(logits.dtype))


# ---------------------------------------------------------------------------
# Straight-through (ST): gradient through softmax(logits / tau).
# ---------------------------------------------------------------------------


@jax.custom_vjp
def _straight_through(key, logits, tau):
  return _gumbel_max(key, logits)[1]


def _straight_through_fwd(key, logits, tau):
  return _gumbel_max(key, logits)[1], (logits, tau)


def _straight_through_bwd(residuals, cotangent):
  logits, tau = residuals
  dtype = _compute_dtype(logits.dtype)
  probs = jax.nn.softmax(logits.astype(dtype) / tau, axis=-1)
  grad = _softmax_vjp(probs, cotangent.astype(dtype), tau)
  return None, _finish_grad(logits, grad), None


_straight_through.defvjp(_straight_through_fwd, _straight_through_bwd)


def straight_through(key: Array, logits: Array, *, tau=1.0) -> Array:
  r"""Slope-annealed straight-through estimator (ST).

  .. math::
    D \sim \mathrm{Categorical}(\mathrm{softmax}(\theta)), \qquad
    \nabla_{\mathrm{ST}} = \frac{\partial f(D)}{\partial D}
      \frac{d\, \mathrm{softmax}_\tau(\theta)}{d \theta}.

  Args:
    key: a PRNG key.
    logits: float array ``[..., n]`` of unnormalized log-probabilities; ``-inf``
      marks impossible categories.
    tau: temperature > 0 of the surrogate softmax, a number or an array
      broadcastable to ``logits.shape[:-1] + (1,)`` (may be traced).

  Returns:
    An exact one-hot sample ``D`` of shape and dtype of ``logits``.

  Reference: Bengio et al. 2013; Paulus et al. 2021, section 2.
  """
  _check_logits(logits)
  tau = _check_tau(tau, logits)
  return _straight_through(key, logits, _as_compute(tau, logits))


# ---------------------------------------------------------------------------
# Gumbel-Softmax (GS) and straight-through Gumbel-Softmax (ST-GS).
# ---------------------------------------------------------------------------


def gumbel_softmax(key: Array, logits: Array, *, tau=1.0) -> Array:
  r"""Gumbel-Softmax / Concrete relaxation (GS), with its ordinary gradient.

  .. math::
    S_\tau = \mathrm{softmax}_\tau(\theta + G), \qquad
    \nabla_{\mathrm{GS}} = \frac{\partial f(S_\tau)}{\partial S_\tau}
      \frac{d\, \mathrm{softmax}_\tau(\theta + G)}{d\theta}.

  The forward value is the *relaxed* sample (a point inside the simplex, not a
  one-hot vector): the loss must be defined on the simplex.

  Args:
    key: a PRNG key.
    logits: float array ``[..., n]``; ``-inf`` marks impossible categories.
    tau: temperature > 0, a number or an array broadcastable to
      ``logits.shape[:-1] + (1,)`` (may be traced).

  Returns:
    ``S_tau`` with the shape and dtype of ``logits``.

  Reference: Jang et al. 2017; Maddison et al. 2017.
  """
  _check_logits(logits)
  tau = _as_compute(_check_tau(tau, logits), logits)
  relaxed = jax.nn.softmax(_perturbed_logits(key, logits) / tau, axis=-1)
  return jnp.where(_invalid_rows(logits), jnp.nan, relaxed).astype(logits.dtype)


@jax.custom_vjp
def _st_gumbel_softmax(key, logits, tau):
  return _gumbel_max(key, logits)[1]


def _st_gumbel_softmax_fwd(key, logits, tau):
  perturbed, sample = _gumbel_max(key, logits)
  relaxed = jax.nn.softmax(perturbed / tau, axis=-1)
  return sample, (logits, relaxed, tau)


def _st_gumbel_softmax_bwd(residuals, cotangent):
  logits, relaxed, tau = residuals
  grad = _softmax_vjp(relaxed, cotangent.astype(relaxed.dtype), tau)
  return None, _finish_grad(logits, grad), None


_st_gumbel_softmax.defvjp(_st_gumbel_softmax_fwd, _st_gumbel_softmax_bwd)


def st_gumbel_softmax(key: Array, logits: Array, *, tau=1.0) -> Array:
  r"""Straight-through Gumbel-Softmax estimator (ST-GS).

  .. math::
    D = \mathrm{onehot}(\arg\max_i(\theta_i + G_i)), \qquad
    \nabla_{\mathrm{STGS}} = \frac{\partial f(D)}{\partial D}
      \frac{d\, \mathrm{softmax}_\tau(\theta + G)}{d\theta}

  with the same Gumbels :math:`G` in both. The forward value is the exact
  one-hot ``D``.

  Args:
    key: a PRNG key. With the same key, ``gumbel_softmax`` returns the relaxed
      sample ``S_tau`` at the same ``G``, and ``D = onehot(argmax(S_tau))``.
    logits: float array ``[..., n]``; ``-inf`` marks impossible categories.
    tau: temperature > 0, a number or an array broadcastable to
      ``logits.shape[:-1] + (1,)`` (may be traced).

  Returns:
    An exact one-hot sample of the shape and dtype of ``logits``.

  Reference: Jang et al. 2017; Paulus et al. 2021, eq. (5).
  """
  _check_logits(logits)
  tau = _check_tau(tau, logits)
  return _st_gumbel_softmax(key, logits, _as_compute(tau, logits))


# ---------------------------------------------------------------------------
# Gumbel-Rao (GR-MCK).
# ---------------------------------------------------------------------------


def _uniform_open(key: Array, shape, dtype) -> Array:
  """U ~ Uniform(0, 1) with U > 0, so that -log(U) is finite and > 0."""
  return jax.random.uniform(key, shape, dtype, minval=jnp.finfo(dtype).tiny)


def conditional_gumbel(
    key: Array, logits: Array, sample: Array, num_samples: int
) -> Array:
  r"""K samples of ``logits + G`` conditioned on ``argmax(logits + G) = sample``.

  With :math:`i` the index of the one-hot ``sample``,
  :math:`\log Z = \mathrm{logsumexp}(\theta)` and :math:`E_j \sim
  \mathrm{Exp}(1)` i.i.d. (Maddison et al. 2014; Paulus et al. 2021, eq. 8):

  .. math::
    (\theta + G)_j \mid D \overset{d}{=} \begin{cases}
      \log Z - \log E_i & j = i, \\
      -\log\left(E_j e^{-\theta_j} + E_i e^{-\log Z}\right) & j \ne i,
    \end{cases}

  computed in log space (``logaddexp``), so it is finite for logits of any
  scale; ``-inf`` logits give ``-inf``.

  Args:
    key: a PRNG key.
    logits: float array ``[..., n]``.
    sample: one-hot array of the shape of ``logits`` (the conditioning value).
      Concrete values are checked to be one-hot; under ``jit`` they cannot be,
      and a sample that is not one-hot gives meaningless values.
    num_samples: K, a Python int >= 1.

  Returns:
    Array ``[K, ..., n]`` in the compute dtype of ``logits`` (float32 for
    low-precision logits) whose argmax over the last axis equals ``sample``.
  """
  _check_logits(logits)
  _check_one_hot(logits, sample)
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


def _gr_chunk_vjp(chunk_size, key, head, tail, is_top, is_masked, cotangent, tau):
  r"""Sum over `chunk_size` conditional samples of s * (g - <g, s>), one batch row.

  Under the conditioning argmax = i, with E ~ Exp(1) i.i.d. and
  :math:`r_j = (E_j / E_i) e^{\log Z - \theta_j}`,

  .. math::
    \mathrm{softmax}_\tau(\theta + G)_j \propto (1 + r_j)^{-1/\tau} \;(j \ne i),
    \qquad 1 \;(j = i),

  which follows from `conditional_gumbel` by subtracting the top coordinate.
  With :math:`\log Z - \theta_j = a_j + b_j`, :math:`a_j = \min(\log Z -
  \theta_j, 60)`, the logarithm is computed exactly for every tau and logit
  scale, without overflow, as

  .. math::
    \log(1 + r_j) = b_j + \mathrm{log1p}\!\left(E_j \tfrac{e^{a_j}}{E_i}
      + \mathrm{expm1}(-b_j)\right):

  b_j = 0 (the usual case) is the plain log1p(r_j), and b_j > 0 only where
  :math:`E_j e^{a_j} / E_i > e^{60 - 21}` dwarfs the offset in (-1, 0]. Three
  transcendental operations per element (a log for E_j, log1p and exp) and no
  log-sum-exp over K. Masked categories are set to exactly zero.

  Args:
    chunk_size: number of conditional samples in the chunk.
    key: PRNG key of this chunk.
    head: ``[V, n]`` exp(a), the capped part of exp(logZ - logits).
    tail: ``[V, n]`` b >= 0, the rest of logZ - logits.
    is_top, is_masked: ``[V, n]`` booleans (the sample; ``-inf`` logits).
    cotangent: ``[V, n]`` upstream cotangent g.
    tau: ``[V, 1]`` temperatures.

  Returns:
    ``[V, n]`` sum over the chunk of ``s_k * (g - <g, s_k>)``.
  """
  others_key, top_key = jax.random.split(key)
  dtype = head.dtype
  num_vars = head.shape[0]
  exps = -jnp.log(_uniform_open(others_key, (chunk_size, *head.shape), dtype))
  exp_top = -jnp.log(_uniform_open(top_key, (chunk_size, num_vars, 1), dtype))
  log1p_ratio = tail + jnp.log1p(exps * (head / exp_top) + jnp.expm1(-tail))
  unnormalized = jnp.exp(-log1p_ratio / tau)
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


def _gr_batched_grad(num_samples, keys, logits, sample, cotangent, tau):
  """GR-MCK gradients of a batch: keys ``[B]``, logits ``[B, V, n]``, tau ``[B, V, 1]``.

  Chunks of K are sized from the whole batch (B * V * n elements a sample), so
  that the memory bound holds however the caller batched the estimator.
  """
  log_ratio = jax.nn.logsumexp(logits, axis=-1, keepdims=True) - logits  # >= 0
  head_log_ratio = jnp.minimum(log_ratio, _HEAD_LOG_RATIO)

  def chunk_vjp(keys, size, *rows):
    return jax.vmap(functools.partial(_gr_chunk_vjp, size))(keys, *rows)

  rows = (
      jnp.exp(head_log_ratio),
      log_ratio - head_log_ratio,
      sample.astype(bool),
      jnp.isneginf(logits),
      cotangent,
      tau,
  )
  fold_in = jax.vmap(jax.random.fold_in, in_axes=(0, None))
  chunk_size = max(1, min(num_samples, MAX_CHUNK_ELEMENTS // max(1, logits.size)))
  num_full_chunks, last = divmod(num_samples, chunk_size)
  if num_full_chunks == 1 and last == 0:
    total = chunk_vjp(keys, chunk_size, *rows)
  else:

    def body(total, index):
      return total + chunk_vjp(fold_in(keys, index), chunk_size, *rows), None

    total, _ = jax.lax.scan(body, jnp.zeros_like(logits), jnp.arange(num_full_chunks))
    if last:
      total = total + chunk_vjp(fold_in(keys, num_full_chunks), last, *rows)
  return total / (num_samples * tau)


def _no_second_derivative(primals, tangents):
  raise ValueError(
      "gumbel_rao defines first derivatives only: its backward pass cannot be"
      " differentiated (jax.grad of jax.grad, jax.hessian, jax.jacfwd of a"
      " gradient). Use st_gumbel_softmax, whose second derivative is that of"
      " softmax_tau(logits + G) at fixed G, or stop_gradient the GR gradient."
  )


@functools.lru_cache(maxsize=None)
def _gr_grad_fn(num_samples: int):
  """The batched GR gradient for K = num_samples, with its vmap and JVP rules."""

  @custom_vmap
  def grad_fn(keys, logits, sample, cotangent, tau):
    return _gr_batched_grad(num_samples, keys, logits, sample, cotangent, tau)

  @grad_fn.def_vmap
  def _merge_batch_axes(axis_size, in_batched, *args):
    # Fold the vmapped axis into the batch axis, so that chunks see every row.
    args = [
        a if batched else jnp.broadcast_to(a, (axis_size, *a.shape))
        for a, batched in zip(args, in_batched)
    ]
    merged = grad_fn(*(a.reshape(-1, *a.shape[2:]) for a in args))
    return merged.reshape(axis_size, -1, *merged.shape[1:]), True

  guarded = jax.custom_jvp(grad_fn)
  guarded.defjvp(_no_second_derivative)
  return guarded


@functools.partial(jax.custom_vjp, nondiff_argnums=(3,))
def _gumbel_rao(key, logits, tau, num_samples):
  return _gumbel_max(key, logits)[1]


def _gumbel_rao_fwd(key, logits, tau, num_samples):
  sample = _gumbel_max(key, logits)[1]
  return sample, (key, logits, sample, tau)


def _gumbel_rao_bwd(num_samples, residuals, cotangent):
  key, logits, sample, tau = residuals
  dtype = _compute_dtype(logits.dtype)
  num_categories = logits.shape[-1]
  as_rows = lambda x: x.astype(dtype).reshape(1, -1, num_categories)
  row_tau = jnp.broadcast_to(jnp.asarray(tau, dtype), logits.shape[:-1] + (1,)).reshape(1, -1, 1)
  backward_key = jax.random.fold_in(_typed_key(key), _BACKWARD_STREAM)
  grad = _gr_grad_fn(num_samples)(
      backward_key[None], as_rows(logits), as_rows(sample), as_rows(cotangent), row_tau
  )
  return None, _finish_grad(logits, grad.reshape(logits.shape)), None


_gumbel_rao.defvjp(_gumbel_rao_fwd, _gumbel_rao_bwd)


def gumbel_rao(key: Array, logits: Array, *, tau=1.0, num_samples: int = 10) -> Array:
  r"""Gumbel-Rao Monte Carlo estimator (GR-MCK), Paulus et al. 2021.

  Forward: an exact one-hot sample :math:`D \sim
  \mathrm{Categorical}(\mathrm{softmax}(\theta))` (the same ``D`` as
  ``st_gumbel_softmax`` with the same key). Backward: the upstream cotangent
  times the Monte Carlo average of the tempered-softmax Jacobian at K
  conditional Gumbel samples:

  .. math::
    \nabla_{\mathrm{GRMC}K} = \frac{\partial f(D)}{\partial D}\,
      \frac{1}{K} \sum_{k=1}^{K} J_\tau(\theta + G^k), \qquad
    J_\tau(x) = \frac{d\, \mathrm{softmax}_\tau(x)}{dx},
    \quad \theta + G^k \overset{iid}{\sim} \theta + G \mid D.

  The :math:`G^k` are held fixed: the Jacobian is evaluated at the conditional
  samples and no derivative is taken through the conditional sampling path.
  This is the paper's Appendix A pseudo-code and the estimator that its
  Propositions 1-3 are about: since :math:`E[J_\tau(\theta + G) \mid D]` is
  estimated without bias, :math:`E[\nabla_{\mathrm{GRMC}K} \mid D] =
  E[\nabla_{\mathrm{STGS}} \mid D]`, and for K = 1 the estimator has exactly
  the distribution of ST-GS. The sentence of the paper's section 3.2 that takes
  the *total* derivative through :math:`G^k` (which depends on
  :math:`\theta` through the reparameterization of eq. 8) describes a
  different estimator: its mean is not ST-GS's, and since the conditional
  tempered softmax tends to the constant ``D`` as tau -> 0, its total
  derivative, and with it the mean, tends to 0. For the same reason the
  backward pass is not differentiable: second derivatives raise ValueError.

  The backward pass is exact for every tau and logit scale (see
  ``_gr_chunk_vjp``): no ratio of probabilities is capped.

  Cost and memory: the vector-Jacobian product is
  :math:`\frac{1}{\tau} s^k \odot (g - \langle g, s^k \rangle)`, O(K n) per
  variable. The residuals saved for the backward pass are the key, the logits
  and the sample; the K conditional samples are regenerated from
  ``fold_in(key, 1)`` in the backward pass, at most ``MAX_CHUNK_ELEMENTS``
  (2**20) of the ``K x logits.size`` elements at a time, scanned over chunks.
  The chunks are sized for the whole batch also under ``jax.vmap`` (a custom
  batching rule folds the vmapped axes into the rows), so the backward pass
  holds O(min(K, c) * size + size) floats with ``c = max(1, 2**20 // size)``
  and ``size`` the number of logits in the whole (vmapped) batch: a few 4 MiB
  float32 buffers for any K (about 26 MiB in all for K = 1000 at logits
  (200, 60, 16), measured by ``scripts/bench_estimators.py``).

  The backward pass is written with an explicit K axis (one chunk of samples
  as an array) and two contractions over it, rather than as ``jax.vmap`` over
  K of a per-sample VJP: it computes ``sum_k s_k`` and ``sum_k s_k <g, s_k>``
  and forms ``g * sum_k s_k - sum_k s_k <g, s_k>`` once per variable instead
  of once per sample. The tests keep the ``vmap`` form as the reference
  (``tests/test_estimators.py``), and ``scripts/bench_estimators.py`` times
  both.

  Args:
    key: a PRNG key.
    logits: float array ``[..., n]`` (float32, bfloat16, float16 or float64;
      low precision is computed in float32); ``-inf`` marks impossible
      categories.
    tau: temperature > 0 of the surrogate softmax, a number or an array
      broadcastable to ``logits.shape[:-1] + (1,)`` (may be traced).
    num_samples: K >= 1, the number of conditional Gumbel samples.

  Returns:
    An exact one-hot sample of the shape and dtype of ``logits``.
  """
  _check_logits(logits)
  tau = _check_tau(tau, logits)
  _check_num_samples(num_samples)
  return _gumbel_rao(key, logits, _as_compute(tau, logits), num_samples)


# ---------------------------------------------------------------------------
# REINFORCE (score function) with a running-mean baseline.
# ---------------------------------------------------------------------------


def categorical_log_prob(logits: Array, sample: Array) -> Array:
  r"""log Categorical(sample; softmax(logits)), summed over the last axis.

  .. math:: \log p_\theta(D) = \langle D, \theta \rangle -
    \mathrm{logsumexp}(\theta)

  Args:
    logits: float array ``[..., n]``; ``-inf`` marks impossible categories
      (they contribute nothing where the sample is 0, without NaN).
    sample: one-hot array of the shape of ``logits``. Concrete values are
      checked to be one-hot (or all-NaN rows, the sample of a degenerate row);
      under ``jit`` they cannot be, and a soft sample gives a meaningless sum.

  Returns:
    Array ``[...]`` of log-probabilities, in the compute dtype.
  """
  _check_logits(logits)
  _check_one_hot(logits, sample)
  log_probs = jax.nn.log_softmax(logits.astype(_compute_dtype(logits.dtype)), axis=-1)
  return jnp.sum(jnp.where(sample.astype(bool), log_probs, 0.0), axis=-1)


def reinforce(key: Array, logits: Array, *, tau=1.0) -> Array:
  r"""A one-hot sample that passes no gradient, for the score-function estimator.

  REINFORCE (Williams 1992) differentiates the surrogate
  :func:`score_function_surrogate` instead of the sample. ``tau`` is accepted
  for a uniform estimator signature (and checked) but not used.

  Returns:
    An exact one-hot sample of the shape and dtype of ``logits``.
  """
  _check_logits(logits)
  _check_tau(tau, logits)  # unused, but checked like every estimator's
  return jax.lax.stop_gradient(_gumbel_max(key, logits)[1])


def score_function_surrogate(log_prob: Array, loss: Array, baseline) -> Array:
  r"""Surrogate whose gradient is the REINFORCE estimator with a baseline.

  .. math::
    \nabla_\theta \left[\mathrm{sg}(f(D) - b)\, \log p_\theta(D)\right]
      = (f(D) - b)\, \nabla_\theta \log p_\theta(D).

  Add it to the loss (whose own gradient supplies the direct term
  :math:`\partial f / \partial \theta`); its value is not a loss.

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
  r"""Exponential running mean of the loss, the REINFORCE baseline of the paper.

  .. math:: b_{t+1} = \beta b_t + (1 - \beta) \bar f_t, \qquad b_1 = \bar f_0

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

  Equal names give equal, hashable estimators, so an ``Estimator`` can be a
  static argument of ``jax.jit`` without retracing.

  Attributes:
    name: the config name ("st", "st_gs", "gs", "gr_mc<K>", "reinforce").
    fn: the estimator function ``(key, logits, *, tau, **options) -> sample``.
    options: the keyword arguments fixed by the name, as sorted (key, value)
      pairs (e.g. ``(("num_samples", 100),)`` for "gr_mc100").
    relaxed: True for GS, whose sample is a point of the simplex.
    score_function: True for REINFORCE: add :func:`score_function_surrogate`.
  """

  name: str
  fn: Callable[..., Array]
  options: tuple[tuple[str, Any], ...] = ()
  relaxed: bool = False
  score_function: bool = False

  @property
  def one_hot(self) -> bool:
    """True when the forward value is an exact one-hot sample."""
    return not self.relaxed

  def __call__(self, key: Array, logits: Array, *, tau=1.0) -> Array:
    return self.fn(key, logits, tau=tau, **dict(self.options))


VALID_NAMES = ("st", "st_gs", "gs", "gr_mc<K> (K >= 1, e.g. gr_mc100)", "reinforce")

_ESTIMATORS = {
    "st": Estimator("st", straight_through),
    "st_gs": Estimator("st_gs", st_gumbel_softmax),
    "gs": Estimator("gs", gumbel_softmax, relaxed=True),
    "reinforce": Estimator("reinforce", reinforce, score_function=True),
}

# Names with a sample count: the pattern, the function and its keyword.
_COUNTED_ESTIMATORS = ((re.compile(r"gr_mc([1-9][0-9]*)"), gumbel_rao, "num_samples"),)


def get(name: str) -> Estimator:
  """The estimator for a config name.

  Args:
    name: "st", "st_gs", "gs", "reinforce", or "gr_mc<K>" with K >= 1 (for
      example "gr_mc100" is :func:`gumbel_rao` with ``num_samples=100``).

  Returns:
    An :class:`Estimator`; equal names give equal estimators.

  Raises:
    ValueError: for an unknown name, listing the valid ones.
  """
  if isinstance(name, str):
    if name in _ESTIMATORS:
      return _ESTIMATORS[name]
    for pattern, fn, keyword in _COUNTED_ESTIMATORS:
      match = pattern.fullmatch(name)
      if match:
        return Estimator(name, fn, options=((keyword, int(match.group(1))),))
  raise ValueError(
      f"unknown estimator {name!r}; valid names: {', '.join(VALID_NAMES)}."
  )
