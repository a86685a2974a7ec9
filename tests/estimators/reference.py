"""Shared references of the estimator tests: exact values computed without the library.

Statistical tests use fixed keys. Tolerances are Z standard errors of the Monte
Carlo estimates (Z = 5 unless said otherwise): a correct implementation fails
such a check with probability below 1e-6 per coordinate, while the errors these
tests target (a wrong Jacobian, a wrong conditional distribution, a derivative
through G^k) move the mean by many standard errors.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gr_jax import estimators

Z = 5.0


N = 4


LOGITS = np.array([0.6, -0.4, 1.1, 0.0])


TAU = 0.5
# A loss whose derivative in D depends on D: f(D) = D^T A D, df/dD = (A + A^T) D.
A = np.array(
  [[1.0, -2.0, 0.5, 3.0], [0.0, 2.0, -1.0, 1.0], [2.0, 0.5, -3.0, 0.0], [1.0, 1.0, 0.0, -1.0]]
)


A_SYM = A + A.T


def quadratic_loss(sample):
  return sample @ jnp.asarray(A, sample.dtype) @ sample


def estimator_draws(estimator_fn, num_draws, seed=0, logits=LOGITS, **kwargs):
  """num_draws gradient draws of f(D) w.r.t. logits, and the sampled D."""

  def one(key):
    grad, sample = jax.grad(
      lambda theta: (lambda d: (quadratic_loss(d), d))(estimator_fn(key, theta, **kwargs)),
      has_aux=True,
    )(jnp.asarray(logits, jnp.float32))
    return grad, sample

  keys = jax.random.split(jax.random.key(seed), num_draws)
  grads, samples = jax.jit(jax.vmap(one))(keys)
  return np.asarray(grads, np.float64), np.asarray(samples).argmax(-1)


def softmax_np(x, axis=-1):
  x = x - x.max(axis=axis, keepdims=True)
  e = np.exp(x)
  return e / e.sum(axis=axis, keepdims=True)


def reference_stgs(num=4_000_000, seed=1234, tau=TAU):
  """E[ST-GS | D = i] p(i) by a float64 numpy Monte Carlo with unconditioned Gumbels.

  Independent of the implementation: plain Gumbels, grouped by their argmax.
  Returns (per-category sums / num, per-category second moments / num, counts).
  """
  rng = np.random.default_rng(seed)
  sums = np.zeros((N, N))
  sq_sums = np.zeros((N, N))
  counts = np.zeros(N)
  for _ in range(num // 500_000):
    x = LOGITS + rng.gumbel(size=(500_000, N))
    idx = x.argmax(-1)
    s = softmax_np(x / tau)
    g = A_SYM[idx]  # df/dD at D = onehot(idx)
    grad = s * (g - (g * s).sum(-1, keepdims=True)) / tau
    for i in range(N):
      sel = idx == i
      sums[i] += grad[sel].sum(0)
      sq_sums[i] += (grad[sel] ** 2).sum(0)
      counts[i] += sel.sum()
  return sums, sq_sums, counts


@functools.lru_cache(maxsize=None)
def stgs_reference():
  """Mean and standard error of ST-GS, overall and given D, from `reference_stgs`."""
  sums, sq_sums, counts = reference_stgs()
  total = counts.sum()
  mean = sums.sum(0) / total
  var = sq_sums.sum(0) / total - mean**2
  cond_mean = sums / counts[:, None]
  cond_var = sq_sums / counts[:, None] - cond_mean**2
  return dict(
    mean=mean,
    se=np.sqrt(var / total),
    cond_mean=cond_mean,
    cond_se=np.sqrt(cond_var / counts[:, None]),
  )


def assert_mean_close(draws, ref_mean, ref_se):
  mean = draws.mean(0)
  se = np.sqrt(draws.var(0) / len(draws) + ref_se**2)
  np.testing.assert_array_less(np.abs(mean - ref_mean), Z * se + 1e-6)


def trace_var(draws):
  """Trace of the covariance and its standard error (from the 4th moment)."""
  sq_dev = ((draws - draws.mean(0)) ** 2).sum(-1)
  return sq_dev.mean(), sq_dev.std() / np.sqrt(len(draws))


# Estimators whose mean is E[ST-GS] (GR-MCK's, conditionally on D as well).
STGS_MEAN_ESTIMATORS = [
  pytest.param(estimators.st_gumbel_softmax, {}, id="st_gs"),
  pytest.param(estimators.gumbel_rao, {"num_samples": 1}, id="gr_mc1"),
  pytest.param(estimators.gumbel_rao, {"num_samples": 10}, id="gr_mc10"),
  pytest.param(estimators.gumbel_rao, {"num_samples": 100}, id="gr_mc100"),
]


def softmax_jacobian(s, tau):
  return (np.diag(s) - np.outer(s, s)) / tau


def key_with_sample(logits, index, *, start=0):
  """A key whose Gumbel-max sample of `logits` (one variable) is `index`."""
  for seed in range(start, start + 1000):
    key = jax.random.key(seed)
    if int(np.argmax(estimators.st_gumbel_softmax(key, logits))) == index:
      return key
  raise AssertionError("no key found")


def vjp_at(estimator, key, logits, cotangent, tau):
  sample, vjp = jax.vjp(lambda t: estimator(key, t, tau=tau), logits)
  return np.asarray(sample), np.asarray(vjp(cotangent)[0], np.float64)
