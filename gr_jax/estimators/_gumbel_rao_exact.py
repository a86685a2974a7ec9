r"""GR-exact: the binary Gumbel-Rao gradient by quadrature, GR-MC with K -> infinity (Paulus et al.
2021, Appendix A).

Part of :mod:`gr_jax.estimators` (its docstring states the conventions).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from gr_jax.estimators._core import (
  Array,
  _check_logits,
  _check_tau,
  _first_derivatives_only,
  _one_hot_estimator,
  _public,
)

# The trapezoid rule of `_binary_conditional_product`: (nodes, margin) per
# compute dtype, that many nodes over a window that holds the integrand's mass
# but for e^-margin. The integrand is analytic in a strip of half-width pi/2
# around the real axis, so the rule converges like exp(-pi^2 / step) (Trefethen
# & Weideman 2014). float64 takes 321 nodes over a margin of 40 (worst relative
# error against scipy quad 2e-15); float32 (and the low-precision dtypes,
# computed in float32) 81 over 20, a quarter of the work at the same error as
# 321 nodes in float32: worst 4.5e-6 against 2.3e-6 over ell in [0, 60] and tau
# in [1e-30, 1e4], both set by float32 rounding (tests/estimators/test_gumbel_rao.py).
_TRAPEZOID_RULES = {"float64": (321, 40.0), "float32": (81, 20.0)}

# `_product_by_table` (one scalar tau <= 0.75, float32): G(ell) = log(c / tau) + ell is smooth
# and constant (to 1e-8) beyond ell = 20 / kappa + 5, kappa = min(1, 1/tau - 1); 48 Chebyshev
# terms on that interval interpolate it to 2e-9 (tau 0.75) .. 1e-13 (tau <= 0.5) against the
# float64 rule. Nearer tau = 1 the interval grows like 1 / kappa: the quadrature stays.
_TABLE_TERMS = 48
_TABLE_MAX_TAU = 0.75

# F(v) of `_product_at_tau_one` is its series where |v| <= 1/2, with this many
# terms per dtype: the first one left out is below 2^-k / k, under the dtype's
# epsilon (float64 4e-18, float32 2.2e-9, relative to F >= 1/3).
_SERIES_TERMS = {"float64": 52, "float32": 24}
_LOG_TWO = 0.6931471805599453


def _softplus_inverse(y):
  """log(expm1(y)) for y > 0, without overflow."""
  return jnp.where(y > 30.0, y, jnp.log(jnp.expm1(jnp.minimum(y, 30.0))))


# The integrand's nodes per variable are most of the estimator's cost, and
# `jax.nn.softplus` (a `logaddexp`) costs several times this explicit form on
# CPU: with it GR-exact's step at logits (50, 200, 2) took 12.6 ms, not 50.3.
def _softplus(x):
  """log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|))."""
  return jnp.maximum(x, 0.0) + jnp.log1p(jnp.exp(-jnp.abs(x)))


def _binary_conditional_product(log_odds, tau):
  r""":math:`E[s_i s_j \mid D = i] / \tau` for n = 2, by the trapezoid rule.

  Given D = i, :math:`\log r = z \sim \mathrm{Logistic}(\ell, 1)` (the log of a
  ratio of two Exp(1), shifted by :math:`\ell = \log Z - \theta_j \ge 0`), the
  gap :math:`x_i - x_j` is :math:`\delta = \mathrm{softplus}(z)`, and
  :math:`s_i s_j = h(\delta / \tau)`, :math:`h(w) = \sigma(w)\sigma(-w)`. The
  integrand :math:`p(z)\, h(\delta/\tau) / \tau` is its exponent summed
  before one exp (no underflow at tiny tau or large gaps) over its two
  denominators (four exp and one log1p per node) on a window around its mass: it
  starts m below min(ell, softplus^-1(tau)), where the logistic density and h
  both bend, and ends where either has decayed by e^-m: m above ell, or
  where :math:`\delta / \tau` passes 45 (for tau < 1, with the density's rise
  :math:`e^{z}` against h's fall :math:`e^{-z/\tau}`, m / (1/tau - 1) further),
  with the margin m of ``_TRAPEZOID_RULES`` (40 in float64, 20 in float32).
  """
  num_nodes, margin = _TRAPEZOID_RULES[jnp.dtype(log_odds.dtype).name]
  bend = _softplus_inverse(tau)
  low = jnp.minimum(log_odds, bend) - margin
  below_one = tau < 1.0
  h_decayed = jnp.maximum(
    _softplus_inverse(45.0 * tau),
    bend + margin * tau / jnp.where(below_one, 1.0 - tau, 1.0),
  )
  high = jnp.where(below_one, jnp.minimum(log_odds + margin, h_decayed), log_odds + margin)
  high = jnp.maximum(high, low + 1.0)
  fractions = jnp.linspace(0.0, 1.0, num_nodes, dtype=log_odds.dtype)
  step = (high - low) / (num_nodes - 1)
  z = low[..., None] + (high - low)[..., None] * fractions
  gap = _softplus(z) / tau[..., None]
  distance = jnp.abs(z - log_odds[..., None])
  # sigma'(x) sigma'(w) / tau = e^{-|x| - w} / tau / ((1 + e^{-|x|}) (1 + e^{-w}))^2 (w >= 0):
  # the exponent in one exp (no underflow), the factors of the denominator near 1.
  numerator = jnp.exp(-distance - gap - jnp.log(tau)[..., None])
  denominator = (1.0 + jnp.exp(-distance)) * (1.0 + jnp.exp(-gap))
  return jnp.sum(numerator / jnp.square(denominator), axis=-1) * step


def _product_at_tau_one(log_odds):
  r"""`_binary_conditional_product` at tau = 1, in closed form.

  With :math:`p = e^{-\ell}` the other category's probability and :math:`W =
  E_j / E_i` (density :math:`(1 + w)^{-2}`), the gap's :math:`s_i s_j = (1 +
  r) / (2 + r)^2`, :math:`r = W / p`, integrates to

  .. math::
    c = p\, F(v), \qquad v = 1 - 2p, \qquad
    F(v) = \frac{-\log(1 - v) - v - v^2/2}{v^3} = \sum_{k \ge 0} \frac{v^k}{k + 3},

  (:math:`c = \ln 2 - 1/2` at :math:`\ell = 0`, :math:`1/6` at :math:`\ell =
  \ln 2`). The closed form cancels near v = 0, so F is its series where |v| <=
  1/2 (relative error under 2e-6 in float32 everywhere, 2e-15 in float64);
  :math:`-\log(1 - v) = \ell - \ln 2` comes from ell itself, exact for any
  gap, and p underflows to 0 where the gradient does.
  """
  num_terms = _SERIES_TERMS[jnp.dtype(log_odds.dtype).name]
  v = -jnp.expm1(_LOG_TWO - log_odds)
  series = jnp.zeros_like(v)
  for k in reversed(range(num_terms)):
    series = series * v + 1.0 / (k + 3)
  near_zero = jnp.abs(v) <= 0.5
  far_v = jnp.where(near_zero, 1.0, v)
  closed = (log_odds - _LOG_TWO - far_v - 0.5 * jnp.square(far_v)) / far_v**3
  return jnp.exp(-log_odds) * jnp.where(near_zero, series, closed)


def _product_by_table(log_odds, tau):
  r"""`_binary_conditional_product` for one scalar tau <= 0.75, by a table in the logit gap.

  .. math::
    c(\ell) / \tau = \exp(G(\ell) - \ell), \qquad
    G(\ell) \approx \sum_{k < 48} a_k T_k(2 \min(\ell, L) / L - 1),

  the coefficients :math:`a_k` from G at the 48 Chebyshev points of [0, L] (the
  quadrature's 81 nodes each: 3,888 nodes per step, where the quadrature takes 81
  per variable), then per variable one Clenshaw sum and one exp. G tends to a
  constant as ell grows (c falls like :math:`e^{-\ell}`, the density's tail,
  when tau < 1), within 1e-8 beyond :math:`L = 20 / \kappa + 5`,
  :math:`\kappa = \min(1, 1/\tau - 1)`, the rate of its corrections.
  """
  dtype = log_odds.dtype
  kappa = jnp.clip(1.0 / tau - 1.0, 1.0 / 3.0, 1.0)  # 1/3 at tau 0.75 (and in branches not taken)
  length = 20.0 / kappa + 5.0
  angles = np.pi * (np.arange(_TABLE_TERMS) + 0.5) / _TABLE_TERMS
  nodes = (jnp.asarray(np.cos(angles), dtype) + 1.0) * (length / 2.0)
  values = jnp.log(_binary_conditional_product(nodes, jnp.full_like(nodes, tau))) + nodes
  # a_k = (2 / N) sum_j G(x_j) cos(k angle_j), a_0 halved: the discrete Chebyshev transform.
  transform = np.cos(np.outer(np.arange(_TABLE_TERMS), angles)) * (2.0 / _TABLE_TERMS)
  transform[0] /= 2.0
  coefficients = jnp.asarray(transform, dtype) @ values
  t = 2.0 * jnp.clip(log_odds, 0.0, length) / length - 1.0
  later, last = jnp.zeros_like(t), jnp.zeros_like(t)
  for k in range(_TABLE_TERMS - 1, 0, -1):  # Clenshaw's recurrence
    later, last = last, 2.0 * t * last - later + coefficients[k]
  return jnp.exp(t * last - later + coefficients[0] - log_odds)


def _exact_gradient(logits, sample, cotangent, tau):
  is_top = sample.astype(bool)
  log_z = jax.nn.logsumexp(logits, axis=-1, keepdims=True)
  # logZ - theta_j of the other category; +inf when it is masked (no gradient).
  log_odds = jnp.sum(jnp.where(is_top, 0.0, log_z - logits), axis=-1)
  finite = jnp.isfinite(log_odds)
  log_odds = jnp.where(finite, log_odds, 0.0)

  # One closed-form pass at tau = 1; for one scalar tau <= 0.75 in float32, the table; else the
  # quadrature per variable (under vmap with per-member tau, jax runs every branch).
  def quadrature():
    return _binary_conditional_product(log_odds, jnp.broadcast_to(tau, log_odds.shape))

  if jnp.ndim(tau) == 0 and log_odds.dtype != jnp.float64:
    branch = jnp.where(tau == 1.0, 0, jnp.where(tau <= _TABLE_MAX_TAU, 1, 2))
    scale = jax.lax.switch(
      branch,
      [
        lambda: _product_at_tau_one(log_odds),
        lambda: _product_by_table(log_odds, tau),
        quadrature,
      ],
    )
  else:
    scale = jax.lax.cond(jnp.all(tau == 1.0), lambda: _product_at_tau_one(log_odds), quadrature)
  scale = jnp.where(finite, scale, 0.0)[..., None]
  # g^T J with J = (c / tau) [[1, -1], [-1, 1]].
  return scale * (cotangent - jnp.flip(cotangent, axis=-1))


_guarded_exact_gradient = _first_derivatives_only(_exact_gradient, "gumbel_rao_exact")


def _gumbel_rao_exact_backward(key, logits, sample, cotangent, tau):
  del key
  tau = jnp.asarray(tau, logits.dtype)
  if tau.ndim:  # per variable: one tau per row
    tau = jnp.broadcast_to(tau, logits.shape[:-1] + (1,))[..., 0]
  return _guarded_exact_gradient(logits, sample, cotangent, tau)


_gumbel_rao_exact = _one_hot_estimator(_gumbel_rao_exact_backward)


@_public
def gumbel_rao_exact(key: Array, logits: Array, *, tau: float | Array = 1.0) -> Array:
  r"""Exact Gumbel-Rao for binary variables (n = 2): :math:`E[\nabla_{\mathrm{STGS}} \mid D]`.

  For two categories the tempered-softmax Jacobian is :math:`\frac{1}{\tau}
  s_0 s_1 \left[\begin{smallmatrix} 1 & -1 \\ -1 & 1\end{smallmatrix}\right]`,
  so the Rao-Blackwellized estimator needs only the scalar

  .. math::
    c = E[s_0 s_1 \mid D = i] = \int \sigma'(z)\,
      \sigma'\!\left(\mathrm{softplus}(\ell + z) / \tau\right) dz,
    \qquad \ell = \log(e^{\theta_0} + e^{\theta_1}) - \theta_{1-i},

  (:math:`\sigma' = \sigma(1 - \sigma)`), a one-dimensional integral: in
  closed form where every tau is 1 (``_product_at_tau_one``); for one scalar
  tau <= 0.75 in float32, from a per-call table of 48 Chebyshev terms in
  :math:`\ell` (``_product_by_table``: one sum and one exp per variable);
  otherwise by the trapezoid rule on 81 nodes in float32 (321 in float64) over a
  window that follows the integrand's mass (exponentially accurate: the integrand is analytic; as
  tau -> 0 the gradient tends to ZGR's, :math:`p_j / 2` times the cotangent
  difference, at every representable tau). The inner variance is zero: this
  is GR-MCK in the limit :math:`K \to \infty`. Paulus et al. 2021, section 3.2
  and footnote 1 (the closed form they mention is the case tau = 1). Like
  :func:`gumbel_rao`, its backward pass is not differentiable: second
  derivatives raise ValueError.

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
