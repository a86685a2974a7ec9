r"""Variance, bias and mean squared error of stochastic gradient estimators.

The paper's measurements (Paulus et al. 2021, Figures 1 and 2, Propositions
1-3) are about the distribution of one estimator draw :math:`\hat g` (a
gradient pytree) over its randomness:

.. math::
  \mathrm{Var} = \mathrm{tr}\,\mathrm{Cov}[\hat g] = E\|\hat g - E\hat g\|^2,
  \quad \mathrm{Bias}^2 = \|E \hat g - \nabla\|^2, \quad
  \mathrm{MSE} = E\|\hat g - \nabla\|^2 = \mathrm{Var} + \mathrm{Bias}^2,

summed over every parameter, against a reference gradient :math:`\nabla`
(exact by enumeration, :func:`exact_gradient`, or a high-sample REINFORCE
estimate, :func:`reference_gradient`).
"""

from __future__ import annotations

import inspect
import itertools
import math
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gr_jax import estimators

PyTree = Any


class GradientStats(NamedTuple):
  """Moments of an estimator over ``num_draws`` draws.

  Attributes:
    mean: pytree, the mean gradient.
    variance: per-coordinate variance pytree (unbiased, divisor R - 1).
    trace_variance: scalar, trace of the covariance (sum of ``variance``).
    num_draws: R.
  """

  mean: PyTree
  variance: PyTree
  trace_variance: jax.Array
  num_draws: int

  def standard_error(self) -> PyTree:
    """Per-coordinate standard error of ``mean``."""
    return jax.tree.map(lambda v: jnp.sqrt(v / self.num_draws), self.variance)

  def squared_bias(self, reference: PyTree, reference_mean_variance=0.0) -> jax.Array:
    """||E g - reference||^2, summed over all coordinates, without Monte Carlo bias.

    The plug-in ||mean - reference||^2 overestimates it by the trace variance
    of ``mean`` (trace_variance / R) and, for a Monte Carlo reference, by the
    trace variance of the reference's own mean; both are subtracted.

    Args:
      reference: pytree like ``mean``.
      reference_mean_variance: trace variance of ``reference`` as an estimate
        (0 for an exact reference; ``ref_stats.trace_variance / ref_stats.num_draws``
        for a Monte Carlo one).
    """
    sq = _tree_sum(jax.tree.map(lambda m, r: jnp.sum((m - r) ** 2), self.mean, reference))
    return sq - self.trace_variance / self.num_draws - reference_mean_variance

  def mse(self, reference: PyTree, reference_mean_variance=0.0) -> jax.Array:
    """E||g - reference||^2 = trace_variance + squared bias."""
    return self.trace_variance + self.squared_bias(reference, reference_mean_variance)


def _tree_sum(tree) -> jax.Array:
  return sum(jax.tree.leaves(tree), jnp.zeros(()))


def gradient_stats(
  grad_fn: Callable[[jax.Array], PyTree],
  key: jax.Array,
  num_draws: int,
  *,
  chunk_size: int | None = None,
) -> GradientStats:
  """Mean and (trace) variance of ``grad_fn(key)`` over ``num_draws`` keys.

  Draws are vectorized with ``vmap`` in chunks of ``chunk_size`` (all at once
  by default) and chunk statistics are merged with Chan et al.'s parallel
  update, so memory is O(chunk_size * num_params) and the sums stay accurate
  in float32. Jit-able (``num_draws`` and ``chunk_size`` are static).

  Args:
    grad_fn: key -> gradient pytree (one estimator draw).
    key: PRNG key; draw r uses ``fold_in(key, r)``.
    num_draws: R >= 2.
    chunk_size: draws per vmapped chunk; must divide R.

  Returns:
    :class:`GradientStats`.
  """
  if not isinstance(num_draws, int) or num_draws < 2:
    raise ValueError(f"num_draws must be an int >= 2; got num_draws={num_draws!r}.")
  chunk_size = num_draws if chunk_size is None else chunk_size
  if not isinstance(chunk_size, int) or chunk_size < 1 or num_draws % chunk_size:
    raise ValueError(
      f"chunk_size must be a positive divisor of num_draws={num_draws}; got {chunk_size!r}."
    )

  def chunk_moments(index):
    keys = jax.vmap(lambda r: jax.random.fold_in(key, r))(
      index * chunk_size + jnp.arange(chunk_size)
    )
    grads = jax.vmap(grad_fn)(keys)
    mean = jax.tree.map(lambda g: jnp.mean(g, axis=0), grads)
    m2 = jax.tree.map(lambda g, m: jnp.sum((g - m) ** 2, axis=0), grads, mean)
    return mean, m2

  def merge(carry, index):
    count, mean, m2 = carry
    c_mean, c_m2 = chunk_moments(index)
    new_count = count + chunk_size
    frac = chunk_size / new_count
    delta = jax.tree.map(lambda a, b: b - a, mean, c_mean)
    mean = jax.tree.map(lambda a, d: a + d * frac, mean, delta)
    m2 = jax.tree.map(lambda a, b, d: a + b + d**2 * count * frac, m2, c_m2, delta)
    return (new_count, mean, m2), None

  mean0, m20 = chunk_moments(0)
  num_chunks = num_draws // chunk_size
  (_, mean, m2), _ = jax.lax.scan(
    merge, (jnp.asarray(chunk_size, jnp.float32), mean0, m20), jnp.arange(1, num_chunks)
  )
  variance = jax.tree.map(lambda v: v / (num_draws - 1), m2)
  trace = _tree_sum(jax.tree.map(jnp.sum, variance))
  return GradientStats(mean, variance, trace, num_draws)


