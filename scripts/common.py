"""What the scripts share: up-front checks of their flags (a bad value is one line naming the
flag and what it accepts, absl's 'Flags parsing error', before any compute) and the benchmarks'
one timing helper (a median after warm-up)."""

import statistics
import time
from collections.abc import Iterable

import jax
from absl import flags

from gr_jax import estimators


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


def estimator_names(flag: flags.FlagHolder, at_tau: bool = False, extra: tuple = ()) -> None:
  """A list flag of the registry's estimator names (the registry's message for an unknown one)
  or the script's own ``extra`` rows; unset (None) means the script's defaults. With ``at_tau``
  an item may be ``NAME@TAU``: that estimator at that temperature alone."""

  def known(values) -> bool:
    if values is None:
      return True
    for value in values:
      name, at, tau = value.partition("@")
      if at and not (at_tau and parses(float, 1e-6, tau)):
        allowed = "a number >= 1e-06" if at_tau else "no temperature here"
        raise flags.ValidationError(f"{value!r}: after '@' {allowed}")
      if name in extra:
        continue
      try:
        estimators.get(name)
      except ValueError as e:
        raise flags.ValidationError(str(e)) from None
    return bool(values)

  flags.register_validator(flag, known, message="must name at least one estimator")


def median_ms(fn, *args, repeats: int, warmup: int = 2) -> float:
  """Median milliseconds of ``fn(*args)`` (blocked until ready) after ``warmup`` calls."""
  for _ in range(warmup):  # compile and warm up
    jax.block_until_ready(fn(*args))
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    times.append(1e3 * (time.perf_counter() - start))
  return statistics.median(times)
