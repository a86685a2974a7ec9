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

# Upper bound, per backend, on the number of elements (num_samples x
# logits.size, counting every vmapped batch) that the Gumbel-Rao backward passes
# process at once; larger K is scanned in chunks. 2**20 elements (4 MiB per
# float32 temporary) are fastest on CPU; an accelerator wants larger chunks:
# GR-MC1000 forward+backward on an H200 (scripts/bench_estimators.py
# --chunk_sweep) took 0.65 / 0.40 / 0.40 / 0.39 ms at logits (20, 60, 16) and
# 5.18 / 3.61 / 2.76 / 2.57 ms at (200, 60, 16) with 2**20 / 2**22 / 2**24 /
# 2**26 elements (256 MiB per float32 temporary at 2**26).
CHUNK_ELEMENTS = {"cpu": 2**20, "default": 2**26}

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
  finite and > 0. Returns tau in the compute dtype of logits (a Python number
  stays one).
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
  if isinstance(tau, (int, float)):
    return tau
  return jnp.asarray(tau, _compute_dtype(logits.dtype))


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
  # The first maximal index, as jnp.argmax, from a max and a min: on CPU, XLA
  # fuses the random number generation into argmax's variadic reduction and
  # runs it 2.4x slower than these two reductions (scripts/bench_estimators.py).
  categories = jnp.arange(logits.shape[-1])
  is_max = perturbed == jnp.max(perturbed, axis=-1, keepdims=True)
  first = jnp.min(jnp.where(is_max, categories, logits.shape[-1]), axis=-1, keepdims=True)
  sample = (categories == first).astype(logits.dtype)
  return perturbed, jnp.where(_invalid_rows(logits), jnp.nan, sample).astype(logits.dtype)


def _softmax_vjp(probs: Array, cotangent: Array, tau) -> Array:
  """g^T d softmax_tau(x)/dx for softmax_tau(x) = probs: probs*(g - <g,probs>)/tau."""
  inner = jnp.sum(cotangent * probs, axis=-1, keepdims=True)
  return probs * (cotangent - inner) / tau


def _finish_grad(logits: Array, grad: Array) -> Array:
  """Zero at -inf logits (also covering 0 * inf), NaN on invalid rows, logits' dtype."""
  grad = jnp.where(jnp.isneginf(logits), 0.0, grad)
  return jnp.where(_invalid_rows(logits), jnp.nan, grad).astype(logits.dtype)


# ---------------------------------------------------------------------------
# Straight-through (ST): gradient through softmax(logits / tau).
# ---------------------------------------------------------------------------


def _one_hot_estimator(backward):
  """A custom_vjp estimator: the Gumbel-max sample forward, ``backward`` behind it.

  ``backward(key, logits, sample, cotangent, tau, *options)`` gets the
  estimator's key, the logits, sample and cotangent in the compute dtype and
  the static ``options`` tuple, and returns the gradient with respect to the
  logits; masks and degenerate rows are handled here.
  """

  @functools.partial(jax.custom_vjp, nondiff_argnums=(3,))
  def estimator(key, logits, tau, options):
    return _gumbel_max(key, logits)[1]

  def forward(key, logits, tau, options):
    sample = _gumbel_max(key, logits)[1]
    return sample, (key, logits, sample, tau)

  def backward_rule(options, residuals, cotangent):
    key, logits, sample, tau = residuals
    dtype = _compute_dtype(logits.dtype)
    grad = backward(
        key, logits.astype(dtype), sample.astype(dtype), cotangent.astype(dtype), tau, *options
    )
    return None, _finish_grad(logits, grad), None

  estimator.defvjp(forward, backward_rule)
  return estimator


def _straight_through_backward(key, logits, sample, cotangent, tau):
  del key, sample
  return _softmax_vjp(jax.nn.softmax(logits / tau, axis=-1), cotangent, tau)


_straight_through = _one_hot_estimator(_straight_through_backward)


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
  return _straight_through(key, logits, tau, ())


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
  tau = _check_tau(tau, logits)
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


