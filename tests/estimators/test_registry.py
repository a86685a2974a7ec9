"""Names to estimators (gr_jax/estimators/_registry.py)."""

import functools

import jax
import jax.numpy as jnp
import pytest

from gr_jax import estimators
from tests.estimators.reference import (
    LOGITS,
    quadratic_loss,
)


def test_get_names():
  assert estimators.get("gr_mc100").options == (("num_samples", 100),)
  assert estimators.get("gr_qmc64").fn is estimators.gumbel_rao_qmc
  assert estimators.get("gst_p").options == (("gap", "p"),)
  assert estimators.get("gs").relaxed and estimators.get("reinforce").score_function
  for bad in ("gr_mc0", "gr_mc", "grmc10", "ST", "gumbel"):
    with pytest.raises(ValueError, match="valid names: st, st_gs, gs, gr_mc.*gr_qmc.*zgr"):
      estimators.get(bad)


def test_get_is_stable_and_jit_static_does_not_retrace():
  assert estimators.get("gr_mc10") == estimators.get("gr_mc10")
  assert hash(estimators.get("gr_mc10")) == hash(estimators.get("gr_mc10"))
  assert estimators.get("gr_mc10") != estimators.get("gr_mc11")
  traces = []

  @functools.partial(jax.jit, static_argnums=0)
  def grad(estimator, logits):
    traces.append(None)
    return jax.grad(lambda t: quadratic_loss(estimator(jax.random.key(0), t)))(logits)

  for _ in range(3):
    grad(estimators.get("gr_mc10"), jnp.asarray(LOGITS, jnp.float32))
  assert len(traces) == 1
