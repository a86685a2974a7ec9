r"""Estimators by config name: :class:`Estimator`, :func:`get`, :func:`names`.

Every list of estimator names in the project (``VALID_NAMES``, error messages,
scripts' defaults, test parameters, the README's table check) is derived from
the registry below, so a new estimator is one entry here.

Part of :mod:`gr_jax.estimators` (its docstring states the conventions).
"""

from __future__ import annotations

import dataclasses
import importlib
import re
from typing import Any, Callable

from gr_jax.estimators._core import MAX_NUM_SAMPLES, Array
from gr_jax.estimators._deterministic import gapped_straight_through, reinmax, zgr
from gr_jax.estimators._gumbel_rao import gumbel_rao, gumbel_rao_qmc
from gr_jax.estimators._gumbel_rao_exact import gumbel_rao_exact
from gr_jax.estimators._lattice import MAX_LATTICE_POINTS
from gr_jax.estimators._multi_sample import disarm, rloo
from gr_jax.estimators._score_function import reinforce
from gr_jax.estimators._straight_through import gumbel_softmax, st_gumbel_softmax, straight_through

# The families, as the package's private modules group them.
FAMILIES = ("straight_through", "gumbel_rao", "deterministic", "score_function", "multi_sample")


@dataclasses.dataclass(frozen=True)
class Estimator:
  """An estimator chosen by name: call it as ``estimator(key, logits, tau=...)`` (the
  multi-sample family: ``estimator(key, logits, f=f)``, with the loss ``f``).

  Equal names give equal, hashable estimators, so an ``Estimator`` can be a
  static argument of ``jax.jit`` without retracing.

  Attributes:
    name: the config name (one of :func:`names`).
    fn: the estimator function ``(key, logits, *, tau, **options) -> sample``.
    family: one of ``FAMILIES``.
    options: the keyword arguments fixed by the name, as sorted (key, value)
      pairs (e.g. ``(("num_samples", 100),)`` for "gr_mc100").
    relaxed: True for GS, whose sample is a point of the simplex.
    score_function: True for REINFORCE: add :func:`score_function_surrogate`.
    binary_only: True for estimators of two-category variables (gr_exact,
      disarm).
    multi_sample: True for the estimators that evaluate the loss ``f``
      themselves, several times (RLOO, DisARM): they return a surrogate.
    loss_evaluations: evaluations of the loss per step (1 for the
      single-evaluation estimators, K for RLOO-K, 2 for DisARM): the cost to
      compare estimators at.
    conditional_samples: conditional samples per variable the backward pass
      draws (K for GR-MCK and GR-QMCK; 0 for the others: GR-exact integrates
      exactly).
    draws: independent draws a training step averages (``<name>_x<M>``: the
      loss evaluated at each of M samples, their gradients averaged; the
      experiments that train with it do the averaging, a call of the
      estimator is one draw). ``loss_evaluations`` counts them.
  """

  name: str
  fn: Callable[..., Array]
  family: str
  options: tuple[tuple[str, Any], ...] = ()
  relaxed: bool = False
  score_function: bool = False
  binary_only: bool = False
  multi_sample: bool = False
  loss_evaluations: int = 1
  conditional_samples: int = 0
  draws: int = 1

  @property
  def one_hot(self) -> bool:
    """True when the forward value is an exact one-hot sample."""
    return not self.relaxed

  @property
  def straight_through(self) -> bool:
    """True when the sample itself carries the gradient (one-hot forward, custom backward)."""
    return self.one_hot and not self.score_function and not self.multi_sample

  def __post_init__(self):
    # help(get(name)) shows the estimator function's documentation.
    options = ", ".join(f"{key}={value!r}" for key, value in self.options)
    doc = f"{self.name!r}: {self.fn.__name__}({options})\n\n{self.fn.__doc__}"
    object.__setattr__(self, "__doc__", doc)

  def __repr__(self) -> str:
    return f"estimators.get({self.name!r})"

  def __call__(self, key: Array, logits: Array, *, tau: float | Array = 1.0, **kwargs) -> Array:
    """The estimator at ``(key, logits)``; ``kwargs``: the multi-sample family's ``f`` (and
    ``has_aux``)."""
    if self.multi_sample and "f" not in kwargs:
      raise ValueError(
        f"estimator {self.name!r} evaluates the loss itself: call it with f=, the loss of a"
        " one-hot sample (estimator(key, logits, f=f))."
      )
    return self.fn(key, logits, tau=tau, **dict(self.options), **kwargs)