def _gr_chunk_vjp(exps, exp_top, head, tail, is_top, is_masked, cotangent, tau):
  r"""Sum over a chunk of conditional samples of s * (g - <g, s>), one batch row.

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
  :math:`E_j e^{a_j} / E_i > e^{60 - 21}` dwarfs the offset in (-1, 0]. Two
  transcendental operations per element here (log1p and exp) and no
  log-sum-exp over K. Masked categories are set to exactly zero.

  Args:
    exps: ``[c, V, n]`` the exponentials E_j of the chunk's c samples.
    exp_top: ``[c, V, 1]`` the exponential E_i of the sampled category.
    head: ``[V, n]`` exp(a), the capped part of exp(logZ - logits).
    tail: ``[V, n]`` b >= 0, the rest of logZ - logits.
    is_top, is_masked: ``[V, n]`` booleans (the sample; ``-inf`` logits).
    cotangent: ``[V, n]`` upstream cotangent g.
    tau: ``[V, 1]`` temperatures.

  Returns:
    ``[V, n]`` sum over the chunk of ``s_k * (g - <g, s_k>)``.
  """
  log1p_ratio = tail + jnp.log1p(exps * (head / exp_top) + jnp.expm1(-tail))
  unnormalized = jnp.exp(-log1p_ratio / tau)
  unnormalized = jnp.where(is_top, 1.0, jnp.where(is_masked, 0.0, unnormalized))
  # Materialize once: otherwise XLA fuses (and so recomputes) the random
  # number generation into each of the reductions below.
  unnormalized = jax.lax.optimization_barrier(unnormalized)
  inv_norm = 1.0 / jnp.sum(unnormalized, axis=-1)  # [c, V]
  inner = jnp.einsum("cvn,vn->cv", unnormalized, cotangent) * inv_norm  # <g, s_k>
  # sum_k s_k * (g - <g, s_k>) with s_k = u_k / z_k, as one contraction over k
  # with two weights: 1 / z_k and <g, s_k> / z_k.
  weights = jnp.stack([inv_norm, inner * inv_norm], axis=-1)  # [c, V, 2]
  weight_sum, weighted_inner = jnp.einsum("cvn,cvw->wvn", unnormalized, weights)
  return cotangent * weight_sum - weighted_inner


def _monte_carlo_exponentials(dtype, key, start, size, is_top):
  """Independent Exp(1) draws for samples [start, start + size) of one batch row."""
  others_key, top_key = jax.random.split(jax.random.fold_in(key, start))
  exps = -jnp.log(_uniform_open(others_key, (size, *is_top.shape), dtype))
  exp_top = -jnp.log(_uniform_open(top_key, (size, is_top.shape[0], 1), dtype))
  return exps, exp_top


