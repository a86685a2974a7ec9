"""The temperature schedule: tau as a function of the member's tau and the step."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
from ml_collections import ConfigDict

from experiments import config_checks
from experiments.search import Member

# The schedules' names (``config.tau_schedule``), implemented by :func:`tau_schedule`.
SCHEDULES = ("constant", "exponential")


def check(config: ConfigDict) -> None:
  """The schedule's fields (ConfigError names the field); tau_min is checked against the members'
  own taus (:func:`check_schedule_floor`)."""
  config_checks.require(
    config.tau_schedule in SCHEDULES, "tau_schedule", f"one of {SCHEDULES}", config.tau_schedule
  )
  config_checks.require(
    isinstance(config.tau_decay_rate, (int, float)) and config.tau_decay_rate >= 0,
    "tau_decay_rate",
    "a number >= 0 (per step)",
    config.tau_decay_rate,
  )
  config_checks.require_int(config, "tau_decay_every", minimum=1)


def tau_schedule(config: ConfigDict) -> Callable[[Any, Any], jax.Array]:
  r"""``(tau, step) -> tau_step``: the temperature schedule, tau and step as data (traceable).

  "constant": :math:`\tau_t = \tau`. "exponential" (Jang et al. 2017):
  :math:`\tau_t = \max(\tau_{\min}, \tau e^{-r N \lfloor t / N \rfloor})`
  with r = ``tau_decay_rate`` and N = ``tau_decay_every`` (Jang et al. used
  r in {1e-5, 1e-4}, N = 500, tau_min = 0.5). tau is the member's own (a
  population's members may differ in it).
  """
  if config.tau_schedule == "constant":
    return lambda tau, step: jnp.asarray(tau, jnp.float32)
  every, rate, floor = config.tau_decay_every, config.tau_decay_rate, config.tau_min

  def exponential(tau, step):
    decays = (jnp.asarray(step) // every).astype(jnp.float32)
    return jnp.maximum(floor, tau * jnp.exp(-rate * every * decays)).astype(jnp.float32)

  return exponential


def check_schedule_floor(config: ConfigDict, chosen: Sequence[Member]) -> None:
  """The exponential temperature schedule's floor must not exceed any member's tau."""
  if config.tau_schedule == "exponential" and "tau" in chosen[0].hyperparameters:
    lowest = min(m.hyperparameters["tau"] for m in chosen)
    config_checks.require(
      isinstance(config.tau_min, (int, float)) and 0 < config.tau_min <= lowest,
      "tau_min",
      f"a number in (0, {lowest}] (the lowest member tau) with tau_schedule='exponential'",
      config.tau_min,
    )
