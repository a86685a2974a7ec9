"""Argument checks shared by every estimator (gr_jax/estimators/_core.py)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gr_jax import estimators


def test_sample_shape_mismatch():
  with pytest.raises(ValueError, match="sample"):
    estimators.conditional_gumbel(jax.random.key(0), jnp.zeros((2, 3)), jnp.zeros(3), 4)
  with pytest.raises(ValueError, match="sample"):
    estimators.categorical_log_prob(jnp.zeros((2, 3)), jnp.zeros((2, 4)))


def test_soft_samples_are_rejected_where_concrete():
  logits = jnp.zeros(3)
  soft = jnp.array([0.2, 0.3, 0.5])
  with pytest.raises(ValueError, match="one-hot"):
    estimators.conditional_gumbel(jax.random.key(0), logits, soft, 4)
  with pytest.raises(ValueError, match="one-hot"):
    estimators.categorical_log_prob(logits, soft)
  with pytest.raises(ValueError, match="one-hot"):
    estimators.categorical_log_prob(
      jnp.zeros((2, 3)), jnp.array([[0.0, 1.0, 0.0], [1.0, 1.0, 0.0]])
    )
  # All-NaN rows (the sample of a degenerate row) and traced samples pass.
  estimators.categorical_log_prob(jnp.zeros((2, 3)), jnp.array([[0.0, 1.0, 0.0], [np.nan] * 3]))
  jax.jit(estimators.categorical_log_prob)(logits, soft)


def test_error_messages_print_plain_numbers_and_ask_for_an_array():
  logits = jnp.zeros((2, 3))
  with pytest.raises(ValueError, match=r"^tau must be finite and > 0; got tau=-1\.0\.$"):
    estimators.st_gumbel_softmax(jax.random.key(0), logits, tau=np.array([[0.5], [-1.0]]))
  with pytest.raises(
    ValueError, match=r"not a list: pass an array \(jnp\.asarray\(\[0\.5, 1\.0\]\)\)"
  ):
    estimators.st_gumbel_softmax(jax.random.key(0), logits, tau=[0.5, 1.0])
  with pytest.raises(ValueError, match=r'gap must be a number > 0 \(1\.0: GST-1\.0\) or "p"'):
    estimators.gapped_straight_through(jax.random.key(0), logits, gap="1.0")
  assert repr(estimators.get("gst")) == "estimators.get('gst')"
  assert "Gapped straight-through" in estimators.get("gst").__doc__
