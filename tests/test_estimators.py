"""Tests of gr_jax.estimators against exact values computed independently.

Statistical tests use fixed keys. Tolerances are Z standard errors of the Monte
Carlo estimates (Z = 5 unless said otherwise): a correct implementation fails
such a check with probability below 1e-6 per coordinate, while the errors these
tests target (a wrong Jacobian, a wrong conditional distribution, a derivative
through G^k) move the mean by many standard errors.
"""

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

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


def _loss(sample):
  return sample @ jnp.asarray(A, sample.dtype) @ sample


def _estimator_draws(estimator_fn, num_draws, seed=0, logits=LOGITS, **kwargs):
  """num_draws gradient draws of f(D) w.r.t. logits, and the sampled D."""

  def one(key):
    grad, sample = jax.grad(
        lambda theta: (lambda d: (_loss(d), d))(estimator_fn(key, theta, **kwargs)),
        has_aux=True,
    )(jnp.asarray(logits, jnp.float32))
    return grad, sample

  keys = jax.random.split(jax.random.key(seed), num_draws)
  grads, samples = jax.jit(jax.vmap(one))(keys)
  return np.asarray(grads, np.float64), np.asarray(samples).argmax(-1)


def _softmax_np(x, axis=-1):
  x = x - x.max(axis=axis, keepdims=True)
  e = np.exp(x)
  return e / e.sum(axis=axis, keepdims=True)


def _reference_stgs(num=4_000_000, seed=1234, tau=TAU):
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
    s = _softmax_np(x / tau)
    g = A_SYM[idx]  # df/dD at D = onehot(idx)
    grad = s * (g - (g * s).sum(-1, keepdims=True)) / tau
    for i in range(N):
      sel = idx == i
      sums[i] += grad[sel].sum(0)
      sq_sums[i] += (grad[sel] ** 2).sum(0)
      counts[i] += sel.sum()
  return sums, sq_sums, counts


@functools.lru_cache(maxsize=None)
def _reference():
  """Mean and standard error of ST-GS, overall and given D, from `_reference_stgs`."""
  sums, sq_sums, counts = _reference_stgs()
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


def _assert_mean_close(draws, ref_mean, ref_se):
  mean = draws.mean(0)
  se = np.sqrt(draws.var(0) / len(draws) + ref_se**2)
  np.testing.assert_array_less(np.abs(mean - ref_mean), Z * se + 1e-6)


def _trace_var(draws):
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


# The mean gradient equals E[ST-GS], computed in float64 without the library.
@pytest.mark.parametrize("fn, kwargs", STGS_MEAN_ESTIMATORS)
def test_mean_equals_exact_stgs_expectation(fn, kwargs):
  ref = _reference()
  draws, _ = _estimator_draws(fn, 20_000, tau=TAU, **kwargs)
  _assert_mean_close(draws, ref["mean"], ref["se"])


def test_gr_conditional_mean_is_stgs_conditional_mean():
  """Rao-Blackwellization: E[GR-MCK | D] = E[ST-GS | D] for every D."""
  ref = _reference()
  draws, idx = _estimator_draws(estimators.gumbel_rao, 20_000, tau=TAU, num_samples=100)
  for i in range(N):
    sel = draws[idx == i]
    assert len(sel) > 500
    _assert_mean_close(sel, ref["cond_mean"][i], ref["cond_se"][i])


def test_total_derivative_through_g_would_fail():
  """The check above can fail: a mean off by a fixed amount is rejected."""
  ref = _reference()
  draws, _ = _estimator_draws(estimators.gumbel_rao, 20_000, tau=TAU, num_samples=100)
  with pytest.raises(AssertionError):
    _assert_mean_close(draws + 0.1 * np.abs(ref["mean"]).max(), ref["mean"], ref["se"])


def test_variance_falls_with_k_and_gr_mc1_matches_stgs():
  draws = {
      "st_gs": _estimator_draws(estimators.st_gumbel_softmax, 20_000, seed=1, tau=TAU)[0],
  }
  for k in (1, 10, 100):
    draws[k] = _estimator_draws(
        estimators.gumbel_rao, 20_000, seed=2 + k, tau=TAU, num_samples=k
    )[0]
  var = {name: _trace_var(d) for name, d in draws.items()}
  v_stgs, se_stgs = var["st_gs"]
  v1, se1 = var[1]
  # K = 1 has exactly ST-GS's distribution: equal trace variance within Z SE.
  assert abs(v1 - v_stgs) < Z * np.hypot(se1, se_stgs)
  # Strictly lower (by more than Z SE) for K = 10 than ST-GS, and again for 100.
  v10, se10 = var[10]
  v100, se100 = var[100]
  assert v10 + Z * np.hypot(se10, se_stgs) < v_stgs
  assert v100 + Z * np.hypot(se100, se10) < v10



@pytest.mark.parametrize("scale", [1.0, 50.0])
def test_conditional_gumbel_argmax_equals_sample(scale):
  key = jax.random.key(3)
  logits = scale * jax.random.normal(key, (64, 7))
  sample = jax.nn.one_hot(jax.random.categorical(key, logits), 7)
  g = estimators.conditional_gumbel(jax.random.key(4), logits, sample, 50)
  assert g.shape == (50, 64, 7)
  np.testing.assert_array_equal(
      np.asarray(jnp.argmax(g, -1)), np.broadcast_to(np.asarray(sample.argmax(-1)), (50, 64))
  )
  assert np.isfinite(np.asarray(g)).all()


def test_conditional_gumbel_max_is_gumbel_log_z():
  logits = jnp.asarray(LOGITS, jnp.float32)
  log_z = float(jax.nn.logsumexp(logits))
  for i in range(N):
    g = estimators.conditional_gumbel(
        jax.random.key(10 + i), logits, jax.nn.one_hot(i, N), 20_000
    )
    top = np.asarray(g[:, i], np.float64)
    # Gumbel(loc=logZ) CDF; p-value threshold 1e-4 per category.
    p = stats.kstest(top, stats.gumbel_r(loc=log_z).cdf).pvalue
    assert p > 1e-4, (i, p)


def test_conditional_gumbel_coordinates_match_rejection_sampling():
  rng = np.random.default_rng(0)
  x = LOGITS + rng.gumbel(size=(400_000, N))
  idx = x.argmax(-1)
  logits = jnp.asarray(LOGITS, jnp.float32)
  for i in range(N):
    accepted = x[idx == i]
    g = np.asarray(
        estimators.conditional_gumbel(jax.random.key(20 + i), logits, jax.nn.one_hot(i, N), 20_000)
    )
    for j in range(N):
      # Two-sample KS test, threshold 1e-4 per (i, j) pair (16 pairs).
      p = stats.ks_2samp(g[:, j], accepted[:, j]).pvalue
      assert p > 1e-4, (i, j, p)


