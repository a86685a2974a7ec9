"""Tests of experiments/config_checks.py."""

import pytest
from ml_collections import ConfigDict

from experiments import config_checks


@pytest.mark.parametrize(
  "name, straight_through_only, num_categories, ok",
  [
    ("zgr", True, None, True),
    ("gr_qmc50", True, None, True),
    ("gs", True, None, False),
    ("reinforce", True, None, False),
    ("gr_exact", False, 2, True),
    ("gr_exact", False, 16, False),
  ],
)
def test_check_estimator_by_family(name, straight_through_only, num_categories, ok):
  config = ConfigDict({"estimator": name})
  if ok:
    config_checks.check_estimator(
      config, straight_through_only=straight_through_only, num_categories=num_categories
    )
  else:
    with pytest.raises(config_checks.ConfigError, match="config.estimator"):
      config_checks.check_estimator(
        config, straight_through_only=straight_through_only, num_categories=num_categories
      )


def test_averaged_draws_only_where_the_training_step_averages_them():
  """``st_gs_x2`` elsewhere than a VAE would silently train one draw per step: refused."""
  config = ConfigDict({"estimator": "st_gs_x2"})
  assert config_checks.check_estimator(config, averages_draws=True).draws == 2
  with pytest.raises(config_checks.ConfigError, match="averages 2 draws per step, which this"):
    config_checks.check_estimator(config)