@functools.lru_cache(maxsize=None)
def lattice_points(num_points: int, dim: int) -> np.ndarray:
  r"""The unshifted rank-1 lattice :math:`\{k z / K \bmod 1\}_{k < K}` in ``[0, 1)^dim``.

  Korobov's generating vector :math:`z = (1, a, a^2, \dots) \bmod K`, with
  ``a`` chosen (among at most 256 candidates coprime to K) to minimise the
  :math:`P_2` criterion :math:`-1 + \frac1K \sum_k \prod_j (1 + 2\pi^2
  B_2(\{k z_j / K\}))`, :math:`B_2(x) = x^2 - x + 1/6` (Sloan & Joe 1994).

  Returns:
    float64 array ``[num_points, dim]``.
  """
  k = np.arange(num_points)[:, None]
  if num_points < 3:
    return (k * np.ones((1, dim), np.int64) % num_points) / num_points
  coprime = [a for a in range(1, num_points) if math.gcd(a, num_points) == 1]
  candidates = coprime[:: max(1, len(coprime) // 256)]

  def criterion(a):
    z = np.array([pow(a, j, num_points) for j in range(dim)], np.int64)
    x = (k * z % num_points) / num_points
    return np.mean(np.prod(1.0 + 2.0 * np.pi**2 * (x * x - x + 1.0 / 6.0), axis=1)) - 1.0

  best = min(candidates, key=criterion)
  z = np.array([pow(best, j, num_points) for j in range(dim)], np.int64)
  return (k * z % num_points) / num_points


def _lattice_exponentials(lattice, tent, shift, start, size, is_top):
  """Exp(1) marginals from the shifted lattice points [start, start + size) of one row."""
  rows = jax.lax.dynamic_slice_in_dim(lattice, start, size)  # [c, n]
  u = rows[:, None, :] + shift[None]
  u = u - jnp.floor(u)  # [c, V, n], each marginally U[0, 1)
  if tent:
    u = 1.0 - jnp.abs(2.0 * u - 1.0)  # baker's transform: still uniform
  dtype = u.dtype
  u = jnp.clip(u, jnp.finfo(dtype).tiny, 1.0 - jnp.finfo(dtype).epsneg)
  exps = -jnp.log(u)
  exp_top = jnp.sum(jnp.where(is_top, exps, 0.0), axis=-1, keepdims=True)
  return exps, exp_top


def max_chunk_elements() -> int:
  """Elements of one backward-pass chunk on the default backend (see CHUNK_ELEMENTS)."""
  return CHUNK_ELEMENTS.get(jax.default_backend(), CHUNK_ELEMENTS["default"])


def _gr_batched_grad(num_samples, sampler, chunk_elements, keys, logits, sample, cotangent, tau):
  """Gumbel-Rao gradients of a batch: keys ``[B]``, logits ``[B, V, n]``, tau ``[B, V, 1]``.

  Chunks of K are sized from the whole batch (B * V * n elements a sample), so
  that the memory bound holds however the caller batched the estimator.
  ``sampler`` is "mc" (i.i.d. exponentials) or "qmc" / "qmc_tent" (a randomly
  shifted rank-1 lattice, one uniform shift per variable and category).
  """
  num_categories = logits.shape[-1]
  log_ratio = jax.nn.logsumexp(logits, axis=-1, keepdims=True) - logits  # >= 0
  head_log_ratio = jnp.minimum(log_ratio, _HEAD_LOG_RATIO)
  is_top = sample.astype(bool)
  rows = (
      jnp.exp(head_log_ratio),
      log_ratio - head_log_ratio,
      is_top,
      jnp.isneginf(logits),
      cotangent,
      tau,
  )
  if sampler == "mc":
    noise_state, noise = keys, functools.partial(_monte_carlo_exponentials, logits.dtype)
  else:
    lattice = jnp.asarray(lattice_points(num_samples, num_categories), logits.dtype)
    noise = functools.partial(_lattice_exponentials, lattice, sampler == "qmc_tent")
    noise_state = jax.vmap(lambda k: jax.random.uniform(k, logits.shape[1:], logits.dtype))(keys)

  def chunk_vjp(start, size):
    def one_row(state, head, tail, top, masked, cot, row_tau):
      exps, exp_top = noise(state, start, size, top)
      return _gr_chunk_vjp(exps, exp_top, head, tail, top, masked, cot, row_tau)

    return jax.vmap(one_row)(noise_state, *rows)

  chunk_size = max(1, min(num_samples, chunk_elements // max(1, logits.size)))
  num_full_chunks, last = divmod(num_samples, chunk_size)
  if num_full_chunks == 1 and last == 0:
    total = chunk_vjp(0, chunk_size)
  else:

    def body(total, index):
      return total + chunk_vjp(index * chunk_size, chunk_size), None

    total, _ = jax.lax.scan(body, jnp.zeros_like(logits), jnp.arange(num_full_chunks))
    if last:
      total = total + chunk_vjp(num_full_chunks * chunk_size, last)
  return total / (num_samples * tau)


def _no_second_derivative(primals, tangents):
  raise ValueError(
      "gumbel_rao defines first derivatives only: its backward pass cannot be"
      " differentiated (jax.grad of jax.grad, jax.hessian, jax.jacfwd of a"
      " gradient). Use st_gumbel_softmax, whose second derivative is that of"
      " softmax_tau(logits + G) at fixed G, or stop_gradient the GR gradient."
  )


@functools.lru_cache(maxsize=None)
def _gr_grad_fn(num_samples: int, sampler: str, chunk_elements: int):
  """The batched GR gradient for K = num_samples, with its vmap and JVP rules."""

  @custom_vmap
  def grad_fn(keys, logits, sample, cotangent, tau):
    return _gr_batched_grad(num_samples, sampler, chunk_elements, keys, logits, sample, cotangent, tau)

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


def _gumbel_rao_backward(key, logits, sample, cotangent, tau, num_samples, sampler):
  num_categories = logits.shape[-1]
  as_rows = lambda x: x.reshape(1, -1, num_categories)
  row_tau = jnp.broadcast_to(jnp.asarray(tau, logits.dtype), logits.shape[:-1] + (1,)).reshape(1, -1, 1)
  backward_key = jax.random.fold_in(_typed_key(key), _BACKWARD_STREAM)
  grad = _gr_grad_fn(num_samples, sampler, max_chunk_elements())(
      backward_key[None], as_rows(logits), as_rows(sample), as_rows(cotangent), row_tau
  )
  return grad.reshape(logits.shape)


_gumbel_rao = _one_hot_estimator(_gumbel_rao_backward)


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
  ``fold_in(key, 1)`` in the backward pass, at most ``max_chunk_elements()``
  of the ``K x logits.size`` elements at a time (``CHUNK_ELEMENTS``: 2**20 on
  CPU, 2**26 on accelerators), scanned over chunks. The chunks are sized for
  the whole batch also under ``jax.vmap`` (a custom batching rule folds the
  vmapped axes into the rows), so the backward pass holds O(min(K, c) * size +
  size) floats with ``c = max(1, max_chunk_elements() // size)`` and ``size``
  the number of logits in the whole (vmapped) batch: a few 4 MiB float32
  buffers on CPU for any K (about 28 MiB in all for K = 1000 at logits
  (200, 60, 16), measured by ``scripts/bench_estimators.py``), a few 256 MiB
  buffers on a GPU.

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
  return _gumbel_rao(key, logits, tau, (num_samples, "mc"))


def gumbel_rao_qmc(
    key: Array, logits: Array, *, tau=1.0, num_samples: int = 100, tent: bool = True
) -> Array:
  r"""Gumbel-Rao with randomized quasi-Monte Carlo conditional samples (GR-QMCK).

  The same estimator as :func:`gumbel_rao` (an unbiased estimate of
  :math:`E[\nabla_{\mathrm{STGS}} \mid D]`), with the K conditional samples
  built from a randomly shifted rank-1 lattice instead of i.i.d. uniforms:
  for each variable, one uniform shift :math:`\Delta \in [0, 1)^n` and

  .. math::
    u^k = \phi(\{k z / K + \Delta\}), \quad E^k_j = -\log u^k_j, \quad
    k = 0, \dots, K - 1,

  with Korobov's generating vector ``z`` (:func:`lattice_points`) and
  :math:`\phi` the tent (baker's) transform :math:`\phi(u) = 1 - |2u - 1|`
  (or the identity with ``tent=False``). Every point is marginally uniform, so
  each term, and the average, has the conditional mean of GR-MCK: the
  estimator stays unbiased for :math:`E[\nabla_{\mathrm{STGS}} \mid D]`, while
  the lattice spreads the K points evenly and cuts the inner (given D)
  variance well below Monte Carlo's at equal K. It draws n random numbers per
  variable instead of K n. This is the "well-known variance reduction" the
  paper's section 3.3 suggests; the lattice rule is standard (Sloan & Joe
  1994; L'Ecuyer & Lemieux 2000), the construction is ours.

  Args:
    key: a PRNG key (the sample ``D`` is the same as ``gumbel_rao``'s).
    logits: float array ``[..., n]``; ``-inf`` marks impossible categories.
    tau: temperature > 0, a number or an array broadcastable to
      ``logits.shape[:-1] + (1,)`` (may be traced).
    num_samples: K >= 1, the number of lattice points.
    tent: apply the tent transform (default True).

  Returns:
    An exact one-hot sample of the shape and dtype of ``logits``.
  """
  _check_logits(logits)
  tau = _check_tau(tau, logits)
  _check_num_samples(num_samples)
  sampler = "qmc_tent" if tent else "qmc"
  return _gumbel_rao(key, logits, tau, (num_samples, sampler))


# Nodes of the trapezoid rule of `_binary_conditional_product`: offsets from
# the logistic density's centre. The integrand is analytic in a strip of
# half-width >= pi/2 and decays like e^-|t|, so a step of 1/4 over +-40 is
# accurate to about e^-39 (Trefethen & Weideman 2014).
_TRAPEZOID_OFFSETS = np.arange(-160, 161) / 4.0


def _binary_conditional_product(log_odds, tau):
  r""":math:`E[s_i s_j \mid D = i]` for n = 2, by the trapezoid rule.

  Given D = i, :math:`\log(1 + r)` with :math:`\log r = \ell + z`,
  :math:`z \sim \mathrm{Logistic}(0, 1)` (the log of a ratio of two Exp(1)) and
  :math:`\ell = \log Z - \theta_j`, is the gap :math:`x_i - x_j`, and
  :math:`s_i s_j = \sigma(\delta/\tau)\sigma(-\delta/\tau)` with
  :math:`\delta = \mathrm{softplus}(\ell + z)`.
  """
  z = log_odds[..., None] + _TRAPEZOID_OFFSETS.astype(log_odds.dtype)
  density = jax.nn.sigmoid(z - log_odds[..., None]) * jax.nn.sigmoid(log_odds[..., None] - z)
  gap = jax.nn.softplus(z) / tau[..., None]
  integrand = density * jax.nn.sigmoid(gap) * jax.nn.sigmoid(-gap)
  return jnp.sum(integrand, axis=-1) * (_TRAPEZOID_OFFSETS[1] - _TRAPEZOID_OFFSETS[0])


def _gumbel_rao_exact_backward(key, logits, sample, cotangent, tau):
  del key
  is_top = sample.astype(bool)
  log_z = jax.nn.logsumexp(logits, axis=-1, keepdims=True)
  # logZ - theta_j of the other category; +inf when it is masked (no gradient).
  log_odds = jnp.sum(jnp.where(is_top, 0.0, log_z - logits), axis=-1)
  finite = jnp.isfinite(log_odds)
  row_tau = jnp.broadcast_to(jnp.asarray(tau, logits.dtype), logits.shape[:-1] + (1,))[..., 0]
  product = _binary_conditional_product(jnp.where(finite, log_odds, 0.0), row_tau)
  product = jnp.where(finite, product, 0.0)[..., None]
  # g^T J with J = (c / tau) [[1, -1], [-1, 1]].
  difference = cotangent - jnp.flip(cotangent, axis=-1)
  return product * difference / row_tau[..., None]


_gumbel_rao_exact = _one_hot_estimator(_gumbel_rao_exact_backward)


def gumbel_rao_exact(key: Array, logits: Array, *, tau=1.0) -> Array:
  r"""Exact Gumbel-Rao for binary variables (n = 2): :math:`E[\nabla_{\mathrm{STGS}} \mid D]`.

  For two categories the tempered-softmax Jacobian is :math:`\frac{1}{\tau}
  s_0 s_1 \left[\begin{smallmatrix} 1 & -1 \\ -1 & 1\end{smallmatrix}\right]`,
  so the Rao-Blackwellized estimator needs only the scalar

  .. math::
    c = E[s_0 s_1 \mid D = i] = \int \sigma'(z)\,
      \sigma'\!\left(\mathrm{softplus}(\ell + z) / \tau\right) dz,
    \qquad \ell = \log(e^{\theta_0} + e^{\theta_1}) - \theta_{1-i},

  (:math:`\sigma' = \sigma(1 - \sigma)`), a one-dimensional integral computed
  by the trapezoid rule on 321 nodes (exponentially accurate: the integrand is
  analytic and decays like :math:`e^{-|z|}`). The inner variance is zero: this
  is GR-MCK in the limit :math:`K \to \infty`. Paulus et al. 2021, section 3.2
  and footnote 1 (the closed form they mention is the case tau = 1).

  Args:
    key: a PRNG key (the sample ``D`` is the same as ``gumbel_rao``'s).
    logits: float array ``[..., 2]``; ``-inf`` marks an impossible category.
    tau: temperature > 0, a number or an array broadcastable to
      ``logits.shape[:-1] + (1,)`` (may be traced).

  Returns:
    An exact one-hot sample of the shape and dtype of ``logits``.

  Raises:
    ValueError: unless the last axis of ``logits`` has 2 categories.
  """
  _check_logits(logits)
  if logits.shape[-1] != 2:
    raise ValueError(
        "gumbel_rao_exact needs binary variables: logits.shape[-1] must be 2;"
        f" got shape {logits.shape}. Use gumbel_rao or gumbel_rao_qmc for n > 2."
    )
  tau = _check_tau(tau, logits)
  return _gumbel_rao_exact(key, logits, tau, ())


# ---------------------------------------------------------------------------
# ZGR, ReinMax, gapped straight-through: deterministic backward passes.
# ---------------------------------------------------------------------------


def _zgr_backward(key, logits, sample, cotangent, tau):
  del key, tau
  probs = jax.nn.softmax(logits, axis=-1)
  mean_cotangent = jnp.sum(cotangent * probs, axis=-1, keepdims=True)  # <g, p>
  sampled_cotangent = jnp.sum(jnp.where(sample.astype(bool), cotangent, 0.0), axis=-1, keepdims=True)
  straight_through = probs * (cotangent - mean_cotangent)
  darn = (sampled_cotangent - mean_cotangent) * (sample - probs)
  return 0.5 * (straight_through + darn)


_zgr = _one_hot_estimator(_zgr_backward)


def zgr(key: Array, logits: Array, *, tau=1.0) -> Array:
  r"""ZGR: the zero-temperature limit of Gumbel-Rao (Shekhovtsov, ICML 2023).

  As :math:`\tau \to 0`, :math:`E[J_\tau(\theta + G) \mid D = e_i]` tends to a
  closed form (given D = i, the gap :math:`x_i - x_j` has density :math:`p_j`
  at 0+, and :math:`\int_0^\infty \sigma(t)\sigma(-t)\,dt = 1/2`), which gives

  .. math::
    \nabla_{\mathrm{ZGR}} = \tfrac12\Big[\underbrace{p \odot (g - \langle g, p
      \rangle)}_{\text{ST at } \tau = 1} + \underbrace{(g_i - \langle g, p
      \rangle)(D - p)}_{\text{DARN}}\Big], \qquad p = \mathrm{softmax}(\theta),
      \; g_i = \langle g, D \rangle:

  the average of the straight-through and DARN (Gregor et al. 2014)
  estimators. No temperature and no sampling in the backward pass; unbiased
  for functions f(D) quadratic in D. ``tau`` is accepted for a uniform
  signature (and checked) but not used.

  Args:
    key: a PRNG key (the sample ``D`` is the same as every one-hot estimator's).
    logits: float array ``[..., n]``; ``-inf`` marks impossible categories.
    tau: ignored.

  Returns:
    An exact one-hot sample of the shape and dtype of ``logits``.
  """
  _check_logits(logits)
  tau = _check_tau(tau, logits)
  return _zgr(key, logits, tau, ())


def _reinmax_backward(key, logits, sample, cotangent, tau):
  del key
  probs = jax.nn.softmax(logits, axis=-1)
  midpoint = 0.5 * (sample + jax.nn.softmax(logits / tau, axis=-1))
  return 2.0 * _softmax_vjp(midpoint, cotangent, 1.0) - 0.5 * _softmax_vjp(probs, cotangent, 1.0)


_reinmax = _one_hot_estimator(_reinmax_backward)


def reinmax(key: Array, logits: Array, *, tau=1.0) -> Array:
  r"""ReinMax: second-order accurate straight-through (Liu et al., NeurIPS 2023).

  Straight-through read as the forward Euler method for
  :math:`f(D) - f(E[D])`; ReinMax is Heun's method:

  .. math::
    \pi_0 = \mathrm{softmax}(\theta), \quad
    \pi_1 = \tfrac12\left(D + \mathrm{softmax}_\tau(\theta)\right), \qquad
    \nabla_{\mathrm{ReinMax}} = 2\, \pi_1 \odot (g - \langle g, \pi_1\rangle)
      - \tfrac12\, \pi_0 \odot (g - \langle g, \pi_0\rangle).

  The temperature enters only the backward pass (through :math:`\pi_1`); D is
  an exact sample of Categorical(softmax(theta)). The authors advise
  :math:`\tau \ge 1` (their implementation refuses :math:`\tau < 1`: ReinMax
  "prefers" larger temperatures, while ST-GS prefers small ones); values below
  1 are allowed here but not recommended.

  Args:
    key: a PRNG key (the sample ``D`` is the same as every one-hot estimator's).
    logits: float array ``[..., n]``; ``-inf`` marks impossible categories.
    tau: temperature > 0 (>= 1 advised), a number or an array broadcastable to
      ``logits.shape[:-1] + (1,)`` (may be traced).

  Returns:
    An exact one-hot sample of the shape and dtype of ``logits``.
  """
  _check_logits(logits)
  tau = _check_tau(tau, logits)
  return _reinmax(key, logits, tau, ())


def _gapped_backward(key, logits, sample, cotangent, tau, gap_rule):
  del key
  is_top = sample.astype(bool)
  max_logit = jnp.max(logits, axis=-1, keepdims=True)
  if gap_rule == "p":
    log_prob = jnp.sum(jnp.where(is_top, jax.nn.log_softmax(logits, axis=-1), 0.0), axis=-1, keepdims=True)
    prob = jnp.exp(log_prob)
    # -log(1 - p) / p, which tends to 1 as p -> 0 and to +inf as p -> 1.
    gap = jnp.where(prob > 0.0, -jnp.log1p(-prob) / jnp.where(prob > 0.0, prob, 1.0), 1.0)
  else:
    gap = 1.0
  perturbed = jnp.where(is_top, max_logit, jnp.minimum(logits, max_logit - gap))
  return _softmax_vjp(jax.nn.softmax(perturbed / tau, axis=-1), cotangent, tau)


_gapped_straight_through = _one_hot_estimator(_gapped_backward)


def gapped_straight_through(key: Array, logits: Array, *, tau=1.0, gap="1.0") -> Array:
  r"""Gapped straight-through (GST-1.0 and GST-p), Fan et al. (ICML 2022).

  ST-GS with the Gumbel perturbation replaced by a deterministic one that
  keeps the argmax at the sample :math:`D = e_i` with a margin (the gap
  :math:`\kappa`), moving each logit as little as possible:

  .. math::
    x_i = \max_k \theta_k, \quad x_j = \min(\theta_j, \max_k\theta_k - \kappa)
    \; (j \ne i), \qquad
    \nabla_{\mathrm{GST}} = \frac{\partial f(D)}{\partial D}
      \frac{d\, \mathrm{softmax}_\tau(x)}{dx},

  with the perturbation :math:`x - \theta` held fixed. GST-1.0 uses
  :math:`\kappa = 1`; GST-p uses :math:`\kappa = -\log(1 - p_i) / p_i`,
  :math:`p_i = \mathrm{softmax}(\theta)_i`, which grows as the sampled
  category becomes more certain (their "p" rule). No sampling in the backward
  pass.

  Args:
    key: a PRNG key (the sample ``D`` is the same as every one-hot estimator's).
    logits: float array ``[..., n]``; ``-inf`` marks impossible categories.
    tau: temperature > 0, a number or an array broadcastable to
      ``logits.shape[:-1] + (1,)`` (may be traced).
    gap: "1.0" (GST-1.0) or "p" (GST-p).

  Returns:
    An exact one-hot sample of the shape and dtype of ``logits``.
  """
  _check_logits(logits)
  tau = _check_tau(tau, logits)
  if gap not in ("1.0", "p"):
    raise ValueError(f'gap must be "1.0" (GST-1.0) or "p" (GST-p); got gap={gap!r}.')
  return _gapped_straight_through(key, logits, tau, (gap,))


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
    name: the config name (one of ``VALID_NAMES``).
    fn: the estimator function ``(key, logits, *, tau, **options) -> sample``.
    options: the keyword arguments fixed by the name, as sorted (key, value)
      pairs (e.g. ``(("num_samples", 100),)`` for "gr_mc100").
    relaxed: True for GS, whose sample is a point of the simplex.
    score_function: True for REINFORCE: add :func:`score_function_surrogate`.
    binary_only: True for estimators of two-category variables (gr_exact).
  """

  name: str
  fn: Callable[..., Array]
  options: tuple[tuple[str, Any], ...] = ()
  relaxed: bool = False
  score_function: bool = False
  binary_only: bool = False

  @property
  def one_hot(self) -> bool:
    """True when the forward value is an exact one-hot sample."""
    return not self.relaxed

  @property
  def straight_through(self) -> bool:
    """True when the sample itself carries the gradient (one-hot forward, custom backward)."""
    return self.one_hot and not self.score_function

  def __call__(self, key: Array, logits: Array, *, tau=1.0) -> Array:
    return self.fn(key, logits, tau=tau, **dict(self.options))


VALID_NAMES = (
    "st",
    "st_gs",
    "gs",
    "gr_mc<K> (K >= 1, e.g. gr_mc100)",
    "gr_qmc<K> (K >= 1, e.g. gr_qmc100)",
    "gr_exact (binary variables)",
    "zgr",
    "reinmax",
    "gst",
    "gst_p",
    "reinforce",
)

_ESTIMATORS = {
    "st": Estimator("st", straight_through),
    "st_gs": Estimator("st_gs", st_gumbel_softmax),
    "gs": Estimator("gs", gumbel_softmax, relaxed=True),
    "gr_exact": Estimator("gr_exact", gumbel_rao_exact, binary_only=True),
    "zgr": Estimator("zgr", zgr),
    "reinmax": Estimator("reinmax", reinmax),
    "gst": Estimator("gst", gapped_straight_through, options=(("gap", "1.0"),)),
    "gst_p": Estimator("gst_p", gapped_straight_through, options=(("gap", "p"),)),
    "reinforce": Estimator("reinforce", reinforce, score_function=True),
}

# Names with a sample count: the pattern, the function and its keyword.
_COUNTED_ESTIMATORS = (
    (re.compile(r"gr_mc([1-9][0-9]*)"), gumbel_rao, "num_samples"),
    (re.compile(r"gr_qmc([1-9][0-9]*)"), gumbel_rao_qmc, "num_samples"),
)


def get(name: str) -> Estimator:
  """The estimator for a config name.

  Args:
    name: one of ``VALID_NAMES``: "st", "st_gs", "gs", "gr_mc<K>" (for example
      "gr_mc100" is :func:`gumbel_rao` with ``num_samples=100``), "gr_qmc<K>"
      (:func:`gumbel_rao_qmc`), "gr_exact", "zgr", "reinmax", "gst" (GST-1.0),
      "gst_p" (GST-p) or "reinforce".

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