@pytest.mark.parametrize("name", ["st", "st_gs", "gr_mc10", "reinforce", "gs"])
def test_sample_frequencies_match_softmax(name):
  estimator = estimators.get(name)
  logits = jnp.asarray(LOGITS, jnp.float32)
  keys = jax.random.split(jax.random.key(7), 40_000)
  samples = np.asarray(jax.vmap(lambda k: estimator(k, logits, tau=0.5))(keys))
  if estimator.relaxed:
    assert np.all((samples >= 0) & (samples <= 1))
    assert np.mean(samples.max(-1) < 1) > 0.5  # relaxed, not one-hot (float32 may saturate)
    np.testing.assert_allclose(samples.sum(-1), 1.0, atol=1e-5)
    samples = np.eye(N)[samples.argmax(-1)]  # argmax of GS is the Gumbel-max sample
  else:
    assert set(np.unique(samples)) == {0.0, 1.0}
    np.testing.assert_array_equal(samples.sum(-1), 1.0)
  counts = samples.sum(0)
  expected = _softmax_np(LOGITS) * len(samples)
  assert stats.chisquare(counts, expected).pvalue > 1e-4


def _softmax_jacobian(s, tau):
  return (np.diag(s) - np.outer(s, s)) / tau


def test_straight_through_gradient_is_closed_form():
  w = np.array([0.3, -1.2, 2.0, 0.7])
  for tau in (0.1, 1.0, 3.0):
    grad = jax.grad(
        lambda t: jnp.sum(jnp.asarray(w, jnp.float32) * estimators.straight_through(jax.random.key(0), t, tau=tau))
    )(jnp.asarray(LOGITS, jnp.float32))
    expected = _softmax_jacobian(_softmax_np(LOGITS / tau), tau).T @ w
    np.testing.assert_allclose(grad, expected, rtol=1e-5, atol=1e-6)


def test_gumbel_softmax_and_st_gs_gradients_are_closed_form():
  w = np.array([0.3, -1.2, 2.0, 0.7])
  logits = jnp.asarray(LOGITS, jnp.float32)
  for seed, tau in itertools.product(range(3), (0.2, 1.0)):
    key = jax.random.key(seed)
    relaxed = np.asarray(estimators.gumbel_softmax(key, logits, tau=tau), np.float64)
    expected = _softmax_jacobian(relaxed, tau).T @ w
    grad_gs = jax.grad(lambda t: jnp.sum(w * estimators.gumbel_softmax(key, t, tau=tau)))(logits)
    np.testing.assert_allclose(grad_gs, expected, rtol=1e-4, atol=1e-5)
    sample = estimators.st_gumbel_softmax(key, logits, tau=tau)
    np.testing.assert_array_equal(sample, np.eye(N)[relaxed.argmax()])
    grad_stgs = jax.grad(lambda t: jnp.sum(w * estimators.st_gumbel_softmax(key, t, tau=tau)))(logits)
    np.testing.assert_allclose(grad_stgs, expected, rtol=1e-4, atol=1e-5)


def test_reinforce_is_unbiased_against_enumeration():
  """Mean of the score-function gradient with a baseline equals the exact gradient."""
  p = _softmax_np(LOGITS)
  losses = np.array([A[i, i] for i in range(N)])
  exact = p * (losses - p @ losses)  # d/dtheta sum_i p_i f(e_i)
  baseline = 0.5

  def one(key):
    def surrogate(theta):
      d = estimators.reinforce(key, theta)
      loss = _loss(d)
      log_prob = estimators.categorical_log_prob(theta, d)
      return loss + estimators.score_function_surrogate(log_prob, loss, baseline)

    return jax.grad(surrogate)(jnp.asarray(LOGITS, jnp.float32))

  draws = np.asarray(jax.jit(jax.vmap(one))(jax.random.split(jax.random.key(5), 40_000)), np.float64)
  _assert_mean_close(draws, exact, np.zeros(N))


def test_categorical_log_prob_and_masks():
  logits = jnp.array([0.0, -jnp.inf, 1.0])
  d = jnp.array([0.0, 0.0, 1.0])
  expected = 1.0 - np.log(1.0 + np.e)
  np.testing.assert_allclose(estimators.categorical_log_prob(logits, d), expected, rtol=1e-6)
  grad = jax.grad(lambda t: estimators.categorical_log_prob(t, d))(logits)
  assert np.isfinite(np.asarray(grad)).all() and grad[1] == 0.0


def test_running_mean_baseline():
  baseline = estimators.RunningMeanBaseline(decay=0.5)
  state = baseline.init()
  update = jax.jit(baseline.update)
  state = update(state, jnp.array([2.0, 4.0]))
  assert float(state.mean) == 3.0  # the first update takes the batch mean
  state = update(state, jnp.array([5.0]))
  assert float(state.mean) == 4.0 and int(state.count) == 2
  with pytest.raises(ValueError, match="decay"):
    estimators.RunningMeanBaseline(decay=1.0)


ALL_NAMES = [
    "st", "st_gs", "gs", "gr_mc1", "gr_mc10", "gr_mc1000", "gr_qmc10", "zgr", "reinmax", "gst",
    "gst_p", "reinforce",
]


@pytest.mark.parametrize("name", ALL_NAMES)
@pytest.mark.parametrize("tau", [0.01, 1.0, 10.0])
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_numerics_large_logits_masks_low_tau(name, tau, dtype):
  estimator = estimators.get(name)
  key = jax.random.key(11)
  logits = 50.0 * jax.random.normal(key, (8, 5, 6))
  mask = jax.random.bernoulli(jax.random.key(12), 0.4, logits.shape).at[..., 0].set(False)
  logits = jnp.where(mask, -jnp.inf, logits).astype(dtype)
  cotangent = jax.random.normal(jax.random.key(13), logits.shape)

  def f(theta):
    return jnp.sum(cotangent * estimator(jax.random.key(14), theta, tau=tau).astype(jnp.float32))

  sample = estimator(jax.random.key(14), logits, tau=tau)
  grad = jax.grad(f)(logits)
  assert sample.dtype == dtype and grad.dtype == dtype
  assert np.isfinite(np.asarray(sample, np.float32)).all()
  assert np.isfinite(np.asarray(grad, np.float32)).all()
  np.testing.assert_array_equal(np.asarray(grad, np.float32)[np.asarray(mask)], 0.0)
  np.testing.assert_array_equal(np.asarray(sample, np.float32)[np.asarray(mask)], 0.0)
  if not estimator.relaxed:
    values = np.asarray(sample, np.float32)
    assert set(np.unique(values)) <= {0.0, 1.0}
    np.testing.assert_array_equal(values.sum(-1), 1.0)


