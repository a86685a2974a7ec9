r"""Unbiased multi-sample estimators: REINFORCE leave-one-out (RLOO) and DisARM.

They evaluate the loss several times per step, so they take the loss ``f``
itself, and return a surrogate in the form of the paper's Appendix A-B: its
value is the mean of ``f`` over the evaluations, and its gradient is the
estimator (with respect to the logits) plus the ordinary pathwise gradient of
``f`` (with respect to any parameter inside ``f``), averaged over the
evaluations. The estimator's part defines first derivatives only: its surrogate
has an exactly zero Hessian in the logits (RLOO's score weights sum to zero,
DisARM's term is linear in the logit difference) while the expected loss's is
not, so differentiating it again raises a one-line ``ValueError`` instead of
returning that zero.

``f`` maps a one-hot sample shaped like ``logits`` (``[..., m, n]``: a batch
of examples, each with m variables of n categories) to one value per example
(``logits.shape[:-2]``); the variables of an example interact freely inside
``f``. Samples are exact one-hot arrays with no gradient.

Part of :mod:`gr_jax.estimators` (its docstring states the conventions).
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp

from gr_jax.estimators._core import (
  Array,
  _check_logits,
  _check_num_samples,
  _check_tau,
  _compute_dtype,
  _finish_grad,
  _first_derivatives_only,
  _gumbel_max,
  _invalid_rows,
  _public,
  _uniform_open,
)


def _check_variables(logits: Array, name: str) -> None:
  if logits.ndim < 2:
    raise ValueError(
      f"{name} needs logits of shape [..., m, n] (a batch of examples, each with m variables of"
      f" n categories); got shape {logits.shape}."
    )


def _evaluate(f: Callable, samples: Array, batch_shape, has_aux: bool, name: str):
  """``f`` at each sample ``[K, ...]`` (vmapped), its values ``[K, *batch]`` checked for shape."""
  out = jax.vmap(f)(samples)
  if has_aux and not (isinstance(out, tuple) and len(out) == 2):
    raise ValueError(
      f"{name}: with has_aux=True, f must return a pair (values, aux); it returned"
      f" {_describe(out)}."
    )
  if not has_aux and isinstance(out, tuple):
    raise ValueError(
      f"{name}: f returned a tuple of {len(out)}; pass has_aux=True if it returns (values, aux)."
    )
  values, aux = out if has_aux else (out, None)
  if getattr(values, "shape", None) != (samples.shape[0], *batch_shape):
    raise ValueError(
      f"{name}: f must return one value per example, shape {tuple(batch_shape)}"
      f" (logits.shape[:-2]); it returned {_describe(values, vmapped=True)} for a sample of"
      f" shape {samples.shape[1:]}."
    )
  return values, aux


def _describe(out, vmapped: bool = False) -> str:
  """What ``f`` returned, as a user reads it (shapes per sample, not the vmapped ones)."""
  if isinstance(out, tuple):
    return f"a tuple of {len(out)}"
  shape = getattr(out, "shape", None)
  if shape is None:
    return f"a {type(out).__name__}"
  return f"shape {tuple(shape[1:] if vmapped else shape)}"


def _estimator_term(gradient_fn: Callable, name: str) -> Callable:
  """``term(logits, *fixed)``: value 0 per example, gradient ``gradient_fn(logits, *fixed)``.

  ``gradient_fn`` returns the estimator's gradient of each example's loss with
  respect to its logits (``[..., m, n]``, in the compute dtype); the term's VJP
  scales it by the example's cotangent, zeroes masked entries and makes
  degenerate rows NaN (the package's conventions). Its own derivative raises,
  naming ``name``.
  """
  guarded = _first_derivatives_only(gradient_fn, name)

  zeros = lambda logits: jnp.zeros(logits.shape[:-2], logits.dtype)  # noqa: E731

  @jax.custom_vjp
  def term(logits, *fixed):
    return zeros(logits)

  def forward(logits, *fixed):
    return zeros(logits), (logits, fixed)

  def backward(residuals, cotangent):
    logits, fixed = residuals
    grad = cotangent[..., None, None].astype(_compute_dtype(logits.dtype)) * guarded(logits, *fixed)
    return (_finish_grad(logits, grad), *(jnp.zeros_like(x) for x in fixed))

  term.defvjp(forward, backward)
  return term


def _rloo_gradient(logits, samples, weights):
  """sum_k weights_k grad log q(D^k): ``samples [K, ..., m, n]``, ``weights [K, ...]``."""
  probs = jax.nn.softmax(logits.astype(_compute_dtype(logits.dtype)), axis=-1)
  return jnp.sum(weights[..., None, None] * (samples - probs), axis=0)


def _disarm_gradient(logits, alpha_gradient):
  """(-g, g) on the two logits of each variable, from ``alpha_gradient [..., m]``."""
  del logits
  return jnp.stack([-alpha_gradient, alpha_gradient], axis=-1)


_rloo_term = _estimator_term(_rloo_gradient, "rloo")
_disarm_term = _estimator_term(_disarm_gradient, "disarm")


@_public
def rloo(
  key: Array,
  logits: Array,
  f: Callable[[Array], Array],
  *,
  num_samples: int = 2,
  tau: float | Array = 1.0,
  has_aux: bool = False,
):
  r"""REINFORCE leave-one-out (RLOO; Kool et al. 2019, "Buy 4 REINFORCE samples").

  K independent samples :math:`D^k \sim \mathrm{Categorical}(\mathrm{softmax}
  \theta)` (every variable of every example), ``f`` evaluated at each
  (vmapped), and each sample's score weighted by its loss minus the mean of the
  other K - 1:

  .. math::
    \hat\nabla_\theta = \frac{1}{K} \sum_{k=1}^{K} \Big(f(D^k) - \frac{1}{K - 1}
      \sum_{j \ne k} f(D^j)\Big) \nabla_\theta \log q_\theta(D^k),

  unbiased for :math:`\nabla_\theta E[f(D)]` (each baseline is independent of
  its sample). The surrogate's value is :math:`\frac1K \sum_k f(D^k)`.

  Args:
    key: a PRNG key; sample k is the Gumbel-max sample of ``fold_in(key, k)``.
    logits: float array ``[..., m, n]``; ``-inf`` marks impossible categories.
    f: ``sample [..., m, n] -> [...]`` (one value per example); with
      ``has_aux``, ``(values, aux)``.
    num_samples: K >= 2, the loss evaluations per step.
    tau: accepted for a uniform signature (checked, unused).
    has_aux: ``f`` returns ``(values, aux)``; the aux of every sample is
      returned, stacked on a leading K axis.

  Returns:
    The surrogate ``[...]`` (and, with ``has_aux``, the stacked aux).
  """
  _check_logits(logits)
  _check_tau(tau, logits)
  _check_variables(logits, "rloo")
  _check_num_samples(num_samples)
  if num_samples < 2:
    raise ValueError(
      f"rloo needs num_samples >= 2 (each sample's baseline is the mean of the others); got"
      f" num_samples={num_samples}."
    )
  keys = jax.vmap(lambda k: jax.random.fold_in(key, k))(jnp.arange(num_samples))
  samples = jax.vmap(lambda k: jax.lax.stop_gradient(_gumbel_max(k, logits)[1]))(keys)
  batch_shape = logits.shape[:-2]
  values, aux = _evaluate(f, samples, batch_shape, has_aux, "rloo")
  fixed = jax.lax.stop_gradient(values).astype(_compute_dtype(logits.dtype))  # [K, ...]
  leave_one_out = (jnp.sum(fixed, axis=0) - fixed) / (num_samples - 1)
  weights = (fixed - leave_one_out) / num_samples
  surrogate = jnp.mean(values, axis=0) + _rloo_term(logits, samples, weights)
  return (surrogate, aux) if has_aux else surrogate


@_public
def disarm(
  key: Array,
  logits: Array,
  f: Callable[[Array], Array],
  *,
  tau: float | Array = 1.0,
  has_aux: bool = False,
):
  r"""DisARM (Dong, Mnih & Tucker, NeurIPS 2020) for binary variables: an antithetic pair.

  With :math:`\alpha = \theta_1 - \theta_0` each variable's Bernoulli logit
  (category 1 is "b = 1") and one uniform :math:`u` per variable, the pair
  :math:`b = 1[u > 1 - \sigma(\alpha)]`, :math:`\tilde b = 1[u < \sigma(\alpha)]`
  (each marginally Bernoulli(:math:`\sigma(\alpha)`)), ``f`` evaluated at both,
  and per variable

  .. math::
    \hat\nabla_{\alpha} = \tfrac12 \big(f(b) - f(\tilde b)\big)
      (-1)^{\tilde b}\, 1[b \ne \tilde b]\, \sigma(|\alpha|),

  unbiased for :math:`\nabla_\alpha E[f(b)]` (the multi-dimensional case of
  their paper, section 4); the gradient with respect to the two logits is
  :math:`(-\hat\nabla_\alpha, \hat\nabla_\alpha)`. The surrogate's value is
  :math:`\frac12 (f(b) + f(\tilde b))`.

  Args:
    key: a PRNG key (the uniforms: ``jax.random.uniform(key, logits.shape[:-1], dtype,
      minval=tiny)`` in the compute dtype, float32 for low-precision logits, so u > 0).
    logits: float array ``[..., m, 2]``; ``-inf`` marks an impossible category; a variable
      with a NaN or ``+inf`` logit, or both ``-inf``, gets a NaN sample row and NaN gradients.
    f: ``sample [..., m, 2] -> [...]`` (one value per example); with
      ``has_aux``, ``(values, aux)``.
    tau: accepted for a uniform signature (checked, unused).
    has_aux: ``f`` returns ``(values, aux)``; both evaluations' aux are
      returned, stacked on a leading axis of 2 (b, then b~).

  Returns:
    The surrogate ``[...]`` (and, with ``has_aux``, the stacked aux).

  Raises:
    ValueError: unless the variables are binary (``logits.shape[-1] == 2``).
  """
  _check_logits(logits)
  if logits.shape[-1] != 2:
    raise ValueError(
      "disarm needs binary variables: logits.shape[-1] must be 2; got shape"
      f" {logits.shape}. Use rloo for n > 2."
    )
  _check_tau(tau, logits)
  _check_variables(logits, "disarm")
  # In float32 for low-precision logits: a bfloat16 uniform takes 128 values, and b would be
  # Bernoulli with p rounded to that grid. u > 0 (as GR's uniforms): at u = 0, b = 1[u > 1 - p]
  # would be 0 for p = 1, a masked category.
  dtype = _compute_dtype(logits.dtype)
  fixed_logits = jax.lax.stop_gradient(logits).astype(dtype)
  alpha = fixed_logits[..., 1] - fixed_logits[..., 0]  # [..., m]; +-inf where a category is masked
  probability = jax.nn.sigmoid(alpha)
  u = _uniform_open(key, alpha.shape, dtype)
  b = (u > 1.0 - probability).astype(dtype)
  b_tilde = (u < probability).astype(dtype)
  invalid = _invalid_rows(logits)  # [..., m, 1]: NaN sample rows, as every estimator's
  one_hot = lambda bits: jnp.where(  # noqa: E731
    invalid, jnp.nan, jnp.stack([1.0 - bits, bits], axis=-1)
  ).astype(logits.dtype)
  samples = jnp.stack([one_hot(b), one_hot(b_tilde)])  # [2, ..., m, 2]
  values, aux = _evaluate(f, samples, logits.shape[:-2], has_aux, "disarm")
  fixed = jax.lax.stop_gradient(values).astype(dtype)
  difference = (0.5 * (fixed[0] - fixed[1]))[..., None]  # [..., 1]
  # A masked category makes alpha infinite; its variable is deterministic (b = b~, no gradient).
  factor = jnp.where(b != b_tilde, jnp.where(b_tilde > 0, -1.0, 1.0), 0.0)
  alpha_gradient = difference * factor * jax.nn.sigmoid(jnp.abs(alpha))  # [..., m]
  surrogate = jnp.mean(values, axis=0) + _disarm_term(logits, alpha_gradient)
  return (surrogate, aux) if has_aux else surrogate
