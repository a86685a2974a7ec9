"""GR-MCK, GR-QMC and GR-exact (gr_jax/estimators/_gumbel_rao.py) against exact values."""

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from gr_jax import estimators
from tests.estimators.reference import (
  LOGITS,
  STGS_MEAN_ESTIMATORS,
  TAU,
  N,
  Z,
  assert_mean_close,
  estimator_draws,
  quadratic_loss,
  reference_stgs,
  softmax_np,
  stgs_reference,
  trace_var,
  vjp_at,
)


# The mean gradient equals E[ST-GS], computed in float64 without the library.
@pytest.mark.slow
@pytest.mark.parametrize("fn, kwargs", STGS_MEAN_ESTIMATORS)
def test_mean_equals_exact_stgs_expectation(fn, kwargs):
  ref = stgs_reference()
  draws, _ = estimator_draws(fn, 20_000, tau=TAU, **kwargs)
  assert_mean_close(draws, ref["mean"], ref["se"])


@pytest.mark.slow
def test_gr_conditional_mean_is_stgs_conditional_mean():
  """Rao-Blackwellization: E[GR-MCK | D] = E[ST-GS | D] for every D."""
  ref = stgs_reference()
  draws, idx = estimator_draws(estimators.gumbel_rao, 20_000, tau=TAU, num_samples=100)
  for i in range(N):
    sel = draws[idx == i]
    assert len(sel) > 500
    assert_mean_close(sel, ref["cond_mean"][i], ref["cond_se"][i])


@pytest.mark.slow
def test_total_derivative_through_g_would_fail():
  """The check above can fail: a mean off by a fixed amount is rejected."""
  ref = stgs_reference()
  draws, _ = estimator_draws(estimators.gumbel_rao, 20_000, tau=TAU, num_samples=100)
  with pytest.raises(AssertionError):
    assert_mean_close(draws + 0.1 * np.abs(ref["mean"]).max(), ref["mean"], ref["se"])


@pytest.mark.slow
def test_variance_falls_with_k_and_gr_mc1_matches_stgs():
  draws = {
    "st_gs": estimator_draws(estimators.st_gumbel_softmax, 20_000, seed=1, tau=TAU)[0],
  }
  for k in (1, 10, 100):
    draws[k] = estimator_draws(estimators.gumbel_rao, 20_000, seed=2 + k, tau=TAU, num_samples=k)[0]
  var = {name: trace_var(d) for name, d in draws.items()}
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


@pytest.mark.slow
def test_conditional_gumbel_max_is_gumbel_log_z():
  logits = jnp.asarray(LOGITS, jnp.float32)
  log_z = float(jax.nn.logsumexp(logits))
  for i in range(N):
    g = estimators.conditional_gumbel(jax.random.key(10 + i), logits, jax.nn.one_hot(i, N), 20_000)
    top = np.asarray(g[:, i], np.float64)
    # Gumbel(loc=logZ) CDF; p-value threshold 1e-4 per category.
    p = stats.kstest(top, stats.gumbel_r(loc=log_z).cdf).pvalue
    assert p > 1e-4, (i, p)


@pytest.mark.slow
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


def test_masked_conditional_gumbel_is_minus_inf():
  logits = jnp.array([1.0, -jnp.inf, 0.0])
  g = estimators.conditional_gumbel(jax.random.key(0), logits, jnp.array([0.0, 0.0, 1.0]), 10)
  assert np.all(np.isneginf(np.asarray(g[:, 1])))
  assert np.all(np.isfinite(np.asarray(g[:, [0, 2]])))


@pytest.mark.slow
def test_chunked_backward_equals_unchunked_distribution(monkeypatch):
  """Chunking K changes which random numbers are used but not the estimator.

  With K = 7 split into chunks of 3, 3 and 1, the mean over draws must still
  equal the exact ST-GS expectation (and exactly 7 samples are averaged: the
  gradient of a constant-cotangent loss is exactly zero either way).
  """
  monkeypatch.setitem(estimators.CHUNK_ELEMENTS, jax.default_backend(), 3 * N)
  ref_sums, ref_sq, counts = reference_stgs(num=2_000_000, seed=99)
  total = counts.sum()
  mean = ref_sums.sum(0) / total
  se = np.sqrt((ref_sq.sum(0) / total - mean**2) / total)
  draws, _ = estimator_draws(estimators.gumbel_rao, 20_000, seed=42, tau=TAU, num_samples=7)
  assert_mean_close(draws, mean, se)
  # softmax Jacobians have zero row sums: a constant cotangent gives zero grad.
  g = jax.grad(lambda t: jnp.sum(estimators.gumbel_rao(jax.random.key(0), t, num_samples=7)))(
    jnp.asarray(LOGITS, jnp.float32)
  )
  np.testing.assert_allclose(g, 0.0, atol=1e-6)


