"""How the scripts print numbers in tables and progress lines (one convention for all of them)."""

import math
import statistics
from collections.abc import Sequence


def significant(value: float | None, digits: int = 4) -> str:
  """A number to ``digits`` significant digits ("-" for None); JSON files keep full precision."""
  if value is None:
    return "-"
  return f"{value:.{digits}g}" if math.isfinite(value) else str(value)


def seeds(count: int) -> str:
  return f"{count} seed" + "s" * (count != 1)


def spread(values: Sequence[float], decimals: int = 2) -> str:
  """mean ± sample standard deviation, "± n/a" for one value (no spread to measure)."""
  mean = statistics.mean(values)
  if len(values) < 2:
    return f"{mean:.{decimals}f} ± n/a"
  return f"{mean:.{decimals}f} ± {statistics.stdev(values):.{decimals}f}"


def duration(seconds: float | None) -> str:
  """Wall time in the unit that reads best: seconds, minutes or hours."""
  if seconds is None:
    return "-"
  if seconds < 120:
    return f"{seconds:.0f} s"
  if seconds < 2 * 3600:
    return f"{seconds / 60:.1f} min"
  return f"{seconds / 3600:.2f} h"