def test_masked_conditional_gumbel_is_minus_inf():
  logits = jnp.array([1.0, -jnp.inf, 0.0])
  g = estimators.conditional_gumbel(jax.random.key(0), logits, jnp.array([0.0, 0.0, 1.0]), 10)
  assert np.all(np.isneginf(np.asarray(g[:, 1])))
  assert np.all(np.isfinite(np.asarray(g[:, [0, 2]])))


def test_chunked_backward_equals_unchunked_distribution(monkeypatch):
  """Chunking K changes which random numbers are used but not the estimator.

  With K = 7 split into chunks of 3, 3 and 1, the mean over draws must still
  equal the exact ST-GS expectation (and exactly 7 samples are averaged: the
  gradient of a constant-cotangent loss is exactly zero either way).
  """
  monkeypatch.setitem(estimators.CHUNK_ELEMENTS, jax.default_backend(), 3 * N)
  ref_sums, ref_sq, counts = _reference_stgs(num=2_000_000, seed=99)
  total = counts.sum()
  mean = ref_sums.sum(0) / total
  se = np.sqrt((ref_sq.sum(0) / total - mean**2) / total)
  draws, _ = _estimator_draws(estimators.gumbel_rao, 20_000, seed=42, tau=TAU, num_samples=7)
  _assert_mean_close(draws, mean, se)
  # softmax Jacobians have zero row sums: a constant cotangent gives zero grad.
  g = jax.grad(lambda t: jnp.sum(estimators.gumbel_rao(jax.random.key(0), t, num_samples=7)))(
      jnp.asarray(LOGITS, jnp.float32)
  )
  np.testing.assert_allclose(g, 0.0, atol=1e-6)


def test_jit_vmap_grad_compose_without_recompiling():
  traces = []

  @jax.jit
  def step(key, logits):
    traces.append(None)

    def loss(theta):
      keys = jax.random.split(key, theta.shape[0])
      samples = jax.vmap(lambda k, t: estimators.gumbel_rao(k, t, tau=0.5, num_samples=20))(
          keys, theta
      )
      return jnp.sum(samples * jnp.arange(theta.shape[-1]))

    return jax.grad(loss)(logits)

  logits = jax.random.normal(jax.random.key(0), (6, 3, 5))
  g1 = step(jax.random.key(1), logits)
  g2 = step(jax.random.key(2), logits + 1.0)
  assert len(traces) == 1
  assert g1.shape == logits.shape and not np.allclose(g1, g2)
  # Old-style uint32 keys work too.
  step(jax.random.PRNGKey(3), logits)



@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"tau": 0.0}, "tau"),
        ({"tau": -1.0}, "tau"),
        ({"tau": float("inf")}, "tau"),
        ({"num_samples": 0}, "num_samples"),
        ({"num_samples": 2.5}, "num_samples"),
        ({"num_samples": True}, "num_samples"),
    ],
)
def test_gumbel_rao_bad_arguments(kwargs, field):
  with pytest.raises(ValueError, match=field):
    estimators.gumbel_rao(jax.random.key(0), jnp.zeros(3), **kwargs)


@pytest.mark.parametrize("name", ["st", "st_gs", "gs", "gr_mc5"])
def test_bad_tau_and_integer_logits(name):
  est = estimators.get(name)
  with pytest.raises(ValueError, match="tau"):
    est(jax.random.key(0), jnp.zeros(3), tau=0.0)
  with pytest.raises(ValueError, match="logits"):
    est(jax.random.key(0), jnp.zeros(3, jnp.int32), tau=1.0)


def test_errors_are_raised_at_trace_time_under_jit():
  with pytest.raises(ValueError, match="tau"):
    jax.jit(lambda t: estimators.st_gumbel_softmax(jax.random.key(0), t, tau=-0.5))(jnp.zeros(3))


def test_sample_shape_mismatch():
  with pytest.raises(ValueError, match="sample"):
    estimators.conditional_gumbel(jax.random.key(0), jnp.zeros((2, 3)), jnp.zeros(3), 4)
  with pytest.raises(ValueError, match="sample"):
    estimators.categorical_log_prob(jnp.zeros((2, 3)), jnp.zeros((2, 4)))


def test_get_names():
  assert estimators.get("gr_mc100").options == (("num_samples", 100),)
  assert estimators.get("gr_qmc64").fn is estimators.gumbel_rao_qmc
  assert estimators.get("gst_p").options == (("gap", "p"),)
  assert estimators.get("gs").relaxed and estimators.get("reinforce").score_function
  for bad in ("gr_mc0", "gr_mc", "grmc10", "ST", "gumbel"):
    with pytest.raises(ValueError, match="valid names: st, st_gs, gs, gr_mc.*gr_qmc.*zgr"):
      estimators.get(bad)


# ---------------------------------------------------------------------------
# Several variables at once (issue 8.3): a fixed random linear upstream loss
# f(D) = sum(W * D) on logits (3, 4), so that a mix-up between variables (their
# order, their cotangents) moves the means by many standard errors.
# ---------------------------------------------------------------------------

MULTI_LOGITS = np.array([[0.9, -0.3, 0.2, -1.1], [-0.5, 1.4, 0.1, 0.3], [0.0, -0.8, -2.0, 1.0]])
MULTI_W = np.random.default_rng(17).normal(size=MULTI_LOGITS.shape) * np.array([[1.0], [3.0], [-2.0]])