def enumerate_one_hot(num_vars: int, arity: int, max_configurations: int = 2**20) -> jax.Array:
  """All ``arity**num_vars`` joint one-hot values, ``[arity**num_vars, num_vars, arity]``."""
  count = arity**num_vars
  if count > max_configurations:
    raise ValueError(
      f"enumerating {arity}^{num_vars} = {count} configurations exceeds"
      f" max_configurations={max_configurations}; use reference_gradient instead."
    )
  indices = np.array(list(itertools.product(range(arity), repeat=num_vars)), np.int32)
  return jax.nn.one_hot(indices.reshape(count, num_vars), arity)


def _check_two_argument_loss(loss_fn) -> None:
  try:
    inspect.signature(loss_fn).bind(None, None)
  except TypeError:
    raise TypeError(
      "loss_fn must take two arguments, (sample, logits): the one-hot sample [m, n] and the"
      " logits [m, n] (ignore the second if the loss does not use it: lambda d, _: f(d))."
    ) from None
  except ValueError:  # no signature to inspect (some builtins): let the call say
    pass


def exact_expectation(loss_fn: Callable[[jax.Array, jax.Array], jax.Array], logits: jax.Array):
  """E[loss_fn(D, logits)] for a two-argument loss, by enumerating every D ~ prod_j
  Cat(softmax(logits_j)).

  Args:
    loss_fn: (one-hot sample ``[m, n]``, logits ``[m, n]``) -> scalar; a loss of
      the sample alone is ``lambda d, _: f(d)``.
    logits: ``[m, n]`` logits of m independent categorical variables.

  Returns:
    The exact expectation (differentiable in ``logits``).

  Raises:
    TypeError: ``loss_fn`` does not take two arguments.
  """
  _check_two_argument_loss(loss_fn)
  configs = enumerate_one_hot(*logits.shape)
  log_p = jax.vmap(lambda d: jnp.sum(estimators.categorical_log_prob(logits, d)))(configs)
  losses = jax.vmap(lambda d: loss_fn(d, logits))(configs)
  return jnp.sum(jnp.exp(log_p) * losses)


def exact_gradient(
  loss_fn: Callable[[jax.Array, jax.Array], jax.Array], logits: jax.Array
) -> jax.Array:
  """d E[loss_fn(D, logits)] / d logits for a two-argument loss (sample, logits), by enumeration.

  See :func:`exact_expectation`; a loss of the sample alone is ``lambda d, _: f(d)``.
  """
  return jax.grad(lambda t: exact_expectation(loss_fn, t))(logits)


def reference_gradient(
  reinforce_grad_fn: Callable[[jax.Array], PyTree],
  key: jax.Array,
  num_draws: int,
  *,
  chunk_size: int | None = None,
) -> tuple[PyTree, PyTree]:
  """A high-sample REINFORCE estimate of the true gradient, with its standard error.

  The paper's method (appendix D.2) when enumeration is infeasible: the mean
  of many draws of the unbiased score-function estimator.

  Args:
    reinforce_grad_fn: key -> one REINFORCE gradient draw (e.g. the gradient
      of ``loss + score_function_surrogate(...)``).
    key, num_draws, chunk_size: as in :func:`gradient_stats`.

  Returns:
    ``(mean, standard_error)`` pytrees.
  """
  stats = gradient_stats(reinforce_grad_fn, key, num_draws, chunk_size=chunk_size)
  return stats.mean, stats.standard_error()


class VarianceDecomposition(NamedTuple):
  """Law of total variance for an estimator given its discrete sample D.

  Attributes:
    within: E[Var(g | D)] (trace), the part that K conditional samples divide.
    between: Var(E[g | D]) (trace), the variance of the Rao-Blackwellized GR.
    total: within + between.
  """

  within: float
  between: float
  total: float


def variance_decomposition(grads: np.ndarray, groups: np.ndarray) -> VarianceDecomposition:
  """Splits draws of an estimator (e.g. ST-GS) by the value of D they came with.

  Used for Proposition 3: for GR-MCK averaged over B i.i.d. draws,
  Var = within / (B K) + between / B.

  Args:
    grads: ``[R, P]`` flattened gradient draws.
    groups: ``[R]`` integer label of the discrete sample of each draw.

  Returns:
    :class:`VarianceDecomposition` (plug-in estimates, divisor R).
  """
  grads = np.asarray(grads, np.float64)
  groups = np.asarray(groups)
  mean = grads.mean(0)
  within = between = 0.0
  for value in np.unique(groups):
    sel = grads[groups == value]
    weight = len(sel) / len(grads)
    group_mean = sel.mean(0)
    within += weight * np.sum((sel - group_mean) ** 2) / len(sel)
    between += weight * np.sum((group_mean - mean) ** 2)
  return VarianceDecomposition(within, between, within + between)


