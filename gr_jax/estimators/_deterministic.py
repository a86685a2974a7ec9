r"""ZGR, ReinMax and gapped straight-through: deterministic backward passes.

Part of :mod:`gr_jax.estimators` (its docstring states the conventions).
"""

from __future__ import annotations

import math
import numbers

import jax
import jax.numpy as jnp

from gr_jax.estimators._core import (
  Array,
  _check_logits,
  _check_tau,
  _one_hot_estimator,
  _public,
  _softmax_vjp,
)

# ---------------------------------------------------------------------------
# ZGR, ReinMax, gapped straight-through: deterministic backward passes.
# ---------------------------------------------------------------------------


def _zgr_backward(key, logits, sample, cotangent, tau):
  del key, tau
  probs = jax.nn.softmax(logits, axis=-1)
  mean_cotangent = jnp.sum(cotangent * probs, axis=-1, keepdims=True)  # <g, p>
  sampled_cotangent = jnp.sum(
    jnp.where(sample.astype(bool), cotangent, 0.0), axis=-1, keepdims=True
  )
  straight_through = probs * (cotangent - mean_cotangent)
  # DARN's coefficient <g, D - p*> holds p fixed (the surrogate's stop_gradient),
  # so that the derivative of this backward pass is the surrogate's Hessian.
  fixed_mean = jnp.sum(cotangent * jax.lax.stop_gradient(probs), axis=-1, keepdims=True)
  darn = (sampled_cotangent - fixed_mean) * (sample - probs)
  return 0.5 * (straight_through + darn)


_zgr = _one_hot_estimator(_zgr_backward)


@_public
def zgr(key: Array, logits: Array, *, tau: float | Array = 1.0) -> Array:
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
  estimators: the gradient of the author's surrogate
  :math:`\tfrac12[\mathrm{softmax}(\theta) + (D - p^*) \log p_i(\theta)]`
  (:math:`p^*` held fixed). No temperature and no sampling in the backward
  pass; unbiased for functions f(D) quadratic in D; the same gradient as ReinMax at
  :math:`\tau = 1` (see ``reinmax``). ``tau`` is accepted for a uniform signature (and
  checked) but not used.

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


def _moving_with_logits(point, logits):
  """``point`` (on the simplex) with the derivative of softmax(logits + c), c = log(point) - logits
  held fixed.

  Its value is exactly ``point``; only its derivative in the logits changes, to
  the one the estimators' surrogates (a perturbation held fixed) define.
  """
  shift = jnp.where(jnp.isneginf(logits), 0.0, jnp.log(point) - logits)
  moving = jax.nn.softmax(logits + jax.lax.stop_gradient(shift), axis=-1)
  return jax.lax.stop_gradient(point) + (moving - jax.lax.stop_gradient(moving))


def _reinmax_backward(key, logits, sample, cotangent, tau):
  del key
  probs = jax.nn.softmax(logits, axis=-1)
  midpoint = 0.5 * (sample + jax.nn.softmax(logits / tau, axis=-1))
  midpoint = _moving_with_logits(midpoint, logits)
  return 2.0 * _softmax_vjp(midpoint, cotangent, 1.0) - 0.5 * _softmax_vjp(probs, cotangent, 1.0)


_reinmax = _one_hot_estimator(_reinmax_backward)


@_public
def reinmax(key: Array, logits: Array, *, tau: float | Array = 1.0) -> Array:
  r"""ReinMax: second-order accurate straight-through (Liu et al., NeurIPS 2023).

  Straight-through read as the forward Euler method for
  :math:`f(D) - f(E[D])`; ReinMax is Heun's method:

  .. math::
    \pi_0 = \mathrm{softmax}(\theta), \quad
    \pi_1 = \tfrac12\left(D + \mathrm{softmax}_\tau(\theta)\right), \qquad
    \nabla_{\mathrm{ReinMax}} = 2\, \pi_1 \odot (g - \langle g, \pi_1\rangle)
      - \tfrac12\, \pi_0 \odot (g - \langle g, \pi_0\rangle).

  It is the gradient of the authors' surrogate :math:`2\,\mathrm{softmax}(\theta
  + c) - \tfrac12 \mathrm{softmax}(\theta)` with :math:`c = \log\pi_1 - \theta`
  held fixed. The temperature enters only the backward pass (through
  :math:`\pi_1`); D is an exact sample of Categorical(softmax(theta)). The authors advise
  :math:`\tau \ge 1` (their implementation refuses :math:`\tau < 1`: ReinMax
  "prefers" larger temperatures, while ST-GS prefers small ones); values below
  1 are allowed here but not recommended. At :math:`\tau = 1` ReinMax is ZGR:
  :math:`\pi_1 = (D + p)/2` reduces the gradient to
  :math:`\tfrac12[(g_i - \langle g, p\rangle) D + p \odot (g - g_i)]`, ZGR's
  :math:`\tfrac12[\mathrm{ST} + \mathrm{DARN}]` written out, for every arity.

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
    # -log(1 - p_D) / p_D, which tends to 1 as p_D -> 0 and to +inf as p_D -> 1. log(1 - p_D) is
    # the other categories' log-sum-exp minus the whole's: exact also where p_D rounds to 1 in the
    # compute dtype (1 - p_D from p_D, or from a log-softmax near 0, loses every digit there).
    log_z = jax.nn.logsumexp(logits, axis=-1, keepdims=True)
    log_one_minus = jax.nn.logsumexp(jnp.where(is_top, -jnp.inf, logits), axis=-1, keepdims=True)
    log_prob = jnp.sum(jnp.where(is_top, logits, 0.0), axis=-1, keepdims=True) - log_z
    prob = jnp.exp(log_prob)
    gap = jnp.where(prob > 0.0, -(log_one_minus - log_z) / jnp.where(prob > 0.0, prob, 1.0), 1.0)
  else:
    gap = gap_rule
  perturbed = jnp.where(is_top, max_logit, jnp.minimum(logits, max_logit - gap))
  # The perturbation x - theta is held fixed: x moves with the logits, one for one.
  moving = jnp.where(jnp.isneginf(logits), 0.0, logits - jax.lax.stop_gradient(logits))
  perturbed = jax.lax.stop_gradient(perturbed) + moving
  return _softmax_vjp(jax.nn.softmax(perturbed / tau, axis=-1), cotangent, tau)


_gapped_straight_through = _one_hot_estimator(_gapped_backward)


@_public
def gapped_straight_through(
  key: Array, logits: Array, *, tau: float | Array = 1.0, gap: float | str = 1.0
) -> Array:
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
    gap: a fixed gap > 0, a real number (Python or numpy; 1.0: GST-1.0), or "p" (GST-p).

  Returns:
    An exact one-hot sample of the shape and dtype of ``logits``.
  """
  _check_logits(logits)
  tau = _check_tau(tau, logits)
  fixed = (
    isinstance(gap, numbers.Real) and not isinstance(gap, bool) and math.isfinite(gap) and gap > 0
  )
  if not fixed and gap != "p":
    raise ValueError(f'gap must be a number > 0 (1.0: GST-1.0) or "p" (GST-p); got gap={gap!r}.')
  return _gapped_straight_through(key, logits, tau, (float(gap) if fixed else gap,))
