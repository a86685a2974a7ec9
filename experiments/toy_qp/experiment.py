"""The toy quadratic program (Paulus et al. 2021, section 5.1, Figure 1).

Over a grid of points p of the simplex, the log10 trace of the covariance of
each estimator's gradient with respect to the logits log p, at each
temperature, and the difference between the first two estimators (ST-GS minus
GR-MC1000 by default). Then one optimization run per estimator from a fixed
start. Each temperature's numbers are saved as they are done
(``variance_tau<tau>.npz``); a restarted run skips the ones it has.

Outputs in the workdir: ``variance_tau*.npz``, ``variance_summary.json``,
``optimization.json``, ``metrics.jsonl`` and ``results.json``;
``python -m scripts.plot --figure=toy_qp`` draws Figure 1's heat maps and the optimization
curves from them.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from absl import logging
from ml_collections import ConfigDict

from experiments import bookkeeping, config_checks, workdir
from gr_jax import diagnostics, estimators, toy_qp


def validate(config: ConfigDict) -> list[estimators.Estimator]:
  chosen = []
  for name in config.estimators:
    try:
      chosen.append(estimators.get(name))
    except ValueError as e:
      raise config_checks.ConfigError(f"config.estimators: {e}") from None
    config_checks.require(
      chosen[-1].draws == 1, "estimators", "one-draw estimator names (no <name>_x<M>)", name
    )
  config_checks.require(
    len(chosen) >= 2, "estimators", "a list of at least two estimator names", config.estimators
  )
  config_checks.require(
    len(config.taus) >= 1 and all(isinstance(t, (int, float)) and t > 0 for t in config.taus),
    "taus",
    "a non-empty list of numbers > 0",
    config.taus,
  )
  config_checks.require_int(config, "grid_resolution", minimum=3)
  config_checks.require_int(config, "num_draws", minimum=2)
  config_checks.require_int(config, "points_per_batch", "opt_steps", minimum=1)
  config_checks.require(
    config.opt_learning_rate > 0, "opt_learning_rate", "a number > 0", config.opt_learning_rate
  )
  config_checks.require(config.opt_tau > 0, "opt_tau", "a number > 0", config.opt_tau)
  config_checks.require(
    len(config.opt_start) == 3
    and all(v > 0 for v in config.opt_start)
    and abs(sum(config.opt_start) - 1) < 1e-6,
    "opt_start",
    "a point (p1, p2, p3) of the open simplex",
    config.opt_start,
  )
  return chosen


def _gradient_draw(estimator, q, c):
  """(key, p, tau) -> one estimator draw of d E[f(D)] / d log p (A(p) held constant)."""

  def draw(key, p, tau):
    return jax.grad(lambda theta: toy_qp.stochastic_loss(estimator(key, theta, tau=tau), p, q, c))(
      jnp.log(p)
    )

  return draw


def variance_map_fn(estimator, config, q, c):
  """A jitted (keys [P], points [P, 3], tau) -> log10 trace Cov of the gradient [P].

  The temperature is traced, so one compilation serves every tau.
  """
  draw = _gradient_draw(estimator, q, c)

  def at_point(args, tau):
    point_key, p = args
    stats = diagnostics.gradient_stats(lambda k: draw(k, p, tau), point_key, config.num_draws)
    return jnp.log10(stats.trace_variance)

  return jax.jit(
    lambda keys, points, tau: jax.lax.map(
      lambda args: at_point(args, tau), (keys, points), batch_size=config.points_per_batch
    )
  )


def optimize(estimator, config, q, c, key) -> np.ndarray:
  """SGD on the logits from opt_start; the objective after every step (``[steps + 1]``)."""
  draw = _gradient_draw(estimator, q, c) if estimator is not None else None

  def step(theta, step_key):
    p = jax.nn.softmax(theta)
    if draw is None:  # the exact gradient of the objective, for reference
      grad = jax.grad(lambda t: toy_qp.objective(jax.nn.softmax(t), q, c))(theta)
    else:
      grad = draw(step_key, p, config.opt_tau)
    theta = theta - config.opt_learning_rate * grad
    return theta, toy_qp.objective(jax.nn.softmax(theta), q, c)

  theta0 = jnp.log(jnp.asarray(config.opt_start, jnp.float32))
  _, values = jax.lax.scan(step, theta0, jax.random.split(key, config.opt_steps))
  return np.concatenate([[float(toy_qp.objective(jnp.exp(theta0), q, c))], np.asarray(values)])


def train_and_evaluate(config: ConfigDict, workdir_path: str) -> dict:
  """The toy quadratic program (Figure 1): variance maps over the simplex and SGD curves.

  For each temperature, log10 of the trace variance of each estimator's
  gradient at every grid point (``variance_tau<tau>.npz``, skipped when a
  restarted run already has it), then SGD from ``opt_start`` with each
  estimator and with the exact gradient (``optimization.json``). The figures
  are drawn from these files by ``python -m scripts.plot --figure=toy_qp``.

  Returns:
    The results written to ``workdir_path/results.json`` (per-tau summaries of where
    the second estimator has the lower variance, final objectives).
  """
  chosen = validate(config)
  path, _ = workdir.prepare_workdir(workdir_path, config)
  writer = bookkeeping.MetricsWriter(path)
  q, c = toy_qp.paper_problem()
  points = toy_qp.simplex_grid(config.grid_resolution)
  key = jax.random.key(config.seed)
  names = list(config.estimators)
  maps, summary = {}, {}
  variance_fns = [variance_map_fn(est, config, q, c) for est in chosen]
  points_f32 = jnp.asarray(points, jnp.float32)
  for index, tau in enumerate(config.taus):
    file = path / f"variance_tau{tau}.npz"
    if file.exists():
      with np.load(file) as saved:
        maps[tau] = [saved[name] for name in names]
    else:
      maps[tau] = [
        np.asarray(
          fn(
            jax.random.split(jax.random.fold_in(key, 100 * index + e), len(points)), points_f32, tau
          ),
          np.float64,
        )
        for e, fn in enumerate(variance_fns)
      ]
      with workdir.atomic_path(file) as tmp:
        np.savez(tmp, points=points, **dict(zip(names, maps[tau])))
    difference = maps[tau][0] - maps[tau][1]
    summary[str(tau)] = {
      "fraction_lower": float(np.mean(difference > 0)),
      "median_log10_reduction": float(np.median(difference)),
      "num_points": len(points),
    }
    writer.write(
      index,
      f"tau{tau}",
      fraction_lower=summary[str(tau)]["fraction_lower"],
      median_log10_reduction=summary[str(tau)]["median_log10_reduction"],
    )
    logging.info(
      "tau %s: %s lower at %.1f%% of %d points, median log10 reduction %.3f",
      tau,
      names[1],
      100 * summary[str(tau)]["fraction_lower"],
      len(points),
      summary[str(tau)]["median_log10_reduction"],
    )
  workdir.write_json_atomic(path / "variance_summary.json", summary)
  curves = {"exact gradient": optimize(None, config, q, c, key)}
  for e, (name, est) in enumerate(zip(names, chosen)):
    curves[name] = optimize(est, config, q, c, jax.random.fold_in(key, 10_000 + e))
  results = {
    "variance": summary,
    "estimators": names,
    "num_draws": config.num_draws,
    "optimization_final_objective": {name: float(v[-1]) for name, v in curves.items()},
    "optimization_tau": config.opt_tau,
    "seed": config.seed,
  }
  workdir.write_json_atomic(path / "results.json", results)
  workdir.write_json_atomic(path / "optimization.json", {k: v.tolist() for k, v in curves.items()})
  writer.close()
  return results