@pytest.mark.parametrize("num_categories", [N, 2])  # 2: the binary backward's own chunks
@pytest.mark.parametrize("chunk_samples", [1, 3, 4, 7, 100])
def test_chunking_leaves_the_gradient_unchanged(monkeypatch, chunk_samples, num_categories):
  """Sample k is drawn from fold_in(key, k): how the K = 7 samples are split into chunks (7
  chunks of 1; 3 chunks of 3 and 2 chunks of 4, the last padded with samples weighted zero; one
  chunk) changes only the order of the float32 sums. Counting the padding would scale the
  gradient by (K + pad) / K = 9 / 7 or 8 / 7."""
  logits = jax.random.normal(jax.random.key(1), (5, 3, num_categories))
  cotangent = jax.random.normal(jax.random.key(2), (5, 3, num_categories))

  def grad():  # traced anew at each call: the chunk size is read then
    return jax.grad(
      lambda t: jnp.sum(cotangent * estimators.gumbel_rao(jax.random.key(0), t, num_samples=7))
    )(logits)

  whole = grad()
  monkeypatch.setitem(estimators.CHUNK_ELEMENTS, jax.default_backend(), chunk_samples * logits.size)
  chunked = grad()
  assert np.abs(np.asarray(whole)).max() > 0.1
  np.testing.assert_allclose(chunked, whole, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("function", [estimators.gumbel_rao, estimators.gumbel_rao_qmc])
def test_binary_per_variable_tau_is_each_variables_own(function):
  """The binary backward with one temperature per variable: each variable's gradient equals the
  call with its own tau as a scalar (a backward that read the first variable's tau for all would
  differ on every variable but the first)."""
  logits = jax.random.normal(jax.random.key(0), (3, 4, 2))
  cotangent = jax.random.normal(jax.random.key(1), logits.shape)
  taus = jnp.array([0.1, 0.5, 2.0, 7.0])

  def grad(tau):
    return jax.vjp(lambda t: function(jax.random.key(2), t, tau=tau, num_samples=5), logits)[1](
      cotangent
    )[0]

  per_variable = grad(taus[:, None])
  for v, tau in enumerate(np.asarray(taus)):
    np.testing.assert_allclose(per_variable[:, v], grad(float(tau))[:, v], rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name", ["gr_mc10", "gr_qmc10", "gr_qmc10_no_tent"])
def test_identical_variables_get_their_own_backward_noise(name):
  """Two variables with the same logits, sample and cotangent in one call get different
  gradients: each draws its own exponentials (MC) or its own lattice shift (QMC). A shift shared
  by a row's variables would make them equal (the fast twin of the slow correlation test in
  tests/estimators/test_conventions.py)."""
  estimator = estimators.get(name)
  logits = jnp.broadcast_to(jnp.array([0.5, 0.0, -0.3]), (2, 3))
  cotangent = jnp.broadcast_to(jnp.array([1.0, -0.5, 0.2]), (2, 3))
  compared = 0
  for seed in range(6):
    key = jax.random.key(seed)
    sample, vjp = jax.vjp(lambda t, key=key: estimator(key, t, tau=0.5), logits)
    grad = np.asarray(vjp(cotangent)[0])
    if np.array_equal(sample[0], sample[1]):
      compared += 1
      assert np.abs(grad[0] - grad[1]).max() > 1e-4, (seed, grad)
  assert compared >= 2


@pytest.mark.slow
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


MULTI_LOGITS = np.array([[0.9, -0.3, 0.2, -1.1], [-0.5, 1.4, 0.1, 0.3], [0.0, -0.8, -2.0, 1.0]])


MULTI_W = np.random.default_rng(17).normal(size=MULTI_LOGITS.shape) * np.array(
  [[1.0], [3.0], [-2.0]]
)


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
    s = softmax_np(x / TAU)
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


@pytest.mark.slow
@pytest.mark.parametrize(
  "fn, kwargs",
  [
    *STGS_MEAN_ESTIMATORS,
    pytest.param(estimators.gumbel_rao_qmc, {"num_samples": 1}, id="gr_qmc1"),
    pytest.param(estimators.gumbel_rao_qmc, {"num_samples": 10}, id="gr_qmc10"),
    pytest.param(
      estimators.gumbel_rao_qmc, {"num_samples": 100, "tent": False}, id="gr_qmc100_no_tent"
    ),
    pytest.param(estimators.gumbel_rao_qmc, {"num_samples": 100}, id="gr_qmc100"),
  ],
)
def test_multi_variable_mean_equals_exact_stgs_expectation(fn, kwargs):
  mean, se, _, _ = _multi_reference()
  draws, _ = _multi_draws(fn, 20_000, seed=31, tau=TAU, **kwargs)
  assert_mean_close(draws, mean, se)


@pytest.mark.slow
@pytest.mark.parametrize("fn", [estimators.gumbel_rao, estimators.gumbel_rao_qmc])
def test_multi_variable_conditional_mean_per_variable_is_stgs(fn):
  """Rao-Blackwellization per variable: E[GR_v | D_v = i] = E[ST-GS_v | D_v = i]."""
  _, _, cond_mean, cond_se = _multi_reference()
  draws, idx = _multi_draws(fn, 20_000, seed=32, tau=TAU, num_samples=100)
  for v, i in itertools.product(range(MULTI_LOGITS.shape[0]), range(MULTI_LOGITS.shape[1])):
    sel = draws[idx[:, v] == i, v]
    if len(sel) < 200:  # too rare a (v, i) to say anything at Z = 5
      continue
    assert_mean_close(sel, cond_mean[v, i], cond_se[v, i])


@pytest.mark.slow
def test_multi_variable_swapped_variables_would_fail():
  """The check can fail: GR's draws with the variables' rows permuted are rejected."""
  mean, se, _, _ = _multi_reference()
  draws, _ = _multi_draws(estimators.gumbel_rao, 20_000, seed=31, tau=TAU, num_samples=10)
  with pytest.raises(AssertionError):
    assert_mean_close(draws[:, ::-1], mean, se)


def _vmapped_reference_grad(key, logits, sample, cotangent, tau, num_samples):
  """GR's gradient the obvious way: jax.vmap over K of the softmax VJP at conditional samples."""
  points = estimators.conditional_gumbel(key, logits, sample, num_samples)

  def vjp_at(point):
    return jax.vjp(lambda x: jax.nn.softmax(x / tau, axis=-1), point)[1](cotangent)[0]

  per_sample = jax.vmap(vjp_at)(points)
  return per_sample.mean(0), per_sample.std(0) / np.sqrt(num_samples)


@pytest.mark.slow
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
  sample, vjp = jax.vjp(
    lambda t: estimators.gumbel_rao(key, t, tau=tau, num_samples=num_samples), logits
  )
  fast = np.asarray(vjp(cotangent)[0])
  reference, se = _vmapped_reference_grad(
    jax.random.key(53), logits, sample, cotangent, tau, num_samples
  )
  np.testing.assert_array_less(
    np.abs(fast - np.asarray(reference)), Z * np.sqrt(2) * np.asarray(se) + 1e-6
  )


def _eq8_reference(logits, cotangent, tau, num=1_000_000, seed=8):
  """E[J_tau(theta + G) | D = 0]^T g from eq. 8 in float64 numpy, with its standard error."""
  rng = np.random.default_rng(seed)
  exps = rng.exponential(size=(num, len(logits)))
  log_z = np.logaddexp.reduce(logits)
  # eq. 8, j != i: -log(E_j e^{-theta_j} + E_i e^{-logZ}); j = i: logZ - log E_i.
  points = -np.logaddexp(np.log(exps) - logits, np.log(exps[:, :1]) - log_z)
  points[:, 0] = log_z - np.log(exps[:, 0])
  s = softmax_np(points / tau)
  vjp = s * (cotangent - (cotangent * s).sum(-1, keepdims=True)) / tau
  return vjp.mean(0), vjp.std(0) / np.sqrt(num)


@pytest.mark.slow
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
    sample, vjp = jax.vjp(
      lambda t: estimators.gumbel_rao(key, t, tau=tau, num_samples=num_samples), logits
    )
    grad = np.asarray(vjp(jnp.asarray(cotangent_np, dtype))[0], np.float64)
    # The per-sample spread of the fast path, from the reference's own draws.
  assert int(np.argmax(sample)) == 0
  expected, se = _eq8_reference(logits_np, cotangent_np, tau)
  per_sample_sd = se * np.sqrt(1_000_000)
  tolerance = Z * np.hypot(se, per_sample_sd / np.sqrt(num_samples)) + 1e-7
  np.testing.assert_array_less(np.abs(grad - expected), tolerance)


@pytest.mark.parametrize("tau", [0.1, 0.5, 5.0, 100.0])
@pytest.mark.parametrize("log_odds", [0.7, 3.0, 150.0])
def test_binary_gumbel_rao_equals_eq8(tau, log_odds):
  """Two categories take their own backward (one weight per variable and sample): against eq. 8
  in float64, from log-odds where both samples are likely to 150, where exp(logZ - logits)
  overflows float32. The sample is conditioned on as drawn (the reference's rows reordered so that
  it comes first); the tolerance is Z standard errors of both Monte Carlo means."""
  logits_np = np.array([0.0, -log_odds])
  cotangent_np = np.array([0.5, -1.5])
  num_samples = 100_000
  key = jax.random.key(10)
  sample, vjp = jax.vjp(
    lambda t: estimators.gumbel_rao(key, t, tau=tau, num_samples=num_samples),
    jnp.asarray(logits_np, jnp.float32),
  )
  grad = np.asarray(vjp(jnp.asarray(cotangent_np, jnp.float32))[0], np.float64)
  order = [int(np.argmax(sample)), 1 - int(np.argmax(sample))]
  expected, se = _eq8_reference(logits_np[order], cotangent_np[order], tau, num=200_000)
  per_sample_sd = se * np.sqrt(200_000)
  tolerance = Z * np.hypot(se, per_sample_sd / np.sqrt(num_samples)) + 1e-7
  np.testing.assert_array_less(np.abs(grad[order] - expected), tolerance)


def test_binary_gumbel_rao_with_a_masked_category_is_exactly_zero():
  """A category at -inf is never drawn: the other one is certain and its gradient exactly 0."""
  logits = jnp.array([[0.0, -jnp.inf], [-jnp.inf, 2.0], [0.3, -0.2]])
  for tau in (1e-3, 0.5, 1e3):
    sample, grad = vjp_at(
      lambda k, t, tau: estimators.gumbel_rao(k, t, tau=tau, num_samples=10),
      jax.random.key(2),
      logits,
      jnp.array([[1.0, 3.0]] * 3),
      tau,
    )
    np.testing.assert_array_equal(sample[:2], [[1.0, 0.0], [0.0, 1.0]])
    np.testing.assert_array_equal(grad[:2], 0.0)
    assert np.isfinite(grad).all()
    # At tau = 1e-3 the free row's ten conditional softmaxes are saturated unless an
    # odds ratio E_j / E_i falls below ~1e-2 (about 7 % of draws): zero or not by chance.
    if tau >= 0.5:
      assert np.all(grad[2] != 0.0)


@pytest.mark.slow
def test_gumbel_rao_mean_equals_stgs_at_tau_100():
  """logits [0, -100, -200], g = [0, 1, 2], tau = 100: the two means must be equal."""
  logits_np, w = np.array([0.0, -100.0, -200.0]), np.array([0.0, 1.0, 2.0])
  x = logits_np + np.random.default_rng(3).gumbel(size=(1_000_000, 3))
  s = softmax_np(x / 100.0)
  stgs = s * (w - (w * s).sum(-1, keepdims=True)) / 100.0
  ref_mean, ref_se = stgs.mean(0), stgs.std(0) / np.sqrt(len(stgs))

  def one(key):
    return jax.grad(
      lambda t: jnp.sum(w * estimators.gumbel_rao(key, t, tau=100.0, num_samples=100))
    )(jnp.asarray(logits_np, jnp.float32))

  draws = np.asarray(
    jax.jit(jax.vmap(one))(jax.random.split(jax.random.key(4), 20_000)), np.float64
  )
  assert_mean_close(draws, ref_mean, ref_se)


def _temp_mib(fn, *args):
  stats = jax.jit(fn).lower(*args).compile().memory_analysis()
  return stats.temp_size_in_bytes / 2**20


@pytest.mark.slow
def test_vmapped_gumbel_rao_memory_matches_whole_array():
  """256 rows of 16 with K = 10^4: vmapping over rows (once or twice) must not
  multiply the chunk by the batch. Before the custom batching rule the vmapped
  case compiled to 644 MiB of temporaries against 25 MiB whole."""
  logits = jax.random.normal(jax.random.key(0), (256, 16))
  key = jax.random.key(1)

  def row_grad(k, row):
    return jax.grad(
      lambda t: jnp.sum(jnp.arange(16.0) * estimators.gumbel_rao(k, t, num_samples=10_000))
    )(row)

  whole = _temp_mib(
    lambda t: jax.grad(
      lambda t: jnp.sum(jnp.arange(16.0) * estimators.gumbel_rao(key, t, num_samples=10_000))
    )(t),
    logits,
  )
  keys = jax.random.split(key, 256)
  vmapped = _temp_mib(jax.vmap(row_grad), keys, logits)
  nested = _temp_mib(jax.vmap(jax.vmap(row_grad)), keys.reshape(16, 16), logits.reshape(16, 16, 16))
  shared_key = _temp_mib(jax.vmap(row_grad, in_axes=(None, 0)), key, logits)
  bound = 1.5 * whole + 2.0
  # A few float32 chunk buffers: 4 MiB each with CPU's 2**20-element chunks.
  assert whole < 12 * estimators.max_chunk_elements() * 4 / 2**20, whole
  assert vmapped < bound and nested < bound and shared_key < bound, (
    whole,
    vmapped,
    nested,
    shared_key,
  )


def test_vmapped_gumbel_rao_equals_per_row_calls():
  """The batching rule changes nothing but memory: each vmapped row equals its own call."""
  logits = jax.random.normal(jax.random.key(0), (6, 3, 5))
  cotangent = jax.random.normal(jax.random.key(1), logits.shape)
  keys = jax.random.split(jax.random.key(2), 6)

  def grad_row(k, t, g):
    return jax.vjp(lambda t: estimators.gumbel_rao(k, t, tau=0.7, num_samples=300), t)[1](g)[0]

  vmapped = jax.jit(jax.vmap(grad_row))(keys, logits, cotangent)
  for r in range(6):
    np.testing.assert_allclose(
      vmapped[r], grad_row(keys[r], logits[r], cotangent[r]), rtol=1e-5, atol=1e-6
    )


@pytest.mark.parametrize(
  "function, kwargs",
  [
    (estimators.gumbel_rao, {"num_samples": 5}),
    (estimators.gumbel_rao_qmc, {"num_samples": 5}),
    (estimators.gumbel_rao_exact, {}),
  ],
)
def test_second_derivatives_raise_naming_the_function(function, kwargs):
  """The review's gr_exact case (binary, tau 0.5, logits [0.3, 0], loss weights [1, -2])
  silently returned -0.170, a derivative through the conditional distribution; every
  GR estimator now refuses, naming the function called."""
  logits = (
    jnp.array([0.3, 0.0])
    if function is estimators.gumbel_rao_exact
    else jnp.asarray(LOGITS, jnp.float32)
  )
  weights = jnp.array([1.0, -2.0]) if function is estimators.gumbel_rao_exact else jnp.ones(N)

  def loss(t):
    sample = function(jax.random.key(0), t, tau=0.5, **kwargs)
    return (
      jnp.sum(weights * sample) + quadratic_loss(sample)
      if sample.shape[-1] == N
      else jnp.sum(weights * sample)
    )

  message = f"^{function.__name__} defines first derivatives only"
  with pytest.raises(ValueError, match=message):
    jax.grad(lambda t: jax.grad(loss)(t)[0])(logits)
  with pytest.raises(ValueError, match=message):
    jax.hessian(loss)(logits)
  jax.grad(loss)(logits)  # first derivatives are unaffected


def _truncated_logistic_product(mu, tau, power=1):
  """E[(sigma(x/tau) sigma(-x/tau))^power | x > 0], x ~ Logistic(mu, 1), by scipy quad."""
  from scipy import integrate, special

  density = lambda x: special.expit(x - mu) * special.expit(mu - x) / special.expit(mu)
  value, _ = integrate.quad(
    lambda x: (special.expit(x / tau) * special.expit(-x / tau)) ** power * density(x),
    0.0,
    np.inf,
    limit=400,
    epsabs=1e-13,
    epsrel=1e-10,
    points=None,
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
  sample, grad = vjp_at(
    estimators.get("gr_exact"),
    key,
    jnp.asarray(logits_np, jnp.float32),
    jnp.asarray(g_np, jnp.float32),
    tau,
  )
  for row in range(4):
    i = int(sample[row].argmax())
    j = 1 - i
    c = _truncated_logistic_product(logits_np[row, i] - logits_np[row, j], tau)
    expected = np.zeros(2)
    expected[i] = c * (g_np[row, i] - g_np[row, j]) / tau
    expected[j] = -expected[i]
    np.testing.assert_allclose(grad[row], expected, rtol=1e-4, atol=1e-7)


@pytest.mark.slow
def test_gr_exact_equals_gr_mc_with_a_million_samples():
  """Within Z standard errors of GR-MC10^6, the SE from the integrand's second
  moment (scipy quad): sd of one sample's (1/tau) s_i s_j (g_i - g_j), over sqrt(K)."""
  logits_np, g_np, tau = np.array([0.4, -0.9]), np.array([1.5, -0.5]), 0.3
  logits, g = jnp.asarray(logits_np, jnp.float32), jnp.asarray(g_np, jnp.float32)
  key = jax.random.key(5)
  sample, exact = vjp_at(estimators.gumbel_rao_exact, key, logits, g, tau)
  _, mc = vjp_at(
    lambda k, t, tau: estimators.gumbel_rao(k, t, tau=tau, num_samples=1_000_000),
    key,
    logits,
    g,
    tau,
  )
  i = int(sample.argmax())
  mu = logits_np[i] - logits_np[1 - i]
  first, second = (
    _truncated_logistic_product(mu, tau),
    _truncated_logistic_product(mu, tau, power=2),
  )
  se = np.sqrt(second - first**2) * abs(g_np[0] - g_np[1]) / tau / np.sqrt(1_000_000)
  np.testing.assert_array_less(np.abs(exact - mc), Z * se + 1e-7)


def test_gr_exact_rejects_more_than_two_categories_and_handles_masks():
  with pytest.raises(ValueError, match="binary variables: logits.shape\\[-1\\] must be 2"):
    estimators.gumbel_rao_exact(jax.random.key(0), jnp.zeros((4, 3)))
  logits = jnp.array([[0.0, -jnp.inf], [-jnp.inf, 1.0], [0.5, 0.2]]).astype(jnp.bfloat16)
  for tau in (1e-3, 1.0, 1e3):
    sample, grad = vjp_at(
      estimators.gumbel_rao_exact,
      jax.random.key(1),
      logits,
      jnp.array([[1.0, 3.0]] * 3, jnp.bfloat16),
      tau,
    )
    np.testing.assert_array_equal(sample[:2], [[1.0, 0.0], [0.0, 1.0]])
    np.testing.assert_array_equal(grad[:2], 0.0)
    assert np.isfinite(grad).all()


@pytest.mark.slow
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
    draws, idx = estimator_draws(fn, 4_000, seed=21, tau=TAU, **kwargs)
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


@pytest.mark.parametrize("tau", [1e-30, 1e-18, 1e-8])
def test_gr_exact_at_tiny_tau_is_the_zgr_limit(tau):
  """At equal logits the limit is p_j / 2 = 1/4 per unit of cotangent difference; the
  error is O(tau). Before the quadrature followed the integrand, tau = 1e-30 gave 0
  and tau = 1e-18 gave 2.4e-4."""
  logits = jnp.zeros((3, 2))
  g = jnp.array([[1.0, 0.0]] * 3)
  # g^T (c / tau) [[1, -1], [-1, 1]] with g = [1, 0], whichever category was sampled.
  _, grad = vjp_at(estimators.gumbel_rao_exact, jax.random.key(0), logits, g, tau)
  np.testing.assert_allclose(grad, [[0.25, -0.25]] * 3, rtol=1e-5)


def test_gr_exact_integral_against_scipy_over_scales():
  """The quadrature's c / tau = E[s_i s_j | D] / tau against scipy quad, float64, over
  logit gaps 0..60 and tau 1e-30..1e4 (worst relative error measured: 2e-15)."""
  from scipy import integrate

  from gr_jax.estimators._gumbel_rao_exact import _binary_conditional_product

  def log_integrand(z, ell, tau):
    gap = np.logaddexp(0.0, z) / tau
    return (
      -np.logaddexp(0.0, z - ell)
      - np.logaddexp(0.0, ell - z)
      - np.logaddexp(0.0, gap)
      - np.logaddexp(0.0, -gap)
      - np.log(tau)
    )

  with jax.enable_x64(True):
    for ell, tau in itertools.product(
      [0.0, np.log(2.0), 5.0, 20.0, 60.0], [1e-30, 1e-4, 0.3, 0.99, 1.0, 2.0, 1e4]
    ):
      edges = [-400.0, *sorted({ell, min(np.log(tau), 0.0), 0.0}), ell + 400.0]
      expected = sum(
        integrate.quad(
          lambda z: np.exp(log_integrand(z, ell, tau)), a, b, limit=500, epsabs=0.0, epsrel=1e-12
        )[0]
        for a, b in zip(edges[:-1], edges[1:])
      )
      got = float(_binary_conditional_product(jnp.array([ell]), jnp.array([tau]))[0])
      np.testing.assert_allclose(got, expected, rtol=1e-9, err_msg=f"ell={ell}, tau={tau}")


def test_korobov_vector_for_many_categories():
  """n >= 490 made the P2 criterion overflow and every category share one coordinate;
  the search now scores the first 64 coordinates and the powers continue beyond."""
  points = estimators.lattice_points(101, 500)
  # K = 101 is prime: z = a^j cycles with period ord(a), 100 for a primitive root.
  assert len(np.unique(points, axis=1).T) == 100
  for j in range(500):  # every coordinate still runs over the whole grid {k / K}
    np.testing.assert_allclose(np.sort(points[:, j]), np.arange(101) / 101)
  z = estimators.korobov_vector(4096, 4096)  # 75 s before; about 2 s now
  order = next(j for j in range(1, 4096) if pow(int(z[1]), j, 4096) == 1)  # of a = z_1
  assert z.shape == (4096,) and order > 1 and len(np.unique(z)) == order


def _inner_trace_variance(sampler, num_categories, num_draws=1000, num_samples=100):
  """Var(GR | D) at a fixed D: the backward pass alone, over num_draws backward keys."""
  from gr_jax.estimators._gumbel_rao import _gumbel_rao_backward

  rng = np.random.default_rng(num_categories)
  logits = jnp.asarray(2.0 * rng.normal(size=(1, num_categories)), jnp.float32)
  sample = jax.nn.one_hot(jnp.argmax(logits, -1), num_categories)
  cotangent = jnp.asarray(rng.normal(size=(1, num_categories)), jnp.float32)
  backward = jax.vmap(
    lambda k: _gumbel_rao_backward(k, logits, sample, cotangent, 0.5, num_samples, sampler)
  )
  draws = np.asarray(jax.jit(backward)(jax.random.split(jax.random.key(0), num_draws)), np.float64)
  return trace_var(draws.reshape(num_draws, -1))


@pytest.mark.slow
@pytest.mark.parametrize("num_categories", [16, 600, 2000])
def test_gr_qmc_inner_variance_is_below_gr_mc_with_many_categories(num_categories):
  """K = 100 with n = 16 and n > K: QMC's variance given D below MC's by more than Z
  standard errors of the difference (measured ratios 0.17, 0.60, 0.49; with every
  lattice coordinate equal, 3.5, 1.24, 0.88)."""
  mc, mc_se = _inner_trace_variance("mc", num_categories)
  qmc, qmc_se = _inner_trace_variance("qmc_tent", num_categories)
  assert qmc + Z * np.hypot(qmc_se, mc_se) < mc, (qmc, mc)


def test_sample_count_bounds():
  with pytest.raises(
    ValueError, match=r"K = 10000000000 is more than gr_qmc<K> allows \(K <= 46340\)"
  ):
    estimators.get("gr_qmc10000000000")
  with pytest.raises(ValueError, match="num_samples must be a Python int in \\[1, 46340\\]"):
    estimators.gumbel_rao_qmc(jax.random.key(0), jnp.zeros(3), num_samples=46_341)
  with pytest.raises(ValueError, match="num_samples must be a Python int in \\[1, 2147483647\\]"):
    estimators.gumbel_rao(jax.random.key(0), jnp.zeros(3), num_samples=2**31)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gr_mc1000", "gr_qmc1000"])
def test_vmapped_rows_equal_single_calls_across_chunkings(name):
  """K = 1000 on (60, 16) logits: one call is one chunk, ten vmapped calls are scanned
  in chunks of 109 samples. Sample k of a row is drawn from fold_in(row key, k), so
  the rows agree up to the order of the floating-point sums (before: 0.048 apart on
  gradients of size 1.4)."""
  estimator = estimators.get(name)
  logits = 3.0 * jax.random.normal(jax.random.key(0), (10, 60, 16))
  cotangent = jax.random.normal(jax.random.key(1), logits.shape)
  keys = jax.random.split(jax.random.key(2), 10)
  assert 60 * 16 * 1000 <= estimators.max_chunk_elements() < 10 * 60 * 16 * 1000

  def grad_row(k, t, g):
    return jax.vjp(lambda t: estimator(k, t, tau=0.5), t)[1](g)[0]

  vmapped = jax.jit(jax.vmap(grad_row))(keys, logits, cotangent)
  for r in range(10):
    np.testing.assert_allclose(
      vmapped[r], jax.jit(grad_row)(keys[r], logits[r], cotangent[r]), rtol=1e-4, atol=1e-5
    )


@pytest.mark.parametrize("fn", [estimators.gumbel_rao, estimators.gumbel_rao_qmc])
def test_a_saturated_softmax_gives_exactly_zero_at_any_tau(fn):
  """Where every conditional softmax is one-hot the exact gradient is 0 (as ST-GS's and
  GR-exact's): no rounding residue divided by tau (the sampled category's terms once cancelled
  as K g_D - K g_D, then divided by K tau)."""
  weights = jnp.array([0.1, 0.2, 0.3])
  with jax.enable_x64(True):
    logits = jnp.array([0.0, -1.0, -2.0])
    for tau in (1e-30, 1e-8):
      loss = lambda t, tau=tau: jnp.sum(weights * fn(jax.random.key(0), t, tau=tau, num_samples=10))
      np.testing.assert_array_equal(jax.grad(loss)(logits), 0.0)
  # float32 at tau = 1e-3: logits 40 apart keep every conditional gap far beyond 100 tau.
  logits = 40.0 * jax.random.permutation(jax.random.key(1), jnp.arange(4.0))
  logits = jnp.broadcast_to(logits, (30, 4)).astype(jnp.float32)
  cotangent = jax.random.normal(jax.random.key(2), logits.shape)
  loss = lambda t: jnp.sum(cotangent * fn(jax.random.key(3), t, tau=1e-3, num_samples=7))
  np.testing.assert_array_equal(jax.grad(loss)(logits), 0.0)


@pytest.mark.slow
@pytest.mark.parametrize("fn", [estimators.gumbel_rao, estimators.gumbel_rao_qmc])
def test_small_tau_mean_equals_the_exact_conditional_expectation(fn):
  """At tau = 5e-4 GR's backward averages rare non-saturated conditional samples: its mean over
  backward draws, given D, is GR-exact's E[ST-GS | D] (binary rows, same keys so same D).
  Tolerance: 5 standard errors of the mean difference over 300 keys."""
  logits = jax.random.normal(jax.random.key(4), (16, 2))
  cotangent = jax.random.normal(jax.random.key(5), logits.shape)

  def difference(key):
    grad = lambda estimator: jax.grad(  # noqa: E731
      lambda t: jnp.sum(cotangent * estimator(key, t))
    )(logits)
    ours = grad(lambda k, t: fn(k, t, tau=5e-4, num_samples=2000))
    exact = grad(lambda k, t: estimators.gumbel_rao_exact(k, t, tau=5e-4))
    return ours - exact, exact

  differences, exact = jax.jit(jax.vmap(difference))(jax.random.split(jax.random.key(6), 300))
  assert float(jnp.abs(exact).max()) > 0.05  # the gradient is not negligible
  se = np.asarray(differences).std(0) / np.sqrt(len(differences))
  assert np.all(np.abs(np.asarray(differences).mean(0)) <= 5 * se + 1e-7)


def _product_at_tau_one_by_scipy(p_other):
  """E[s_i s_j | D = i] at tau = 1 as an integral over the odds ratio W = E_j / E_i
  (density (1 + w)^-2): s_i s_j = (1 + r) / (2 + r)^2 with r = W / p_j, by scipy quad
  with no absolute tolerance (the value falls to 1e-25 at p_j = e^-60)."""
  from scipy import integrate

  def integrand(w):
    r = w / p_other
    return (1.0 + r) / (2.0 + r) ** 2 / (1.0 + w) ** 2

  edges = [0.0, p_other, 1.0, np.inf]
  return sum(
    integrate.quad(integrand, a, b, limit=500, epsabs=0.0, epsrel=1e-13)[0]
    for a, b in zip(edges[:-1], edges[1:])
  )


@pytest.mark.parametrize("x64", [False, True])
def test_gr_exact_closed_form_at_tau_one_against_scipy(x64):
  """At tau = 1 gr_exact takes the closed form c = p F(1 - 2p): against scipy quad over
  the odds ratio, for gaps on both sides of its series' edge (|1 - 2p| = 1/2 at
  p = 1/4 and 3/4, gaps of about -+1.0986) and out to p = e^-60. The float32 bound is
  the closed form's measured rounding (worst 1.3e-6 relative over 416 gaps in [0, 60])
  with room; float64 is held near scipy's epsrel."""
  gaps = np.array([-60.0, -20.0, -3.0, -1.1, -1.0986, -0.05, 0.0, 0.05, 1.0986, 1.1, 3.0, 20.0])
  logits_np = np.stack([gaps, np.zeros_like(gaps)], axis=-1)
  with jax.enable_x64(x64):
    dtype = jnp.float64 if x64 else jnp.float32
    g = jnp.asarray(np.tile([1.0, -1.0], (len(gaps), 1)), dtype)
    sample, grad = vjp_at(
      estimators.gumbel_rao_exact, jax.random.key(4), jnp.asarray(logits_np, dtype), g, 1.0
    )
  for row, gap in enumerate(gaps):
    j = 1 - int(sample[row].argmax())
    p_other = np.exp(logits_np[row, j]) / np.exp(logits_np[row]).sum()
    # (c / tau)(g_i - g_j)(e_i - e_j) = 2c [1, -1] for g = [1, -1], whichever i was drawn.
    expected = 2.0 * _product_at_tau_one_by_scipy(p_other) * np.array([1.0, -1.0])
    np.testing.assert_allclose(
      grad[row], expected, rtol=1e-11 if x64 else 5e-6, err_msg=f"gap {gap}"
    )


def test_gr_exact_closed_form_known_values():
  """c = ln 2 - 1/2 when the other category is certain (ell = 0) and 1/6 at p = 1/2."""
  from gr_jax.estimators._gumbel_rao_exact import _product_at_tau_one

  with jax.enable_x64(True):
    got = np.asarray(_product_at_tau_one(jnp.array([0.0, np.log(2.0)])))
  np.testing.assert_allclose(got, [np.log(2.0) - 0.5, 1.0 / 6.0], rtol=1e-14)


def _scipy_conditional_products(cases):
  """c / tau = E[s_i s_j | D] / tau by scipy quad in float64, per (ell, tau) of ``cases``."""
  from scipy import integrate

  def integrand(z, ell, tau):
    gap = np.logaddexp(0.0, z) / tau
    log_value = (
      -np.logaddexp(0.0, z - ell)
      - np.logaddexp(0.0, ell - z)
      - np.logaddexp(0.0, gap)
      - np.logaddexp(0.0, -gap)
      - np.log(tau)
    )
    return np.exp(log_value)

  expected = []
  for ell, tau in cases:
    edges = [-400.0, *sorted({ell, min(np.log(tau), 0.0), 0.0}), ell + 400.0]
    expected.append(
      sum(
        integrate.quad(integrand, a, b, (ell, tau), limit=500, epsabs=0.0, epsrel=1e-12)[0]
        for a, b in zip(edges[:-1], edges[1:])
      )
    )
  return np.array(expected)


def test_gr_exact_float32_rule_against_scipy_over_scales():
  """The float32 trapezoid rule (81 nodes) against scipy quad in float64, over gaps
  0..60 and tau 1e-30..1e4. Its worst relative error, 4.5e-6 (321 nodes in float32:
  2.3e-6), is float32 rounding of the integrand; the bound leaves room."""
  from gr_jax.estimators._gumbel_rao_exact import _binary_conditional_product

  cases = list(
    itertools.product([0.0, 0.3, 2.0, 10.0, 40.0, 60.0], [1e-30, 0.01, 0.25, 0.5, 2.0, 10.0, 1e4])
  )
  ells, taus = (jnp.asarray(column, jnp.float32) for column in zip(*cases))
  got = np.asarray(_binary_conditional_product(ells, taus), np.float64)
  np.testing.assert_allclose(got, _scipy_conditional_products(cases), rtol=1e-5)


@pytest.mark.parametrize("tau", [1e-30, 1e-4, 0.01, 0.25, 0.5, 0.7, 0.75])
def test_gr_exact_table_for_one_tau_against_scipy(tau):
  """One scalar tau <= 0.75 in float32: the 48-term Chebyshev table in the logit gap against
  scipy quad, over gaps 0..80 (inside and beyond the table's interval, 25 to 65 long). Its
  worst relative error, 5.2e-6 (tau 1e-30), is float32 rounding, as the rule's."""
  from gr_jax.estimators._gumbel_rao_exact import _product_by_table

  ells = [0.0, 1e-3, 0.3, np.log(2.0), 2.0, 5.0, 10.0, 17.0, 25.0, 40.0, 60.0, 64.9, 65.1, 80.0]
  expected = _scipy_conditional_products([(ell, tau) for ell in ells])
  got = jax.jit(_product_by_table)(jnp.asarray(ells, jnp.float32), jnp.float32(tau))
  np.testing.assert_allclose(np.asarray(got, np.float64), expected, rtol=1e-5)


def test_gr_exact_takes_the_table_for_one_tau_only():
  """The gradient's factor c / tau comes from the table for one scalar tau <= 0.75 in float32
  (also traced, as under jit), and from the per-variable rule for a tau per variable, above
  0.75, or in float64; both within float32 rounding of each other."""
  from gr_jax.estimators._gumbel_rao_exact import _binary_conditional_product, _product_by_table

  logits = jnp.array([[0.3, -0.5], [2.0, -1.0], [-3.0, 1.0], [8.0, 0.0]])
  g = jnp.array([[1.0, 0.0]] * 4)  # the gradient's first column is c / tau

  def factors(tau, dtype=jnp.float32):
    cast = logits.astype(dtype)
    key = jax.random.key(3)
    sample, grad = vjp_at(estimators.gumbel_rao_exact, key, cast, g.astype(dtype), tau)
    gaps = jax.nn.logsumexp(cast, -1, keepdims=True) - cast  # logZ - theta, per category
    ell = jnp.sum(jnp.where(sample == 1.0, 0.0, gaps), -1)  # of the category not sampled
    return np.asarray(grad[:, 0], np.float64), ell

  got, ell = factors(0.5)
  np.testing.assert_allclose(got, _product_by_table(ell, jnp.float32(0.5)), rtol=1e-6)
  traced = jax.jit(
    lambda tau: jax.vjp(
      lambda t: estimators.gumbel_rao_exact(jax.random.key(3), t, tau=tau), logits
    )[1](g)[0]
  )(0.5)
  np.testing.assert_allclose(traced[:, 0], got, rtol=1e-6)
  per_variable, _ = factors(jnp.full((4, 1), 0.5))
  rule = _binary_conditional_product(ell, jnp.full((4,), 0.5))
  np.testing.assert_allclose(per_variable, rule, rtol=1e-6)
  np.testing.assert_allclose(per_variable, got, rtol=1e-5)
  above, _ = factors(0.8)
  np.testing.assert_allclose(above, _binary_conditional_product(ell, jnp.full((4,), 0.8)), 1e-6)
  with jax.enable_x64(True):
    wide, ell64 = factors(0.5, jnp.float64)
    rule64 = _binary_conditional_product(ell64, jnp.full((4,), 0.5, jnp.float64))
    np.testing.assert_allclose(wide, rule64, rtol=1e-12)


@pytest.mark.parametrize("sampler", ["mc", "qmc_tent"])
def test_binary_conditional_softmax_has_the_law_of_the_exponentials(sampler):
  """Binary GR draws one uniform per variable and sample. Its one-sample weight
  s_i s_j = u / (1 + u)^2, u = (1 + W / p)^{-1/tau}, falls as the odds ratio W = E_j / E_i
  rises, so with W's law P(W <= w) = w / (1 + w) (two independent Exp(1)), the weight's
  exact CDF is P(weight <= t) = 1 / (1 + W(t)): a Kolmogorov-Smirnov test of 20,000 draws
  of the K = 1 backward (GR-QMC1 is one random shift: uniform too) against it."""
  from gr_jax.estimators._gumbel_rao import _gumbel_rao_backward

  tau, logits_np = 0.5, np.array([[0.4, -0.3]])
  p_other = np.exp(logits_np[0, 1]) / np.exp(logits_np[0]).sum()
  sample = jnp.array([[1.0, 0.0]])
  backward = jax.vmap(
    lambda k: _gumbel_rao_backward(
      k, jnp.asarray(logits_np, jnp.float32), sample, jnp.array([[1.0, 0.0]]), tau, 1, sampler
    )
  )
  draws = np.asarray(jax.jit(backward)(jax.random.split(jax.random.key(6), 20_000)), np.float64)
  weights = draws[:, 0, 0] * tau  # (1/tau) s_i s_j (g_i - g_j) with g = [1, 0]

  def cdf(t):
    # The root u <= 1 of u / (1 + u)^2 = t, written without cancellation at small t.
    u = 2.0 * t / (1.0 - 2.0 * t + np.sqrt(np.clip(1.0 - 4.0 * t, 0.0, None)))
    odds = (u ** (-tau) - 1.0) * p_other
    return 1.0 / (1.0 + odds)

  assert stats.kstest(weights, cdf).pvalue > 1e-3


def test_binary_gr_qmc_mean_given_d_is_gr_exact():
  """Binary GR-QMC8 is unbiased for E[ST-GS | D] (gr_exact's value): the mean of 2,000
  backward passes at a fixed D within Z standard errors of it."""
  from gr_jax.estimators._gumbel_rao import _gumbel_rao_backward
  from gr_jax.estimators._gumbel_rao_exact import _gumbel_rao_exact_backward

  logits = jnp.array([[0.4, -0.3], [-1.5, 0.5]])
  sample = jnp.array([[1.0, 0.0], [1.0, 0.0]])
  cotangent = jnp.array([[1.0, -2.0], [0.5, 1.0]])
  exact = np.asarray(_gumbel_rao_exact_backward(None, logits, sample, cotangent, 0.3))
  backward = jax.vmap(
    lambda k: _gumbel_rao_backward(k, logits, sample, cotangent, 0.3, 8, "qmc_tent")
  )
  draws = np.asarray(jax.jit(backward)(jax.random.split(jax.random.key(7), 2_000)), np.float64)
  se = draws.std(0) / np.sqrt(len(draws))
  np.testing.assert_array_less(np.abs(draws.mean(0) - exact), Z * se + 1e-7)
