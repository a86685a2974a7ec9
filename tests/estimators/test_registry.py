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


OWN_MODULE = """
from gr_jax import estimators


def half_tau_st_gs(key, logits, *, tau=1.0):
  return estimators.st_gumbel_softmax(key, logits, tau=0.5 * tau)


HALF_TAU = estimators.Estimator("half_tau_st_gs", half_tau_st_gs, "straight_through")
NOT_DECLARED = half_tau_st_gs
ODD_FAMILY = estimators.Estimator("odd", half_tau_st_gs, "heuristic")
"""


def test_an_import_path_names_an_estimator_defined_outside_the_package(tmp_path, monkeypatch):
  (tmp_path / "own_estimators_for_test.py").write_text(OWN_MODULE)
  monkeypatch.syspath_prepend(str(tmp_path))
  path = "own_estimators_for_test:HALF_TAU"
  estimator = estimators.get(path)
  assert estimator.name == path and estimator.family == "straight_through"
  assert estimator == estimators.get(path)  # a static jit argument that does not retrace
  logits = jnp.asarray(LOGITS, jnp.float32)
  key = jax.random.key(0)
  # Its own function, called with the configured tau: ST-GS at tau / 2, exactly.
  ours = jax.grad(lambda t: quadratic_loss(estimator(key, t, tau=1.0)))(logits)
  stgs = jax.grad(lambda t: quadratic_loss(estimators.st_gumbel_softmax(key, t, tau=0.5)))(logits)
  assert jnp.array_equal(ours, stgs)
  for name, message in [
    ("no_such_module_here:X", "cannot import module 'no_such_module_here'.*PYTHONPATH"),
    ("own_estimators_for_test:MISSING", "has no 'MISSING'"),
    ("own_estimators_for_test:NOT_DECLARED", "is a function, not a gr_jax.estimators.Estimator"),
    ("own_estimators_for_test:ODD_FAMILY", "family 'heuristic' is not one of straight_through"),
  ]:
    with pytest.raises(ValueError, match=message):
      estimators.get(name)


def test_an_estimator_averaged_over_draws_counts_its_evaluations():
  averaged = estimators.get("gr_mc10_x2")
  assert averaged.draws == 2 and averaged.loss_evaluations == 2
  assert averaged.fn is estimators.gumbel_rao and averaged.options == (("num_samples", 10),)
  assert estimators.get("st_gs_x2") == estimators.get("st_gs_x2") != estimators.get("st_gs")
  for bad, message in [
    ("st_gs_x1", "average over M >= 2 draws"),
    ("disarm_x2", "only a one-evaluation estimator is averaged over draws"),
    ("nothing_x2", "unknown estimator 'nothing_x2'"),
  ]:
    with pytest.raises(ValueError, match=message):
      estimators.get(bad)