@functools.lru_cache(maxsize=None)
def _multi_reference(num=2_000_000, seed=4321):
  """E[ST-GS] overall and per (variable, D_v), float64 numpy, unconditioned Gumbels.

  Returns (mean [3, 4], se [3, 4], cond_mean [3, 4, 4], cond_se [3, 4, 4]) where
  cond_*[v, i] is the conditional moment given D_v = i.
  """
  rng = np.random.default_rng(seed)
  num_vars, n = MULTI_LOGITS.shape
  sums, sq_sums = np.zeros((num_vars, n, n)), np.zeros((num_vars, n, n))
  counts = np.zeros((num_vars, n))
  for _ in range(num // 250_000):
    x = MULTI_LOGITS + rng.gumbel(size=(250_000, num_vars, n))
    idx = x.argmax(-1)
    s = _softmax_np(x / TAU)
    grad = s * (MULTI_W - (MULTI_W * s).sum(-1, keepdims=True)) / TAU
    for v, i in itertools.product(range(num_vars), range(n)):
      sel = idx[:, v] == i
      sums[v, i] += grad[sel, v].sum(0)
      sq_sums[v, i] += (grad[sel, v] ** 2).sum(0)
      counts[v, i] += sel.sum()
  mean = sums.sum(1) / num
  se = np.sqrt((sq_sums.sum(1) / num - mean**2) / num)
  cond_mean = sums / counts[..., None]
  cond_se = np.sqrt((sq_sums / counts[..., None] - cond_mean**2) / counts[..., None])
  return mean, se, cond_mean, cond_se


def _multi_draws(fn, num_draws, seed, **kwargs):
  """Gradient draws [R, 3, 4] of sum(W * D) and the sampled indices [R, 3]."""

  def one(key):
    def loss(theta):
      sample = fn(key, theta, **kwargs)
      return jnp.sum(jnp.asarray(MULTI_W, jnp.float32) * sample), sample

    return jax.grad(loss, has_aux=True)(jnp.asarray(MULTI_LOGITS, jnp.float32))

  grads, samples = jax.jit(jax.vmap(one))(jax.random.split(jax.random.key(seed), num_draws))
  return np.asarray(grads, np.float64), np.asarray(samples).argmax(-1)


@pytest.mark.parametrize(
    "fn, kwargs",
    [
        *STGS_MEAN_ESTIMATORS,
        pytest.param(estimators.gumbel_rao_qmc, {"num_samples": 1}, id="gr_qmc1"),
        pytest.param(estimators.gumbel_rao_qmc, {"num_samples": 10}, id="gr_qmc10"),
        pytest.param(estimators.gumbel_rao_qmc, {"num_samples": 100, "tent": False}, id="gr_qmc100_no_tent"),
        pytest.param(estimators.gumbel_rao_qmc, {"num_samples": 100}, id="gr_qmc100"),
    ],
)
def test_multi_variable_mean_equals_exact_stgs_expectation(fn, kwargs):
  mean, se, _, _ = _multi_reference()
  draws, _ = _multi_draws(fn, 20_000, seed=31, tau=TAU, **kwargs)
  _assert_mean_close(draws, mean, se)


@pytest.mark.parametrize("fn", [estimators.gumbel_rao, estimators.gumbel_rao_qmc])
def test_multi_variable_conditional_mean_per_variable_is_stgs(fn):
  """Rao-Blackwellization per variable: E[GR_v | D_v = i] = E[ST-GS_v | D_v = i]."""
  _, _, cond_mean, cond_se = _multi_reference()
  draws, idx = _multi_draws(fn, 20_000, seed=32, tau=TAU, num_samples=100)
  for v, i in itertools.product(range(MULTI_LOGITS.shape[0]), range(MULTI_LOGITS.shape[1])):
    sel = draws[idx[:, v] == i, v]
    if len(sel) < 200:  # too rare a (v, i) to say anything at Z = 5
      continue
    _assert_mean_close(sel, cond_mean[v, i], cond_se[v, i])


def test_multi_variable_swapped_variables_would_fail():
  """The check can fail: GR's draws with the variables' rows permuted are rejected."""
  mean, se, _, _ = _multi_reference()
  draws, _ = _multi_draws(estimators.gumbel_rao, 20_000, seed=31, tau=TAU, num_samples=10)
  with pytest.raises(AssertionError):
    _assert_mean_close(draws[:, ::-1], mean, se)


def _vmapped_reference_grad(key, logits, sample, cotangent, tau, num_samples):
  """GR's gradient the obvious way: jax.vmap over K of the softmax VJP at conditional samples."""
  points = estimators.conditional_gumbel(key, logits, sample, num_samples)

  def vjp_at(point):
    return jax.vjp(lambda x: jax.nn.softmax(x / tau, axis=-1), point)[1](cotangent)[0]

  per_sample = jax.vmap(vjp_at)(points)
  return per_sample.mean(0), per_sample.std(0) / np.sqrt(num_samples)


@pytest.mark.parametrize("tau", [0.1, 0.5, 2.0])
def test_fast_backward_equals_vmapped_reference(tau):
  """At a fixed D, GR-MCK's average Jacobian agrees with the vmap-over-K reference.

  Both are unbiased Monte Carlo estimates of E[J_tau | D]^T g at K = 20,000
  with independent random numbers: they must agree within Z standard errors
  (the reference's per-sample spread, sqrt 2 for the two estimates).
  """
  logits = jax.random.normal(jax.random.key(50), (3, 5, 4)) * 2.0
  cotangent = jax.random.normal(jax.random.key(51), logits.shape)
  key = jax.random.key(52)
  num_samples = 20_000
  sample, vjp = jax.vjp(lambda t: estimators.gumbel_rao(key, t, tau=tau, num_samples=num_samples), logits)
  fast = np.asarray(vjp(cotangent)[0])
  reference, se = _vmapped_reference_grad(jax.random.key(53), logits, sample, cotangent, tau, num_samples)
  np.testing.assert_array_less(np.abs(fast - np.asarray(reference)), Z * np.sqrt(2) * np.asarray(se) + 1e-6)


# ---------------------------------------------------------------------------
# Large temperatures (issue 8.1): the backward pass is exact for every tau.
# ---------------------------------------------------------------------------


def _eq8_reference(logits, cotangent, tau, num=1_000_000, seed=8):
  """E[J_tau(theta + G) | D = 0]^T g from eq. 8 in float64 numpy, with its standard error."""
  rng = np.random.default_rng(seed)
  exps = rng.exponential(size=(num, len(logits)))
  log_z = np.logaddexp.reduce(logits)
  # eq. 8, j != i: -log(E_j e^{-theta_j} + E_i e^{-logZ}); j = i: logZ - log E_i.
  points = -np.logaddexp(np.log(exps) - logits, np.log(exps[:, :1]) - log_z)
  points[:, 0] = log_z - np.log(exps[:, 0])
  s = _softmax_np(points / tau)
  vjp = s * (cotangent - (cotangent * s).sum(-1, keepdims=True)) / tau
  return vjp.mean(0), vjp.std(0) / np.sqrt(num)


@pytest.mark.parametrize("tau", [5.0, 10.0, 100.0])
@pytest.mark.parametrize("x64", [False, True])
def test_gumbel_rao_exact_at_large_tau(tau, x64):
  """Against eq. 8 in float64 with category log-odds down to -200, where
  exp(logZ - logits) overflows float32 (a cap there biased GR by 3% at tau = 10
  and 44% at tau = 100). D = 0 with probability 1 - 2e-22. The tolerance is
  Z standard errors of both Monte Carlo means.
  """
  logits_np = np.array([0.0, -50.0, -100.0, -200.0])
  cotangent_np = np.array([0.0, 1.0, 2.0, 3.0])
  num_samples = 200_000
  with jax.enable_x64(x64):
    dtype = jnp.float64 if x64 else jnp.float32
    logits = jnp.asarray(logits_np, dtype)
    key = jax.random.key(9)
    sample, vjp = jax.vjp(lambda t: estimators.gumbel_rao(key, t, tau=tau, num_samples=num_samples), logits)
    grad = np.asarray(vjp(jnp.asarray(cotangent_np, dtype))[0], np.float64)
    # The per-sample spread of the fast path, from the reference's own draws.
  assert int(np.argmax(sample)) == 0
  expected, se = _eq8_reference(logits_np, cotangent_np, tau)
  per_sample_sd = se * np.sqrt(1_000_000)
  tolerance = Z * np.hypot(se, per_sample_sd / np.sqrt(num_samples)) + 1e-7
  np.testing.assert_array_less(np.abs(grad - expected), tolerance)


def test_gumbel_rao_mean_equals_stgs_at_tau_100():
  """logits [0, -100, -200], g = [0, 1, 2], tau = 100: the two means must be equal."""
  logits_np, w = np.array([0.0, -100.0, -200.0]), np.array([0.0, 1.0, 2.0])
  x = logits_np + np.random.default_rng(3).gumbel(size=(1_000_000, 3))
  s = _softmax_np(x / 100.0)
  stgs = s * (w - (w * s).sum(-1, keepdims=True)) / 100.0
  ref_mean, ref_se = stgs.mean(0), stgs.std(0) / np.sqrt(len(stgs))

  def one(key):
    return jax.grad(lambda t: jnp.sum(w * estimators.gumbel_rao(key, t, tau=100.0, num_samples=100)))(
        jnp.asarray(logits_np, jnp.float32)
    )

  draws = np.asarray(jax.jit(jax.vmap(one))(jax.random.split(jax.random.key(4), 20_000)), np.float64)
  _assert_mean_close(draws, ref_mean, ref_se)


# ---------------------------------------------------------------------------
# Memory under vmap (issue 8.2).
# ---------------------------------------------------------------------------


def _temp_mib(fn, *args):
  stats = jax.jit(fn).lower(*args).compile().memory_analysis()
  return stats.temp_size_in_bytes / 2**20


def test_vmapped_gumbel_rao_memory_matches_whole_array():
  """256 rows of 16 with K = 10^4: vmapping over rows (once or twice) must not
  multiply the chunk by the batch. Before the custom batching rule the vmapped
  case compiled to 644 MiB of temporaries against 25 MiB whole."""
  logits = jax.random.normal(jax.random.key(0), (256, 16))
  key = jax.random.key(1)

  def row_grad(k, row):
    return jax.grad(lambda t: jnp.sum(jnp.arange(16.0) * estimators.gumbel_rao(k, t, num_samples=10_000)))(row)

  whole = _temp_mib(lambda t: jax.grad(lambda t: jnp.sum(
      jnp.arange(16.0) * estimators.gumbel_rao(key, t, num_samples=10_000)))(t), logits)
  keys = jax.random.split(key, 256)
  vmapped = _temp_mib(jax.vmap(row_grad), keys, logits)
  nested = _temp_mib(jax.vmap(jax.vmap(row_grad)), keys.reshape(16, 16), logits.reshape(16, 16, 16))
  shared_key = _temp_mib(jax.vmap(row_grad, in_axes=(None, 0)), key, logits)
  bound = 1.5 * whole + 2.0
  # A few float32 chunk buffers: 4 MiB each with CPU's 2**20-element chunks.
  assert whole < 12 * estimators.max_chunk_elements() * 4 / 2**20, whole
  assert vmapped < bound and nested < bound and shared_key < bound, (whole, vmapped, nested, shared_key)


def test_vmapped_gumbel_rao_equals_per_row_calls():
  """The batching rule changes nothing but memory: each vmapped row equals its own call."""
  logits = jax.random.normal(jax.random.key(0), (6, 3, 5))
  cotangent = jax.random.normal(jax.random.key(1), logits.shape)
  keys = jax.random.split(jax.random.key(2), 6)

  def grad_row(k, t, g):
    return jax.vjp(lambda t: estimators.gumbel_rao(k, t, tau=0.7, num_samples=300), t)[1](g)[0]

  vmapped = jax.jit(jax.vmap(grad_row))(keys, logits, cotangent)
  for r in range(6):
    np.testing.assert_allclose(vmapped[r], grad_row(keys[r], logits[r], cotangent[r]), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------
# Second derivatives (issue 8.4).
# ---------------------------------------------------------------------------


def test_gumbel_rao_second_derivatives_raise():
  logits = jnp.asarray(LOGITS, jnp.float32)

  def first(t):
    return jax.grad(lambda t: _loss(estimators.gumbel_rao(jax.random.key(0), t, num_samples=5)))(t)

  with pytest.raises(ValueError, match="first derivatives only"):
    jax.grad(lambda t: jnp.sum(first(t)))(logits)
  with pytest.raises(ValueError, match="first derivatives only"):
    jax.hessian(lambda t: _loss(estimators.gumbel_rao(jax.random.key(0), t, num_samples=5)))(logits)


def test_stgs_second_derivative_is_hessian_of_fixed_g_surrogate():
  """d/dtheta of v . grad_STGS equals the finite-difference derivative, at fixed G,
  of the numpy function theta -> v . J_tau(theta + G)^T w."""
  w = np.array([0.3, -1.2, 2.0, 0.7])
  v = np.array([1.0, 0.5, -0.4, 2.0])
  key = jax.random.key(3)
  logits = jnp.asarray(LOGITS, jnp.float64 if False else jnp.float32)

  def directional(t):
    grad = jax.grad(lambda t: jnp.sum(w * estimators.st_gumbel_softmax(key, t, tau=TAU)))(t)
    return jnp.sum(v * grad)

  second = np.asarray(jax.grad(directional)(logits), np.float64)
  gumbels = np.asarray(jax.random.gumbel(key, (N,)), np.float64)

  def directional_np(theta):
    s = _softmax_np((theta + gumbels) / TAU)
    return v @ (s * (w - w @ s) / TAU)

  h = 1e-5
  expected = np.array([
      (directional_np(LOGITS + h * e) - directional_np(LOGITS - h * e)) / (2 * h) for e in np.eye(N)
  ])
  np.testing.assert_allclose(second, expected, rtol=2e-3, atol=2e-4)


# ---------------------------------------------------------------------------
# Equal names, equal estimators (issue 8.5).
# ---------------------------------------------------------------------------


def test_get_is_stable_and_jit_static_does_not_retrace():
  assert estimators.get("gr_mc10") == estimators.get("gr_mc10")
  assert hash(estimators.get("gr_mc10")) == hash(estimators.get("gr_mc10"))
  assert estimators.get("gr_mc10") != estimators.get("gr_mc11")
  traces = []

  @functools.partial(jax.jit, static_argnums=0)
  def grad(estimator, logits):
    traces.append(None)
    return jax.grad(lambda t: _loss(estimator(jax.random.key(0), t)))(logits)

  for _ in range(3):
    grad(estimators.get("gr_mc10"), jnp.asarray(LOGITS, jnp.float32))
  assert len(traces) == 1


# ---------------------------------------------------------------------------
# Array-valued temperatures (issue 8.6).
# ---------------------------------------------------------------------------

ONE_HOT_OR_RELAXED = [
    "st", "st_gs", "gs", "gr_mc20", "gr_qmc20", "zgr", "reinmax", "gst", "gst_p", "reinforce",
]


@pytest.mark.parametrize("name", ONE_HOT_OR_RELAXED)
def test_per_variable_tau_equals_scalar_tau_row_by_row(name):
  estimator = estimators.get(name)
  logits = jax.random.normal(jax.random.key(0), (4, 3, 5))
  cotangent = jax.random.normal(jax.random.key(1), logits.shape)
  taus = jnp.array([0.2, 0.5, 1.0, 3.0]).reshape(4, 1, 1)

  def value_and_grad(tau):
    sample, vjp = jax.vjp(lambda t: estimator(jax.random.key(2), t, tau=tau), logits)
    return sample, vjp(cotangent)[0]

  sample, grad = jax.jit(value_and_grad)(taus)
  for r in range(4):
    sample_r, grad_r = value_and_grad(float(taus[r, 0, 0]))
    np.testing.assert_allclose(sample[r], sample_r[r], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(grad[r], grad_r[r], rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name", ONE_HOT_OR_RELAXED)
@pytest.mark.parametrize(
    "tau, message",
    [
        (np.array([0.5, -0.1, 1.0, 1.0]).reshape(4, 1, 1), "finite and > 0"),
        (np.array([0.5, np.nan, 1.0, 1.0]).reshape(4, 1, 1), "finite and > 0"),
        (np.full((4, 1, 1), np.inf), "finite and > 0"),
        (np.ones(4), r"broadcastable to logits.shape\[:-1\] \+ \(1,\) = \(4, 3, 1\)"),
        (np.ones((4, 3, 5)), "one temperature per variable"),
        ("0.5", "real number"),
    ],
)
def test_bad_array_tau_is_rejected(name, tau, message):
  with pytest.raises(ValueError, match=message):
    estimators.get(name)(jax.random.key(0), jnp.zeros((4, 3, 5)), tau=tau)


# ---------------------------------------------------------------------------
# Degenerate logits (issue 8.7).
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ONE_HOT_OR_RELAXED)
def test_degenerate_rows_give_nan_samples_and_gradients(name):
  estimator = estimators.get(name)
  inf, nan = np.inf, np.nan
  logits = jnp.array([
      [0.5, -inf, 1.0],  # valid, with a mask
      [0.5, nan, 1.0],
      [-inf, -inf, -inf],
      [0.5, inf, 1.0],
  ])
  cotangent = jnp.array([[1.0, 2.0, -1.0]] * 4)
  sample, vjp = jax.vjp(lambda t: estimator(jax.random.key(0), t, tau=0.5), logits)
  grad = np.asarray(vjp(cotangent)[0])
  sample = np.asarray(sample)
  assert np.isfinite(sample[0]).all() and np.isnan(sample[1:]).all()
  if estimator.one_hot:
    assert sample[0].tolist() in ([1.0, 0.0, 0.0], [0.0, 0.0, 1.0])
  if not estimator.score_function:
    assert np.isfinite(grad[0]).all() and grad[0, 1] == 0.0
    assert np.isnan(grad[1:]).all()


# ---------------------------------------------------------------------------
# One-hot samples only (issue 8.8).
# ---------------------------------------------------------------------------


def test_soft_samples_are_rejected_where_concrete():
  logits = jnp.zeros(3)
  soft = jnp.array([0.2, 0.3, 0.5])
  with pytest.raises(ValueError, match="one-hot"):
    estimators.conditional_gumbel(jax.random.key(0), logits, soft, 4)
  with pytest.raises(ValueError, match="one-hot"):
    estimators.categorical_log_prob(logits, soft)
  with pytest.raises(ValueError, match="one-hot"):
    estimators.categorical_log_prob(jnp.zeros((2, 3)), jnp.array([[0.0, 1.0, 0.0], [1.0, 1.0, 0.0]]))
  # All-NaN rows (the sample of a degenerate row) and traced samples pass.
  estimators.categorical_log_prob(jnp.zeros((2, 3)), jnp.array([[0.0, 1.0, 0.0], [np.nan] * 3]))
  jax.jit(estimators.categorical_log_prob)(logits, soft)


# ---------------------------------------------------------------------------
# Common random numbers (issue 8.9).
# ---------------------------------------------------------------------------


def test_same_key_same_sample_for_every_estimator():
  logits = jax.random.normal(jax.random.key(0), (500, 6)) * 2.0
  keys = jax.random.split(jax.random.key(1), 20)
  for key in keys:
    samples = {
        name: np.asarray(estimators.get(name)(key, logits, tau=0.5))
        for name in ("st", "st_gs", "gr_mc10", "gr_mc1", "gr_qmc10", "zgr", "reinmax", "gst", "gst_p",
                     "reinforce")
    }
    relaxed = np.asarray(estimators.gumbel_softmax(key, logits, tau=0.5))
    for name, sample in samples.items():
      np.testing.assert_array_equal(sample, samples["st_gs"], err_msg=name)
    np.testing.assert_array_equal(relaxed.argmax(-1), samples["st_gs"].argmax(-1))


# ---------------------------------------------------------------------------
# The estimators published after the paper (issue 9).
# ---------------------------------------------------------------------------


def _key_with_sample(logits, index, *, start=0):
  """A key whose Gumbel-max sample of `logits` (one variable) is `index`."""
  for seed in range(start, start + 1000):
    key = jax.random.key(seed)
    if int(np.argmax(estimators.st_gumbel_softmax(key, logits))) == index:
      return key
  raise AssertionError("no key found")


def _vjp_at(estimator, key, logits, cotangent, tau):
  sample, vjp = jax.vjp(lambda t: estimator(key, t, tau=tau), logits)
  return np.asarray(sample), np.asarray(vjp(cotangent)[0], np.float64)


def test_reinmax_hand_computed():
  # theta = [log 3, 0]: p = [3/4, 1/4]; tau = 1; D = e_1; g = [0, 1].
  # pi_1 = (e_1 + p) / 2 = [3/8, 5/8]: 2 pi_1 (g - <g, pi_1>) = [-15/32, 15/32];
  # -1/2 p (g - <g, p>) = [3/32, -3/32]; sum [-3/8, 3/8].
  logits = jnp.array([np.log(3.0), 0.0])
  key = _key_with_sample(logits, 1)
  _, grad = _vjp_at(estimators.reinmax, key, logits, jnp.array([0.0, 1.0]), 1.0)
  np.testing.assert_allclose(grad, [-3 / 8, 3 / 8], rtol=1e-6)
  # theta = [0, 0], tau = 1, D = e_0, g = [1, 0]: pi_1 = [3/4, 1/4];
  # 2 pi_1 (g - 3/4) = [3/8, -3/8]; -1/2 p (g - 1/2) = [-1/8, 1/8]; sum [1/4, -1/4].
  logits = jnp.zeros(2)
  key = _key_with_sample(logits, 0)
  _, grad = _vjp_at(estimators.reinmax, key, logits, jnp.array([1.0, 0.0]), 1.0)
  np.testing.assert_allclose(grad, [0.25, -0.25], rtol=1e-6)


@pytest.mark.parametrize("index, perturbed", [(0, [1.0, 0.0, -1.0]), (1, [0.0, 1.0, -1.0]), (2, [0.0, 0.0, 1.0])])
def test_gst_hand_computed(index, perturbed):
  """theta = [1, 0, -1], gap 1: the sample's logit goes up to the max (1), the
  others down to at most max - 1 = 0; the gradient is the softmax VJP there."""
  logits = jnp.array([1.0, 0.0, -1.0])
  g = np.array([1.0, 2.0, 4.0])
  tau = 0.7
  key = _key_with_sample(logits, index)
  sample, grad = _vjp_at(estimators.get("gst"), key, logits, jnp.asarray(g, jnp.float32), tau)
  assert int(sample.argmax()) == index
  s = _softmax_np(np.array(perturbed) / tau)
  np.testing.assert_allclose(grad, s * (g - g @ s) / tau, rtol=1e-5, atol=1e-7)


def test_gst_p_hand_computed():
  """GST-p: gap = -log(1 - p_i) / p_i with p = softmax(theta)."""
  logits_np = np.array([1.0, 0.0, -1.0])
  p = _softmax_np(logits_np)
  g = np.array([1.0, 2.0, 4.0])
  for index in range(3):
    key = _key_with_sample(jnp.asarray(logits_np, jnp.float32), index)
    _, grad = _vjp_at(estimators.get("gst_p"), key, jnp.asarray(logits_np, jnp.float32),
                      jnp.asarray(g, jnp.float32), 1.0)
    gap = -np.log(1.0 - p[index]) / p[index]
    perturbed = np.minimum(logits_np, logits_np.max() - gap)
    perturbed[index] = logits_np.max()
    s = _softmax_np(perturbed)
    np.testing.assert_allclose(grad, s * (g - g @ s), rtol=1e-5, atol=1e-7)


def test_zgr_is_unbiased_for_a_quadratic_loss():
  """E[ZGR] equals the exact gradient of E[D^T A D] = sum_i p_i A_ii (enumeration)."""
  p = _softmax_np(LOGITS)
  diag = np.diag(A)
  exact = p * (diag - p @ diag)
  draws, _ = _estimator_draws(estimators.zgr, 40_000, seed=12)
  _assert_mean_close(draws, exact, np.zeros(N))


def test_stgs_is_biased_on_the_same_quadratic_loss():
  """The check above can fail: ST-GS's mean on the same problem is rejected."""
  p = _softmax_np(LOGITS)
  diag = np.diag(A)
  exact = p * (diag - p @ diag)
  draws, _ = _estimator_draws(estimators.st_gumbel_softmax, 40_000, seed=12, tau=TAU)
  with pytest.raises(AssertionError):
    _assert_mean_close(draws, exact, np.zeros(N))


def test_zgr_is_the_zero_temperature_limit_of_gumbel_rao():
  """n = 4: GR-MCK at tau = 0.01 and K = 10^6, averaged over 8 backward keys that
  share one D, against ZGR at that D. The tolerance is Z standard errors of the
  average (from the 8 draws) plus the O(tau) distance of GR from its limit,
  bounded by 3 tau max|ZGR| (at tau = 0.01 the binary case below is 0.5% off)."""
  logits = jnp.asarray(LOGITS, jnp.float32)
  g = jnp.asarray([0.5, -1.0, 2.0, 0.3], jnp.float32)
  index = 2
  draws = []
  seed = 0
  for _ in range(8):
    key = _key_with_sample(logits, index, start=seed)
    seed = int(jax.random.key_data(key)[-1]) + 1
    draws.append(_vjp_at(lambda k, t, tau: estimators.gumbel_rao(k, t, tau=tau, num_samples=1_000_000),
                         key, logits, g, 0.01)[1])
  draws = np.array(draws)
  _, limit = _vjp_at(estimators.zgr, key, logits, g, 1.0)
  tolerance = Z * draws.std(0, ddof=1) / np.sqrt(len(draws)) + 3 * 0.01 * np.abs(limit).max()
  np.testing.assert_array_less(np.abs(draws.mean(0) - limit), tolerance)


def _truncated_logistic_product(mu, tau, power=1):
  """E[(sigma(x/tau) sigma(-x/tau))^power | x > 0], x ~ Logistic(mu, 1), by scipy quad."""
  from scipy import integrate, special

  density = lambda x: special.expit(x - mu) * special.expit(mu - x) / special.expit(mu)
  value, _ = integrate.quad(
      lambda x: (special.expit(x / tau) * special.expit(-x / tau)) ** power * density(x),
      0.0, np.inf, limit=400, epsabs=1e-13, epsrel=1e-10, points=None,
  )
  return value


@pytest.mark.parametrize("tau", [1e-3, 0.1, 0.5, 2.0, 50.0])
def test_gr_exact_equals_quadrature_of_the_difference_of_gumbels(tau):
  """Binary case: given D = i, x_i - x_j ~ Logistic(theta_i - theta_j) truncated at 0,
  so E[ST-GS | D] = (1/tau) E[s_i s_j | D] (g_i - g_j) (e_i - e_j); scipy quad on
  that parameterization is independent of the library's trapezoid rule."""
  logits_np = np.array([[0.3, -0.5], [2.0, -1.0], [-3.0, 1.0], [8.0, 0.0]])
  g_np = np.array([[1.0, -2.0], [0.5, 3.0], [1.0, 0.0], [-1.0, 2.0]])
  key = jax.random.key(3)
  sample, grad = _vjp_at(estimators.get("gr_exact"), key, jnp.asarray(logits_np, jnp.float32),
                         jnp.asarray(g_np, jnp.float32), tau)
  for row in range(4):
    i = int(sample[row].argmax())
    j = 1 - i
    c = _truncated_logistic_product(logits_np[row, i] - logits_np[row, j], tau)
    expected = np.zeros(2)
    expected[i] = c * (g_np[row, i] - g_np[row, j]) / tau
    expected[j] = -expected[i]
    np.testing.assert_allclose(grad[row], expected, rtol=1e-4, atol=1e-7)


def test_gr_exact_equals_gr_mc_with_a_million_samples():
  """Within Z standard errors of GR-MC10^6, the SE from the integrand's second
  moment (scipy quad): sd of one sample's (1/tau) s_i s_j (g_i - g_j), over sqrt(K)."""
  logits_np, g_np, tau = np.array([0.4, -0.9]), np.array([1.5, -0.5]), 0.3
  logits, g = jnp.asarray(logits_np, jnp.float32), jnp.asarray(g_np, jnp.float32)
  key = jax.random.key(5)
  sample, exact = _vjp_at(estimators.gumbel_rao_exact, key, logits, g, tau)
  _, mc = _vjp_at(lambda k, t, tau: estimators.gumbel_rao(k, t, tau=tau, num_samples=1_000_000),
                  key, logits, g, tau)
  i = int(sample.argmax())
  mu = logits_np[i] - logits_np[1 - i]
  first, second = _truncated_logistic_product(mu, tau), _truncated_logistic_product(mu, tau, power=2)
  se = np.sqrt(second - first**2) * abs(g_np[0] - g_np[1]) / tau / np.sqrt(1_000_000)
  np.testing.assert_array_less(np.abs(exact - mc), Z * se + 1e-7)


def test_zgr_is_the_limit_of_gr_exact():
  """Binary: |GR-exact(tau) - ZGR| shrinks like tau (at tau = 1e-4, below 1e-3 relative)."""
  logits = jnp.array([[0.3, -0.5], [2.0, -1.0], [-3.0, 1.0]])
  g = jnp.array([[1.0, -2.0], [0.5, 3.0], [1.0, 0.0]])
  key = jax.random.key(3)
  _, limit = _vjp_at(estimators.zgr, key, logits, g, 1.0)
  errors = [np.abs(_vjp_at(estimators.gumbel_rao_exact, key, logits, g, tau)[1] - limit).max()
            for tau in (1e-2, 1e-3, 1e-4)]
  assert errors[2] < 1e-3 * np.abs(limit).max(), errors
  assert errors[0] > errors[1] > errors[2], errors


def test_gr_exact_rejects_more_than_two_categories_and_handles_masks():
  with pytest.raises(ValueError, match="binary variables: logits.shape\\[-1\\] must be 2"):
    estimators.gumbel_rao_exact(jax.random.key(0), jnp.zeros((4, 3)))
  logits = jnp.array([[0.0, -jnp.inf], [-jnp.inf, 1.0], [0.5, 0.2]]).astype(jnp.bfloat16)
  for tau in (1e-3, 1.0, 1e3):
    sample, grad = _vjp_at(estimators.gumbel_rao_exact, jax.random.key(1), logits, jnp.array([[1.0, 3.0]] * 3, jnp.bfloat16), tau)
    np.testing.assert_array_equal(sample[:2], [[1.0, 0.0], [0.0, 1.0]])
    np.testing.assert_array_equal(grad[:2], 0.0)
    assert np.isfinite(grad).all()


def test_gr_qmc_inner_variance_is_below_gr_mc():
  """Var(g | D) (the part K divides) at K = 100: lattice + tent below Monte Carlo at
  K = 100 and at K = 1000. 4,000 draws each; the inner variance is estimated
  within a few percent, far inside the factors measured (>10x)."""
  from gr_jax import diagnostics

  within = {}
  for name, fn, kwargs in [
      ("mc100", estimators.gumbel_rao, {"num_samples": 100}),
      ("mc1000", estimators.gumbel_rao, {"num_samples": 1000}),
      ("qmc100", estimators.gumbel_rao_qmc, {"num_samples": 100}),
  ]:
    draws, idx = _estimator_draws(fn, 4_000, seed=21, tau=TAU, **kwargs)
    within[name] = diagnostics.variance_decomposition(draws, idx).within
  assert within["qmc100"] < within["mc1000"] < within["mc100"], within


def test_lattice_points_are_a_rank_one_lattice():
  points = estimators.lattice_points(64, 5)
  assert points.shape == (64, 5) and points.min() >= 0 and points.max() < 1
  # Every one-dimensional projection of a Korobov lattice with K prime to z_j
  # is the full grid {0, 1/K, ..., (K-1)/K}.
  for j in range(5):
    np.testing.assert_allclose(np.sort(points[:, j]), np.arange(64) / 64)
  np.testing.assert_array_equal(estimators.lattice_points(1, 3), np.zeros((1, 3)))