_FIXED = (
  Estimator("st", straight_through, "straight_through"),
  Estimator("st_gs", st_gumbel_softmax, "straight_through"),
  Estimator("gs", gumbel_softmax, "straight_through", relaxed=True),
  Estimator("gr_exact", gumbel_rao_exact, "gumbel_rao", binary_only=True),
  Estimator("zgr", zgr, "deterministic"),
  Estimator("reinmax", reinmax, "deterministic"),
  Estimator("gst", gapped_straight_through, "deterministic", options=(("gap", 1.0),)),
  Estimator("gst_p", gapped_straight_through, "deterministic", options=(("gap", "p"),)),
  Estimator("reinforce", reinforce, "score_function", score_function=True),
  Estimator(
    "disarm", disarm, "multi_sample", binary_only=True, multi_sample=True, loss_evaluations=2
  ),
)
_BY_NAME = {estimator.name: estimator for estimator in _FIXED}


@dataclasses.dataclass(frozen=True)
class _CountedFamily:
  """Names with a sample count K: ``prefix + K + suffix`` -> ``fn(num_samples=K, **options)``."""

  prefix: str
  fn: Callable[..., Array]
  family: str
  max_samples: int
  suffix: str = ""
  options: tuple[tuple[str, Any], ...] = ()
  min_samples: int = 1
  # What K counts: the loss evaluations of a step (RLOO) or the backward's conditional samples.
  counts: str = "conditional_samples"

  @property
  def pattern(self) -> str:
    return f"{self.prefix}<K>{self.suffix}"

  def name(self, num_samples: int) -> str:
    return f"{self.prefix}{num_samples}{self.suffix}"

  def match(self, name: str) -> int | None:
    found = re.fullmatch(f"{self.prefix}([1-9][0-9]*){re.escape(self.suffix)}", name)
    return int(found.group(1)) if found else None

  def estimator(self, num_samples: int) -> Estimator:
    options = tuple(sorted((("num_samples", num_samples), *self.options)))
    multi_sample = self.counts == "loss_evaluations"
    return Estimator(
      self.name(num_samples),
      self.fn,
      self.family,
      options=options,
      multi_sample=multi_sample,
      **{self.counts: num_samples},
    )


_COUNTED = (
  _CountedFamily("gr_mc", gumbel_rao, "gumbel_rao", MAX_NUM_SAMPLES),
  _CountedFamily(
    "rloo", rloo, "multi_sample", MAX_NUM_SAMPLES, min_samples=2, counts="loss_evaluations"
  ),
  _CountedFamily("gr_qmc", gumbel_rao_qmc, "gumbel_rao", MAX_LATTICE_POINTS),
  _CountedFamily(
    "gr_qmc",
    gumbel_rao_qmc,
    "gumbel_rao",
    MAX_LATTICE_POINTS,
    suffix="_no_tent",
    options=(("tent", False),),
  ),
)

# The registry's order: the fixed names with the counted families after "gs" (RLOO beside DisARM).
_ORDER = (
  "st",
  "st_gs",
  "gs",
  _COUNTED[0],
  *_COUNTED[2:],
  "gr_exact",
  "zgr",
  "reinmax",
  "gst",
  "gst_p",
  "reinforce",
  _COUNTED[1],
  "disarm",
)


def names(*, num_samples: int = 100, **properties) -> tuple[str, ...]:
  """The registered names that :func:`get` accepts, in the registry's order.

  Args:
    num_samples: K in the names of the counted families (``gr_mc<K>`` gives
      ``f"gr_mc{num_samples}"``).
    **properties: keep only the estimators whose :class:`Estimator` attribute
      of that name has that value, e.g. ``names(straight_through=True)``,
      ``names(family="deterministic")``, ``names(binary_only=False)``.

  Returns:
    A tuple of names, one per registered estimator (or counted family).
  """
  chosen = []
  for entry in _ORDER:
    estimator = _BY_NAME[entry] if isinstance(entry, str) else entry.estimator(num_samples)
    for attribute, value in properties.items():
      if not hasattr(estimator, attribute):
        raise ValueError(f"names() got an unknown property {attribute!r}.")
    if all(getattr(estimator, attribute) == value for attribute, value in properties.items()):
      chosen.append(estimator.name)
  return tuple(chosen)


def name_patterns(**properties) -> tuple[str, ...]:
  """As :func:`names`, with the counted families written as patterns (``gr_mc<K>``)."""
  patterns = {family.name(1): family.pattern for family in _COUNTED}
  return tuple(patterns.get(name, name) for name in names(num_samples=1, **properties))