def log10(x) -> float:
  """log10 of a positive scalar, NaN otherwise (for logging)."""
  x = float(x)
  return math.log10(x) if x > 0 else float("nan")


class Comparison(NamedTuple):
  """One estimator's gradient moments in :func:`compare`.

  Attributes:
    stats: its :class:`GradientStats` over the draws (``stats.mean``: the mean gradient pytree).
    trace_variance: the trace of its covariance.
    squared_bias: ``||E g - exact||^2`` (Monte Carlo bias removed), None without ``exact``.
    mse: trace variance + squared bias, None without ``exact``.
    loss_evaluations: evaluations of the loss per draw (the registry's).
  """

  stats: GradientStats
  trace_variance: float
  squared_bias: float | None
  mse: float | None
  loss_evaluations: int


def estimator_gradient(
  name: str,
  loss: Callable[[PyTree, jax.Array], jax.Array],
  params: PyTree,
  *,
  logits_fn: Callable[[PyTree], jax.Array] | None = None,
  tau: float = 1.0,
) -> Callable[[jax.Array], PyTree]:
  """key -> one draw of estimator ``name``'s gradient of the expected loss with respect to
  ``params``, whatever its family: a one-hot or relaxed sample's own backward pass, REINFORCE's
  score-function surrogate (no baseline), or a multi-sample estimator's surrogate (``loss`` is its
  ``f``).

  Args:
    name: a registry name (``estimators.names()``).
    loss: ``(params, sample) -> [...]``, one value per example (``logits.shape[:-2]``; a scalar
      for logits ``[m, n]``); the objective is their sum.
    params: the pytree differentiated (the logits themselves when ``logits_fn`` is None).
    logits_fn: ``params -> logits [..., m, n]`` (e.g. the user's encoder); None: params are the
      logits.
    tau: the temperature (ignored by estimators without one).
  """
  estimator = estimators.get(name)

  def objective(p, key):
    logits = p if logits_fn is None else logits_fn(p)
    if estimator.multi_sample:
      return jnp.sum(estimator(key, logits, tau=tau, f=lambda d: loss(p, d)))
    sample = estimator(key, logits, tau=tau)
    values = loss(p, sample)
    total = jnp.sum(values)
    if estimator.score_function:
      log_prob = jnp.sum(estimators.categorical_log_prob(logits, sample), axis=-1)
      total = total + jnp.sum(estimators.score_function_surrogate(log_prob, values, 0.0))
    return total

  return lambda key: jax.grad(objective)(params, key)


def compare(
  names,
  loss: Callable[[PyTree, jax.Array], jax.Array],
  params: PyTree,
  key: jax.Array,
  num_draws: int,
  *,
  logits_fn: Callable[[PyTree], jax.Array] | None = None,
  tau: float = 1.0,
  exact: PyTree | None = None,
  chunk_size: int | None = None,
) -> dict[str, Comparison]:
  r"""Each named estimator's mean gradient, trace variance and (given the exact gradient) squared
  bias and MSE on the user's own model, in one call:

  .. math::
    \mathrm{Var} = \mathrm{tr}\,\mathrm{Cov}[\hat g], \quad
    \mathrm{Bias}^2 = \|E\hat g - \nabla_\phi E[f]\|^2, \quad \mathrm{MSE} = \mathrm{Var} +
    \mathrm{Bias}^2,

  over ``num_draws`` draws (draw r of every estimator from ``fold_in(key, r)``, so they share
  their keys). ``exact``: e.g. :func:`exact_gradient` of ``lambda d, _: loss(params, d)`` when the
  logits are the parameters, or the ``reference_gradient`` of many REINFORCE draws.

  Args:
    names: registry names (``estimators.names()``).
    loss, params, logits_fn, tau: as in :func:`estimator_gradient`.
    key: a PRNG key.
    num_draws: R >= 2.
    exact: the gradient pytree to measure bias against (None: variance only).
    chunk_size: draws per vmapped chunk (a divisor of R; all at once by default).

  Returns:
    ``{name: Comparison}`` in the order of ``names``.
  """
  results = {}
  for name in names:
    draw = estimator_gradient(name, loss, params, logits_fn=logits_fn, tau=tau)
    stats = jax.jit(lambda k, draw=draw: gradient_stats(draw, k, num_draws, chunk_size=chunk_size))(
      key
    )
    squared_bias = None if exact is None else float(stats.squared_bias(exact))
    results[name] = Comparison(
      stats=stats,
      trace_variance=float(stats.trace_variance),
      squared_bias=squared_bias,
      mse=None if exact is None else float(stats.trace_variance) + squared_bias,
      loss_evaluations=estimators.get(name).loss_evaluations,
    )
  return results
