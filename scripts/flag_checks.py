"""Up-front checks of the scripts' flags: a bad value is one line naming the flag and what it
accepts (absl's 'Flags parsing error'), before any compute."""

from collections.abc import Iterable

from absl import flags


def parses(kind, minimum, value) -> bool:
  try:
    number = kind(value)
  except (TypeError, ValueError):
    return False
  return minimum is None or number >= minimum


def numbers(flag: flags.FlagHolder, kind: type, minimum: float | None = None) -> None:
  """A list flag whose items must be ``kind`` (int or float), each >= ``minimum`` (unset: None)."""
  what = {int: "ints", float: "numbers"}[kind]
  bound = f" >= {minimum}" if minimum is not None else ""
  flags.register_validator(
    flag,
    lambda values: (
      values is None or (bool(values) and all(parses(kind, minimum, v) for v in values))
    ),
    message=f"must be a comma-separated list of {what}{bound}",
  )


def at_least(flag: flags.FlagHolder, minimum: int) -> None:
  """An integer flag >= ``minimum``."""
  flags.register_validator(
    flag, lambda value: value is not None and value >= minimum, f"must be >= {minimum}"
  )


def choices(flag: flags.FlagHolder, allowed: Iterable[str]) -> None:
  """A list flag whose items must be among ``allowed`` (unset: None)."""
  allowed = tuple(allowed)
  flags.register_validator(
    flag,
    lambda values: values is None or (bool(values) and all(v in allowed for v in values)),
    message=f"must be a comma-separated list of {', '.join(allowed)}",
  )


def estimator_names(flag: flags.FlagHolder) -> None:
  """A list flag of the registry's estimator names (the registry's message for an unknown one);
  unset (None) means the script's defaults."""

  def known(values) -> bool:
    from gr_jax import estimators  # here: flag_checks stays importable before the clone's path

    if values is None:
      return True
    for name in values:
      try:
        estimators.get(name)
      except ValueError as e:
        raise flags.ValidationError(str(e)) from None
    return bool(values)

  flags.register_validator(flag, known, message="must name at least one estimator")
