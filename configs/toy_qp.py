"""The toy quadratic program on the simplex (paper section 5.1, Figure 1)."""

import ml_collections


def get_config():
  config = ml_collections.ConfigDict()
  config.experiment = "toy_qp"
  # Variance maps: the first estimator minus the second is drawn.
  config.estimators = ("st_gs", "gr_mc1000")
  config.taus = (0.1, 0.5, 1.0)
  config.grid_resolution = 30  # barycentric grid steps per edge
  config.num_draws = 1000  # estimator draws per point for the trace covariance
  config.points_per_batch = 16  # grid points vectorized at once (memory)
  config.seed = 0
  # Optimization runs (SGD on the logits from a fixed start).
  config.opt_start = (0.8, 0.15, 0.05)
  config.opt_steps = 500
  config.opt_learning_rate = 0.5
  config.opt_tau = 0.5
  return config
