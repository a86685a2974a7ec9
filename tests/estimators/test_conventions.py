"""The conventions every registered estimator keeps (the gr_jax.estimators docstring).

Every test here is parametrized over the registry (``estimators.names``), so a
new estimator is tested by registering it. Binary-only estimators get the same
problems with two categories (``_categories``).
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from gr_jax import estimators
from tests.estimators.reference import LOGITS, softmax_np

# Every registered single-evaluation estimator, with K = 10 in the counted families, plus counts
# that exercise the one-sample and the several-chunk cases of the GR backward pass (the
# multi-sample family, which takes the loss itself: tests/estimators/test_multi_sample.py).
NAMES = [*estimators.names(num_samples=10, multi_sample=False), "gr_mc1", "gr_mc1000"]


def _categories(estimator, n):
  """n, or 2 for an estimator of binary variables."""
  return 2 if estimator.binary_only else n


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_sample_frequencies_match_softmax(name):
  estimator = estimators.get(name)
  theta = LOGITS[: _categories(estimator, len(LOGITS))]
  keys = jax.random.split(jax.random.key(7), 40_000)
  samples = np.asarray(
    jax.vmap(lambda k: estimator(k, jnp.asarray(theta, jnp.float32), tau=0.5))(keys)
  )
  if estimator.relaxed:
    assert np.all((samples >= 0) & (samples <= 1))
    assert np.mean(samples.max(-1) < 1) > 0.5  # relaxed, not one-hot (float32 may saturate)
    np.testing.assert_allclose(samples.sum(-1), 1.0, atol=1e-5)
    samples = np.eye(len(theta))[samples.argmax(-1)]  # argmax of GS is the Gumbel-max sample
  else:
    assert set(np.unique(samples)) == {0.0, 1.0}
    np.testing.assert_array_equal(samples.sum(-1), 1.0)
  # Chi-square goodness of fit, p-value threshold 1e-4.
  expected = softmax_np(theta) * len(samples)
  assert stats.chisquare(samples.sum(0), expected).pvalue > 1e-4


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("tau", [0.01, 1.0, pytest.param(10.0, marks=pytest.mark.slow)])
@pytest.mark.parametrize("dtype", [jnp.float32, pytest.param(jnp.bfloat16, marks=pytest.mark.slow)])
def test_numerics_large_logits_masks_low_tau(name, tau, dtype):
  estimator = estimators.get(name)
  key = jax.random.key(11)
  logits = 50.0 * jax.random.normal(key, (8, 5, _categories(estimator, 6)))
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


@pytest.mark.parametrize("name", NAMES)
def test_bad_tau_and_integer_logits(name):
  estimator = estimators.get(name)
  n = _categories(estimator, 3)
  with pytest.raises(ValueError, match="tau"):
    estimator(jax.random.key(0), jnp.zeros(n), tau=0.0)
  with pytest.raises(ValueError, match="logits"):
    estimator(jax.random.key(0), jnp.zeros(n, jnp.int32), tau=1.0)


@pytest.mark.parametrize("name", NAMES)
def test_errors_are_raised_at_trace_time_under_jit(name):
  estimator = estimators.get(name)
  with pytest.raises(ValueError, match="tau"):
    jax.jit(lambda t: estimator(jax.random.key(0), t, tau=-0.5))(
      jnp.zeros(_categories(estimator, 3))
    )


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_per_variable_tau_equals_scalar_tau_row_by_row(name):
  estimator = estimators.get(name)
  logits = jax.random.normal(jax.random.key(0), (4, 3, _categories(estimator, 5)))
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


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(
  "tau, message",
  [
    (lambda n: np.array([0.5, -0.1, 1.0, 1.0]).reshape(4, 1, 1), "finite and > 0"),
    (lambda n: np.array([0.5, np.nan, 1.0, 1.0]).reshape(4, 1, 1), "finite and > 0"),
    (lambda n: np.full((4, 1, 1), np.inf), "finite and > 0"),
    (lambda n: np.ones(4), r"broadcastable to logits.shape\[:-1\] \+ \(1,\) = \(4, 3, 1\)"),
    (lambda n: np.ones((4, 3, n)), "one temperature per variable"),
    (lambda n: "0.5", "real number"),
  ],
)
def test_bad_array_tau_is_rejected(name, tau, message):
  estimator = estimators.get(name)
  n = _categories(estimator, 5)
  with pytest.raises(ValueError, match=message):
    estimator(jax.random.key(0), jnp.zeros((4, 3, n)), tau=tau(n))


@pytest.mark.parametrize("name", NAMES)
def test_degenerate_rows_give_nan_samples_and_gradients(name):
  estimator = estimators.get(name)
  inf, nan = np.inf, np.nan
  n = _categories(estimator, 3)
  logits = jnp.array(
    [
      [0.5, -inf, 1.0],  # valid, with a mask
      [0.5, nan, 1.0],
      [-inf, -inf, -inf],
      [0.5, inf, 1.0],
    ]
  )[:, :n]
  cotangent = jnp.array([[1.0, 2.0, -1.0]] * 4)[:, :n]
  sample, vjp = jax.vjp(lambda t: estimator(jax.random.key(0), t, tau=0.5), logits)
  grad = np.asarray(vjp(cotangent)[0])
  sample = np.asarray(sample)
  assert np.isfinite(sample[0]).all() and np.isnan(sample[1:]).all()
  if estimator.one_hot:
    assert sample[0].sum() == 1.0 and sample[0, 1] == 0.0
  if not estimator.score_function:
    assert np.isfinite(grad[0]).all() and grad[0, 1] == 0.0
    assert np.isnan(grad[1:]).all()


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_same_key_same_sample_as_st_gs(name):
  estimator = estimators.get(name)
  logits = jax.random.normal(jax.random.key(0), (500, _categories(estimator, 6))) * 2.0
  for key in jax.random.split(jax.random.key(1), 20):
    sample = np.asarray(estimator(key, logits, tau=0.5))
    reference = np.asarray(estimators.st_gumbel_softmax(key, logits, tau=0.5))
    if estimator.relaxed:  # GS relaxes the same G: its argmax is the sample
      np.testing.assert_array_equal(sample.argmax(-1), reference.argmax(-1))
    else:
      np.testing.assert_array_equal(sample, reference)


@pytest.mark.parametrize("name", NAMES)
def test_jit_vmap_grad_compose(name):
  """jit(grad(vmap over keys)) equals the rows computed one by one, with one trace."""
  estimator = estimators.get(name)
  logits = jax.random.normal(jax.random.key(3), (6, 4, _categories(estimator, 5)))
  weights = jax.random.normal(jax.random.key(4), logits.shape)
  keys = jax.random.split(jax.random.key(5), 6)
  traces = []

  def row_loss(key, theta, w):
    sample = estimator(key, theta, tau=0.7)
    if estimator.score_function:
      loss = jnp.sum(w * sample)
      log_prob = estimators.categorical_log_prob(theta, sample)
      return jnp.sum(loss + estimators.score_function_surrogate(log_prob, loss, 0.0))
    return jnp.sum(w * sample)

  @jax.jit
  def batch_grad(keys, logits, weights):
    traces.append(None)
    return jax.grad(lambda t: jnp.sum(jax.vmap(row_loss)(keys, t, weights)))(logits)

  batched = batch_grad(keys, logits, weights)
  batch_grad(keys, logits + 1.0, weights)
  assert len(traces) == 1
  for r in range(6):
    row = jax.grad(lambda t: row_loss(keys[r], t, weights[r]))(logits[r])
    np.testing.assert_allclose(batched[r], row, rtol=1e-5, atol=1e-6)


# Every estimator whose gradient is a VJP of its own (not GS, an ordinary function; not REINFORCE,
# whose sample carries none).
CUSTOM_VJP = [n for n in NAMES if n not in ("gs", "reinforce")]


@pytest.mark.parametrize("name", CUSTOM_VJP)
@pytest.mark.parametrize("tau", [1e-3, 0.3, 3.0])
def test_every_gradient_row_sums_to_zero(name, tau):
  """Each backward pass is a softmax VJP (or, for ZGR and ReinMax, sums of such terms): every row
  of the gradient sums to 0, up to float32 rounding of its terms (64 eps times the sum of their
  sizes). GS's gradient is JAX's own derivative of the relaxation."""
  estimator = estimators.get(name)
  logits = jax.random.normal(jax.random.key(3), (6, 4, _categories(estimator, 5)))
  cotangent = jax.random.normal(jax.random.key(4), logits.shape)
  grad = jax.grad(lambda t: jnp.sum(cotangent * estimator(jax.random.key(5), t, tau=tau)))(logits)
  grad = np.asarray(grad, np.float64)
  bound = 64 * np.finfo(np.float32).eps * np.abs(grad).sum(-1) + 1e-30
  assert np.all(np.abs(grad.sum(-1)) <= bound)


@pytest.mark.parametrize("name", CUSTOM_VJP)
def test_an_infinite_cotangent_at_a_masked_category_changes_nothing(name):
  """Masked categories get no gradient whatever their cotangent: an infinite one (a loss that is
  infinite where the sample is impossible) leaves the other entries as they were."""
  estimator = estimators.get(name)
  n = _categories(estimator, 5)
  logits = jax.random.normal(jax.random.key(6), (4, 3, n)).at[..., -1].set(-jnp.inf)
  cotangent = jax.random.normal(jax.random.key(7), logits.shape)
  _, vjp = jax.vjp(lambda t: estimator(jax.random.key(8), t, tau=0.5), logits)
  (plain,) = vjp(cotangent)
  (infinite,) = vjp(cotangent.at[..., -1].set(jnp.inf))
  np.testing.assert_array_equal(infinite, plain)
  assert np.all(np.asarray(plain)[..., -1] == 0) and np.all(np.isfinite(plain))


@pytest.mark.parametrize("name", NAMES)
def test_tau_is_checked_in_the_dtype_the_estimator_computes_in(name):
  """float32 logits: tau = 1e-50 is 0 and 1e39 is inf in float32 (all-NaN or all-zero gradients
  before); a complex tau is no temperature. float64 logits take 1e-50."""
  estimator = estimators.get(name)
  logits = jnp.zeros((3, _categories(estimator, 4)), jnp.float32)
  for tau, said in ((1e-50, "is 0.0 in float32"), (1e39, "is inf in float32")):
    with pytest.raises(ValueError, match=re.escape(f"tau={tau!r} {said}")):
      estimator(jax.random.key(0), logits, tau=tau)
  with pytest.raises(ValueError, match=r"tau must be a real number > 0 .*got \(1\+1j\)"):
    estimator(jax.random.key(0), logits, tau=1 + 1j)
  with pytest.raises(ValueError, match="tau must be a real number > 0 .*got None"):
    estimator(jax.random.key(0), logits, tau=None)
  with jax.enable_x64(True):
    estimator(jax.random.key(0), jnp.zeros((3, _categories(estimator, 4))), tau=1e-50)


@pytest.mark.parametrize("name", NAMES)
def test_a_key_that_is_not_one_key_is_one_line(name):
  estimator = estimators.get(name)
  logits = jnp.zeros((3, _categories(estimator, 4)))
  for key, said in (
    (0, "got 0"),
    (jax.random.split(jax.random.key(0), 3), "got a batch of keys of shape (3,)"),
    (jax.random.split(jax.random.PRNGKey(0), 3), "got an array of shape (3, 2) and dtype uint32"),
  ):
    with pytest.raises(ValueError, match=rf"^key must be one PRNG key .*{re.escape(said)}\. To"):
      estimator(key, logits, tau=0.5)
  estimator(jax.random.PRNGKey(0), logits, tau=0.5)  # a raw key is one key


@pytest.mark.parametrize("name", CUSTOM_VJP)
def test_forward_mode_is_refused_in_one_line_naming_the_estimator(name):
  estimator = estimators.get(name)
  logits = jnp.zeros((3, _categories(estimator, 4)))
  f = lambda t: estimator(jax.random.key(0), t, tau=0.5)  # noqa: E731
  for transform in (lambda: jax.jacfwd(f)(logits), lambda: jax.jvp(f, (logits,), (logits,))):
    with pytest.raises(TypeError, match=rf"^{estimator.fn.__name__} has a custom backward pass"):
      transform()
  jax.jacrev(f)(logits)  # reverse mode works


def test_an_empty_category_axis_says_so():
  with pytest.raises(ValueError, match=r"empty category axis \(the last\): shape \(3, 0\)"):
    estimators.st_gumbel_softmax(jax.random.key(0), jnp.zeros((3, 0)), tau=0.5)


def test_a_numpy_gap_is_a_number():
  logits = jnp.zeros((3, 4))
  key = jax.random.key(0)
  gradient = lambda gap: jax.grad(  # noqa: E731
    lambda t: jnp.sum(jnp.arange(4.0) * estimators.gapped_straight_through(key, t, gap=gap))
  )(logits)
  np.testing.assert_array_equal(gradient(np.float32(1.0)), gradient(1.0))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["st_gs", "gr_mc10", "gr_qmc10", "gr_qmc10_no_tent"])
def test_the_backward_noise_of_different_variables_is_independent(name):
  """Two variables with the same logits and the same sample get independent estimates: over keys
  where both sampled category 0, the correlation of their gradients (entry 0) is ~0 (|r| < 4 /
  sqrt(N)); noise shared across the variables (one lattice shift for a row) would make it 1."""
  estimator = estimators.get(name)
  logits = jnp.broadcast_to(jnp.array([0.5, 0.0, -0.3]), (2, 3))
  cotangent = jnp.broadcast_to(jnp.array([1.0, -0.5, 0.2]), (2, 3))

  def draw(key):
    sample, vjp = jax.vjp(lambda t: estimator(key, t, tau=0.5), logits)
    return sample, vjp(cotangent)[0]

  samples, grads = jax.jit(jax.vmap(draw))(jax.random.split(jax.random.key(9), 6000))
  both = np.asarray((samples[:, 0, 0] == 1) & (samples[:, 1, 0] == 1))
  a, b = np.asarray(grads)[both, 0, 0], np.asarray(grads)[both, 1, 0]
  assert both.sum() > 1000 and np.std(a) > 0
  assert abs(np.corrcoef(a, b)[0, 1]) < 4 / np.sqrt(both.sum())


@pytest.mark.parametrize("name", ["st_gs", "gr_mc7", "gr_qmc7"])
def test_batch_invariance_holds_for_threefry_keys_and_not_for_rbg(name):
  """vmap(f)(keys)[i] == f(keys[i]) for threefry keys (JAX's default); JAX's own
  jax.random.gumbel under vmap of rbg keys draws other numbers than per key, so there it does not
  hold (the documented convention; this records that behaviour of the installed JAX)."""
  estimator = estimators.get(name)
  logits = jax.random.normal(jax.random.key(1), (4, 3, 5))
  cotangent = jax.random.normal(jax.random.key(2), logits.shape)

  def grad(key, theta):
    return jax.grad(lambda t: jnp.sum(cotangent[0] * estimator(key, t, tau=0.5)))(theta)

  for impl, invariant in (("threefry2x32", True), ("rbg", False)):
    keys = jax.random.split(jax.random.key(3, impl=impl), 4)
    batched = jax.vmap(grad)(keys, logits)
    one_by_one = jnp.stack([grad(keys[i], logits[i]) for i in range(4)])
    assert bool(jnp.allclose(batched, one_by_one, rtol=1e-5, atol=1e-6)) == invariant, impl