# Every name get() accepts, with K = 100 in the counted families (all valid names).
VALID_NAMES = names()


def _imported(path: str) -> Estimator:
  """The :class:`Estimator` named by ``"package.module:attribute"``, renamed to ``path``."""
  module_name, _, attribute = path.partition(":")
  try:
    module = importlib.import_module(module_name)
  except ImportError as e:
    raise ValueError(
      f"estimator {path!r}: cannot import module {module_name!r} ({e}); put its folder on"
      " PYTHONPATH (the runs start in fresh processes, which import it again)."
    ) from None
  if not hasattr(module, attribute):
    raise ValueError(f"estimator {path!r}: module {module_name!r} has no {attribute!r}.")
  found = getattr(module, attribute)
  if not isinstance(found, Estimator):
    raise ValueError(
      f"estimator {path!r} is a {type(found).__name__}, not a gr_jax.estimators.Estimator:"
      " declare its family and costs, e.g. Estimator('mine', my_function, 'straight_through')"
      " (docs/compare_your_estimator.md)."
    )
  if found.family not in FAMILIES:
    raise ValueError(
      f"estimator {path!r}: family {found.family!r} is not one of {', '.join(FAMILIES)}."
    )
  return dataclasses.replace(found, name=path)


def _averaged(name: str, single: Estimator, draws: int) -> Estimator:
  """``<name>_x<M>``: ``single`` averaged over M independent draws per step (M evaluations)."""
  if draws < 2:
    raise ValueError(
      f"estimator {name!r}: average over M >= 2 draws (<name>_x<M>); got M = {draws}."
    )
  if single.loss_evaluations != 1 or single.draws != 1:
    raise ValueError(
      f"estimator {name!r}: only a one-evaluation estimator is averaged over draws;"
      f" {single.name!r} evaluates the loss {single.loss_evaluations} times (use rloo<K>)."
    )
  return dataclasses.replace(single, name=name, draws=draws, loss_evaluations=draws)


def get(name: str) -> Estimator:
  """The estimator for a config name, or for an import path of one's own.

  Args:
    name: "st", "st_gs", "gs", "gr_mc<K>" (for example "gr_mc100" is
      :func:`gumbel_rao` with ``num_samples=100``), "gr_qmc<K>"
      (:func:`gumbel_rao_qmc`), "gr_qmc<K>_no_tent" (the same without the
      tent transform), "gr_exact", "zgr", "reinmax", "gst" (GST-1.0),
      "gst_p" (GST-p), "reinforce", "rloo<K>" (:func:`rloo`, K >= 2) or
      "disarm"; :func:`names` lists them. ``<name>_x<M>`` is a one-evaluation
      estimator averaged over M independent draws per training step, counted
      as M loss evaluations (``st_gs_x2`` beside ``disarm``). Or
      ``"package.module:attribute"``,
      an :class:`Estimator` defined outside gr_jax (its module importable,
      e.g. on ``PYTHONPATH``), which is returned under that name: a config's
      ``estimator`` field takes it like any other
      (docs/compare_your_estimator.md).

  Returns:
    An :class:`Estimator`; equal names give equal estimators.

  Raises:
    ValueError: for an unknown name, listing the valid ones, and for an
      import path that does not lead to an :class:`Estimator`.
  """
  if isinstance(name, str) and ":" in name:
    return _imported(name)
  averaged = re.fullmatch(r"(.+)_x([0-9]+)", name) if isinstance(name, str) else None
  if averaged:
    try:
      single = get(averaged.group(1))
    except ValueError:
      single = None  # not a name with draws: the unknown name below
    if single is not None:
      return _averaged(name, single, int(averaged.group(2)))
  if isinstance(name, str):
    if name in _BY_NAME:
      return _BY_NAME[name]
    for family in _COUNTED:
      num_samples = family.match(name)
      if num_samples is not None and num_samples > family.max_samples:
        raise ValueError(
          f"estimator {name!r}: K = {num_samples} is more than {family.pattern} allows"
          f" (K <= {family.max_samples})."
        )
      if num_samples is not None and num_samples < family.min_samples:
        raise ValueError(
          f"estimator {name!r}: K = {num_samples} is fewer than {family.pattern} allows"
          f" (K >= {family.min_samples}: each sample's baseline is the mean of the others)."
        )
      if num_samples is not None:
        return family.estimator(num_samples)
  raise ValueError(
    f"unknown estimator {name!r}; valid names: {', '.join(name_patterns())}"
    " (K >= 1, e.g. gr_mc100), each also as <name>_x<M> (averaged over M draws per step)."
  )
