"""Config checks the experiments share: one-line errors naming a field and its allowed values."""

from __future__ import annotations

from typing import Any

from ml_collections import ConfigDict

from gr_jax import estimators


class ConfigError(ValueError):
  """An invalid config value; the message names the field and the allowed values."""


def flag_error_line(error: BaseException) -> str:
  """The one line that says what is wrong in a config flag's error: ml_collections puts the config
  file's whole traceback into the message of a get_config() that raised; its last line says it."""
  text = str(error.args[0] if error.args else error)
  if "Traceback (most recent call last)" in text:
    flag = text.split(": ", 1)[0]
    return f"{flag}: {text.strip().splitlines()[-1].strip()}"
  return " ".join(text.split())


def is_number(value: Any) -> bool:
  """An int or float, not a bool."""
  return isinstance(value, (int, float)) and not isinstance(value, bool)


def require(condition: bool, field: str, allowed: str, value: Any) -> None:
  """Raises ConfigError('config.FIELD must be ALLOWED; got VALUE') unless condition."""
  if not condition:
    raise ConfigError(f"config.{field} must be {allowed}; got {value!r}.")


# Seeds feed numpy's and JAX's generators (non-negative, 32-bit); a member's seed adds its index.
SEED_ALLOWED = "an int in [0, 2**31)"


def is_seed(value) -> bool:
  return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**31


def require_int(config: ConfigDict, *fields: str, minimum: int, allowed: str | None = None) -> None:
  """Each field must be an int >= minimum (bools are not ints here)."""
  for field in fields:
    value = config[field]
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= minimum
    require(ok, field, allowed or f"an int >= {minimum}", value)


def require_batch_fits(config: ConfigDict, num_examples: int, what: str) -> None:
  """config.batch_size must not exceed the number of training examples."""
  require(
    config.batch_size <= num_examples,
    "batch_size",
    f"at most the number of {what} ({num_examples})",
    config.batch_size,
  )


def check_estimator(
  config: ConfigDict,
  *,
  straight_through_only: bool = False,
  num_categories: int | None = None,
  averages_draws: bool = False,
) -> estimators.Estimator:
  """The configured estimator, or ConfigError naming the valid ones.

  Args:
    config: the experiment's config (its ``estimator`` field).
    straight_through_only: the experiment needs the sample itself to carry the
      gradient (a one-hot forward, no score-function surrogate).
    num_categories: the arity of the variables, when the experiment fixes one.
    averages_draws: the experiment's training step averages an estimator's
      draws (``<name>_x<M>``); elsewhere such a name is refused.
  """
  name = config.estimator
  try:
    estimator = estimators.get(name)
  except ValueError as e:
    raise ConfigError(f"config.estimator: {e}") from None
  if straight_through_only and not estimator.straight_through:
    raise ConfigError(
      "config.estimator must be a straight-through estimator (one-hot forward, custom"
      f" backward: {', '.join(estimators.name_patterns(straight_through=True))}) for this"
      f" experiment; got {name!r}."
    )
  if estimator.draws > 1 and not averages_draws:
    raise ConfigError(
      f"config.estimator {name!r} averages {estimator.draws} draws per step, which this"
      " experiment's training step does not do (the VAEs do); use a one-draw name."
    )
  if estimator.binary_only and num_categories != 2:
    raise ConfigError(
      f"config.estimator {name!r} needs binary variables (arity 2); this experiment's"
      f" variables have {num_categories or 'varying numbers of'} categories."
    )
  return estimator


def check_common(config: ConfigDict) -> None:
  """Checks the fields every population experiment shares, before any compute (the searched
  hyperparameters' own values: ``experiments.search.check``; the temperature schedule's:
  ``experiments.schedules.check``)."""
  require_int(config, "batch_size", minimum=1)
  require(is_seed(config.seed), "seed", SEED_ALLOWED, config.seed)
