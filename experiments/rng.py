"""Every random stream of a run, named in one place.

A member's randomness comes from ``jax.random.key(seed)`` alone (its seed is
part of the population's data); each use folds in its own stream, and within
a stream the step, epoch or evaluation (``fold_in(stream key, ...)``). So a
member's numbers do not depend on the other members, on how many there are or
on the devices, and a resumed run draws what the uninterrupted one drew.
"""

import enum

import jax


class Stream(enum.IntEnum):
  """``fold_in(key(seed), stream)``: the member's streams."""

  INIT = 0  # the parameters
  TRAIN = 1  # the estimators' samples: then fold_in(step)
  DATA_ORDER = 2  # the epoch's permutation of the training set: then fold_in(epoch)
  EVALUATION = 3  # the IWAE samples: then fold_in(Evaluation or step), fold_in(first image)
  GRADIENT_STATISTICS = 4  # the gradient-variance and MSE draws: then fold_in(step)
  DATA_DRAWS = 5  # random draws of the training batches (dynamic binarization): then fold_in(step)


class Evaluation(enum.IntEnum):
  """The evaluations that draw IWAE samples (a periodic evaluation uses its step, >= 1)."""

  ETA_PROBE = 0  # one timed batch before training, for the ETA
  FINAL_VALID = -1
  FINAL_TEST = -2
  SELECTED_VALID = -3  # the selected member again, with more samples
  SELECTED_TEST = -4


def extra_test(num_samples: int) -> int:
  """The evaluation id of the test bound with ``num_samples`` beyond the main one (below every
  Evaluation, one per M)."""
  return -1000 - num_samples


def member_key(seed, stream: Stream) -> jax.Array:
  """The key of ``stream`` for the member with ``seed`` (traced or not)."""
  return jax.random.fold_in(jax.random.key(seed), stream)
