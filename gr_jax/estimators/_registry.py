r"""Estimators by config name: :class:`Estimator`, :data:`VALID_NAMES`, :func:`get`.

Part of :mod:`gr_jax.estimators` (its docstring states the conventions).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Callable


from gr_jax.estimators._core import Array
from gr_jax.estimators._deterministic import gapped_straight_through, reinmax, zgr
from gr_jax.estimators._gumbel_rao import gumbel_rao, gumbel_rao_exact, gumbel_rao_qmc
from gr_jax.estimators._score_function import reinforce
from gr_jax.estimators._straight_through import gumbel_softmax, st_gumbel_softmax, straight_through


# ---------------------------------------------------------------------------
# Look-up by config name.
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Estimator:
  """An estimator chosen by name: call it as ``estimator(key, logits, tau=...)``.

  Equal names give equal, hashable estimators, so an ``Estimator`` can be a
  static argument of ``jax.jit`` without retracing.

  Attributes:
    name: the config name (one of ``VALID_NAMES``).
    fn: the estimator function ``(key, logits, *, tau, **options) -> sample``.
    options: the keyword arguments fixed by the name, as sorted (key, value)
      pairs (e.g. ``(("num_samples", 100),)`` for "gr_mc100").
    relaxed: True for GS, whose sample is a point of the simplex.
    score_function: True for REINFORCE: add :func:`score_function_surrogate`.
    binary_only: True for estimators of two-category variables (gr_exact).
  """

  name: str
  fn: Callable[..., Array]
  options: tuple[tuple[str, Any], ...] = ()
  relaxed: bool = False
  score_function: bool = False
  binary_only: bool = False

  @property
  def one_hot(self) -> bool:
    """True when the forward value is an exact one-hot sample."""
    return not self.relaxed

  @property
  def straight_through(self) -> bool:
    """True when the sample itself carries the gradient (one-hot forward, custom backward)."""
    return self.one_hot and not self.score_function

  def __call__(self, key: Array, logits: Array, *, tau=1.0) -> Array:
    return self.fn(key, logits, tau=tau, **dict(self.options))


VALID_NAMES = (
    "st",
    "st_gs",
    "gs",
    "gr_mc<K> (K >= 1, e.g. gr_mc100)",
    "gr_qmc<K> (K >= 1, e.g. gr_qmc100)",
    "gr_exact (binary variables)",
    "zgr",
    "reinmax",
    "gst",
    "gst_p",
    "reinforce",
)

_ESTIMATORS = {
    "st": Estimator("st", straight_through),
    "st_gs": Estimator("st_gs", st_gumbel_softmax),
    "gs": Estimator("gs", gumbel_softmax, relaxed=True),
    "gr_exact": Estimator("gr_exact", gumbel_rao_exact, binary_only=True),
    "zgr": Estimator("zgr", zgr),
    "reinmax": Estimator("reinmax", reinmax),
    "gst": Estimator("gst", gapped_straight_through, options=(("gap", "1.0"),)),
    "gst_p": Estimator("gst_p", gapped_straight_through, options=(("gap", "p"),)),
    "reinforce": Estimator("reinforce", reinforce, score_function=True),
}

# Names with a sample count: the pattern, the function and its keyword.
_COUNTED_ESTIMATORS = (
    (re.compile(r"gr_mc([1-9][0-9]*)"), gumbel_rao, "num_samples"),
    (re.compile(r"gr_qmc([1-9][0-9]*)"), gumbel_rao_qmc, "num_samples"),
)


def get(name: str) -> Estimator:
  """The estimator for a config name.

  Args:
    name: one of ``VALID_NAMES``: "st", "st_gs", "gs", "gr_mc<K>" (for example
      "gr_mc100" is :func:`gumbel_rao` with ``num_samples=100``), "gr_qmc<K>"
      (:func:`gumbel_rao_qmc`), "gr_exact", "zgr", "reinmax", "gst" (GST-1.0),
      "gst_p" (GST-p) or "reinforce".

  Returns:
    An :class:`Estimator`; equal names give equal estimators.

  Raises:
    ValueError: for an unknown name, listing the valid ones.
  """
  if isinstance(name, str):
    if name in _ESTIMATORS:
      return _ESTIMATORS[name]
    for pattern, fn, keyword in _COUNTED_ESTIMATORS:
      match = pattern.fullmatch(name)
      if match:
        return Estimator(name, fn, options=((keyword, int(match.group(1))),))
  raise ValueError(
      f"unknown estimator {name!r}; valid names: {', '.join(VALID_NAMES)}."
  )
