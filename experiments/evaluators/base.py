"""The evaluator interface (see the package docstring)."""

from __future__ import annotations

from typing import ClassVar, Mapping

import numpy as np

from experiments import reporting

# {split: {name: [P] array}}: each member's value, under its metrics.jsonl split.
Values = Mapping[str, Mapping[str, np.ndarray]]


class Evaluator:
  """A measurement every ``every`` steps (0 = off).

  Subclasses set ``name`` (the log's label) and implement :meth:`run`; those
  whose measurement the final evaluation repeats set ``at_last_step = False``.
  """

  name: ClassVar[str]
  at_last_step: ClassVar[bool] = True

  def __init__(self, every: int):
    self.every = every

  def due(self, step: int, last_step: int) -> bool:
    return bool(self.every) and step % self.every == 0 and (self.at_last_step or step != last_step)

  def run(self, step: int, state: dict) -> Values:
    """Measures the population ``state`` (see ``population.Trainer``) after ``step``."""
    raise NotImplementedError

  def summary(self, values: Values) -> str:
    """The log line's text: each value's member value or population spread."""
    return " ".join(
      f"{split} {name} {reporting.describe(np.asarray(v))}"
      for split, named in values.items()
      for name, v in named.items()
    )

  def update(self, state: dict, values: Values) -> dict:
    """The state to go on with (the evaluator's records in ``state["records"]``)."""
    del values
    return state
