r"""Argument checks and the pieces every estimator shares: the Gumbel-max sample,
degenerate rows, the tempered-softmax VJP, the one-hot ``custom_vjp`` wrapper.

Part of :mod:`gr_jax.estimators` (its docstring states the conventions).
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

Array = jax.Array


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
  if logits.ndim < 1:
    raise ValueError(
      "logits must have at least one axis, the categories on the last; got a scalar (shape ())."
    )
  if logits.shape[-1] < 1:
    raise ValueError(
      f"logits has an empty category axis (the last): shape {logits.shape}; a variable needs at"
      " least one category."
    )


def _check_key(key: Any) -> None:
  """key must be one PRNG key: a typed key of shape () or a raw key (uint32, one dimension)."""
  typed = hasattr(key, "dtype") and jnp.issubdtype(key.dtype, jax.dtypes.prng_key)
  raw = hasattr(key, "dtype") and key.dtype == jnp.uint32 and np.ndim(key) == 1
  if typed and key.shape == ():
    return
  if raw:
    return
  if typed:
    what = f"a batch of keys of shape {key.shape}"
  elif hasattr(key, "shape") and hasattr(key, "dtype"):
    what = f"an array of shape {key.shape} and dtype {key.dtype}"
  else:
    what = f"{key!r}"[:80]
  raise ValueError(
    f"key must be one PRNG key (jax.random.key(seed)); got {what}. To draw with a batch of"
    " keys, jax.vmap the estimator over them."
  )


def _public(fn):
  """An estimator's public entry: checks the key, and says in one line why forward mode fails.

  JAX differentiates a ``jax.custom_vjp`` function in reverse mode only; its own
  message for ``jax.jvp`` / ``jax.jacfwd`` names neither the function nor what
  to use instead.
  """

  @functools.wraps(fn)
  def checked(key, logits, *args, **kwargs):
    _check_key(key)
    try:
      return fn(key, logits, *args, **kwargs)
    except TypeError as e:
      if "forward-mode autodiff" not in str(e):
        raise
      raise TypeError(
        f"{fn.__name__} has a custom backward pass (jax.custom_vjp), so it has no forward-mode"
        " derivative: jax.jvp, jax.jacfwd and jax.linearize of it are not defined; use"
        " jax.grad, jax.vjp or jax.jacrev."
      ) from None

  return checked


def _check_tau(tau: Any, logits: Array):
  """tau as a number or an array broadcastable to logits.shape[:-1] + (1,).

  Raises ValueError for a wrong shape or type, and for concrete values that are
  not finite and > 0 in the compute dtype (float32 for float32 and low-precision
  logits: tau = 1e-50 is 0 there, 1e39 is inf). Returns tau in the compute dtype
  of logits (a Python number stays one).
  """
  variable_shape = logits.shape[:-1] + (1,)
  if isinstance(tau, (list, tuple)):
    raise ValueError(
      f"tau must be a number or an array, not a {type(tau).__name__}: pass an array"
      f" (jnp.asarray({tau!r})) of shape broadcastable to {variable_shape}."
    )
  try:
    dtype = None if tau is None else jnp.result_type(tau)
  except TypeError:
    dtype = None
  if (
    isinstance(tau, bool)
    or dtype is None
    or not jnp.issubdtype(dtype, jnp.number)
    or jnp.issubdtype(dtype, jnp.complexfloating)
  ):
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
  compute = _compute_dtype(logits.dtype)
  value = _concrete(tau)
  if value is not None:
    with np.errstate(over="ignore", under="ignore"):
      computed = np.asarray(value, np.float64).astype(compute)
    ok = np.isfinite(computed) & (computed > 0)
    if not np.all(ok):
      index = int(np.argmin(ok.ravel()))
      bad, there = value.flat[index].item(), computed.flat[index].item()
      if np.isfinite(value.flat[index]) and value.flat[index] > 0:
        raise ValueError(
          f"tau={bad!r} is {there!r} in {np.dtype(compute).name}, the dtype the estimator"
          " computes in for these logits: tau must be finite and > 0 there."
        )
      raise ValueError(f"tau must be finite and > 0; got tau={bad!r}.")
  if isinstance(tau, (int, float)):
    return tau
  return jnp.asarray(tau, compute)


# K indexes the backward pass's samples as int32 (fold_in data, the lattice's k).
MAX_NUM_SAMPLES = 2**31 - 1


def _check_num_samples(num_samples: Any, limit: int = MAX_NUM_SAMPLES) -> None:
  if (
    isinstance(num_samples, bool)
    or not isinstance(num_samples, int)
    or not 1 <= num_samples <= limit
  ):
    raise ValueError(
      f"num_samples must be a Python int in [1, {limit}] (it sets array shapes and"
      f" indexes samples in int32); got num_samples={num_samples!r}."
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


def _uniform_open(key: Array, shape, dtype) -> Array:
  """U ~ Uniform(0, 1) with U > 0 (so that -log(U) is finite, and a comparison with 1 - p never
  picks a category of probability 0)."""
  return jax.random.uniform(key, shape, dtype, minval=jnp.finfo(dtype).tiny)


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


def _centred_cotangent(logits: Array, sample: Array, cotangent: Array) -> Array:
  """The cotangent g with zeros at masked (-inf) categories, minus its value at the sample.

  Every backward pass here is invariant to a constant shift of a row of g (a
  softmax VJP; DARN's g_i - <g, p>; the binary difference g_0 - g_1), so this
  changes no gradient in exact arithmetic. In floating point it does: with
  g_i = 0 at the sampled category, the terms that cancel there (g_i against
  <g, s> ~ g_i, divided by tau) vanish exactly, so a saturated softmax gives
  exactly 0 at any tau, and a masked entry's cotangent (even inf) never reaches
  the arithmetic.
  """
  cotangent = jnp.where(jnp.isneginf(logits), 0.0, cotangent)
  return cotangent - jnp.sum(cotangent * sample, axis=-1, keepdims=True)


def _finish_grad(logits: Array, grad: Array) -> Array:
  """Zero at -inf logits, NaN on invalid rows, logits' dtype."""
  grad = jnp.where(jnp.isneginf(logits), 0.0, grad)
  return jnp.where(_invalid_rows(logits), jnp.nan, grad).astype(logits.dtype)


def _first_derivatives_only(fn, name: str):
  """``fn`` whose derivative raises: for backward passes that define first derivatives only."""
  guarded = jax.custom_jvp(fn)

  def refuse(primals, tangents):
    del primals, tangents
    raise ValueError(
      f"{name} defines first derivatives only: its backward pass cannot be differentiated"
      " (jax.grad of jax.grad, jax.hessian, jax.jacfwd of a gradient). Use"
      " st_gumbel_softmax, whose second derivative is that of softmax_tau(logits + G) at"
      " fixed G, or stop_gradient the gradient."
    )

  guarded.defjvp(refuse)
  return guarded


def _one_hot_estimator(backward):
  """A custom_vjp estimator: the Gumbel-max sample forward, ``backward`` behind it.

  ``backward(key, logits, sample, cotangent, tau, *options)`` gets the
  estimator's key, the logits, sample and cotangent in the compute dtype (the
  cotangent centred on the sample: :func:`_centred_cotangent`) and the static
  ``options`` tuple, and returns the gradient with respect to the logits; masks
  and degenerate rows are handled here.
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
    computed_logits, computed_sample = logits.astype(dtype), sample.astype(dtype)
    cotangent = _centred_cotangent(computed_logits, computed_sample, cotangent.astype(dtype))
    grad = backward(key, computed_logits, computed_sample, cotangent, tau, *options)
    return None, _finish_grad(logits, grad), None

  estimator.defvjp(forward, backward_rule)
  return estimator
