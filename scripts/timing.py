"""The one timing helper of the benchmark scripts: a median after warm-up."""

import statistics
import time

import jax


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
