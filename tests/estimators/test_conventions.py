"""The conventions every registered estimator keeps (the gr_jax.estimators docstring)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from gr_jax import estimators
from tests.estimators.reference import (
  LOGITS,
  N,
  softmax_np,
)


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
  expected = softmax_np(LOGITS) * len(samples)
  assert stats.chisquare(counts, expected).pvalue > 1e-4


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


@pytest.mark.parametrize("name", ["st", "st_gs", "gs", "gr_mc5"])
def test_bad_tau_and_integer_logits(name):
  est = estimators.get(name)
  with pytest.raises(ValueError, match="tau"):
    est(jax.random.key(0), jnp.zeros(3), tau=0.0)
  with pytest.raises(ValueError, match="logits"):
    est(jax.random.key(0), jnp.zeros(3, jnp.int32), tau=1.0)


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
