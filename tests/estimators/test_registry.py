"""Names to estimators (gr_jax/estimators/_registry.py)."""

import functools
import pathlib
import re

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


def test_names_are_accepted_by_get_and_filter_on_properties():
  for name in estimators.VALID_NAMES:
    assert estimators.get(name).name == name
  assert estimators.names(num_samples=7)[3:5] == ("gr_mc7", "gr_qmc7")
  assert estimators.names(family="deterministic") == ("zgr", "reinmax", "gst", "gst_p")
  assert "gs" not in estimators.names(straight_through=True)
  assert "reinforce" not in estimators.names(straight_through=True)
  assert estimators.names(binary_only=True) == ("gr_exact", "disarm")
  assert {estimators.get(n).family for n in estimators.names()} == set(estimators.FAMILIES)
  with pytest.raises(ValueError, match="unknown property 'colour'"):
    estimators.names(colour="red")


def _readme_table_names():
  """The names in the first column of README.md's estimator table (`gst` / `gst_p` rows split)."""
  readme = pathlib.Path(__file__).parents[2] / "README.md"
  names = []
  for line in readme.read_text().splitlines():
    if line.startswith("| `"):
      names += re.findall(r"`([^`]+)`", line.split("|")[1])
  return names


def test_readme_table_lists_the_registry():
  assert _readme_table_names() == list(estimators.name_patterns())
