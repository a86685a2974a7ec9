r"""Straight-through (ST), Gumbel-Softmax (GS) and straight-through Gumbel-Softmax (ST-GS).

Part of :mod:`gr_jax.estimators` (its docstring states the conventions).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from gr_jax.estimators._core import (
  Array,
  _centred_cotangent,
  _check_logits,
  _check_tau,
  _finish_grad,
  _gumbel_max,
  _invalid_rows,
  _one_hot_estimator,
  _perturbed_logits,
  _public,
  _softmax_vjp,
)

# ---------------------------------------------------------------------------
# Straight-through (ST): gradient through softmax(logits / tau).
# ---------------------------------------------------------------------------


def _straight_through_backward(key, logits, sample, cotangent, tau):
  del key, sample
  return _softmax_vjp(jax.nn.softmax(logits / tau, axis=-1), cotangent, tau)


_straight_through = _one_hot_estimator(_straight_through_backward)


@_public
def straight_through(key: Array, logits: Array, *, tau: float | Array = 1.0) -> Array:
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


@_public
def gumbel_softmax(key: Array, logits: Array, *, tau: float | Array = 1.0) -> Array:
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
  return sample, (logits, sample, relaxed, tau)


def _st_gumbel_softmax_bwd(residuals, cotangent):
  logits, sample, relaxed, tau = residuals
  dtype = relaxed.dtype
  grad = _softmax_vjp(
    relaxed, _centred_cotangent(logits, sample.astype(dtype), cotangent.astype(dtype)), tau
  )
  return None, _finish_grad(logits, grad), None


_st_gumbel_softmax.defvjp(_st_gumbel_softmax_fwd, _st_gumbel_softmax_bwd)


@_public
def st_gumbel_softmax(key: Array, logits: Array, *, tau: float | Array = 1.0) -> Array:
  r"""Straight-through Gumbel-Softmax estimator (ST-GS).

  .. math::
    D = \mathrm{onehot}(\arg\max_i(\theta_i + G_i)), \qquad
    \nabla_{\mathrm{STGS}} = \frac{\partial f(D)}{\partial D}
      \frac{d\, \mathrm{softmax}_\tau(\theta + G)}{d\theta}

  with the same Gumbels :math:`G` in both. The forward value is the exact
  one-hot ``D``.

  Args:
    key: a PRNG key. With the same key, ``gumbel_softmax`` returns the relaxed
      sample ``S_tau`` at the same ``G``, and ``D = onehot(argmax(S_tau))`` up to
      rounding in the logits' dtype (in bfloat16 or float16 the relaxed sample
      can round to a tie; D itself is the exact argmax of logits + G).
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
