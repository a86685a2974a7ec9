"""Periodic measurements during training, as small classes built from config.

After a block of steps, the loop (:class:`experiments.population.Run`) asks
each evaluator whether it is :meth:`~Evaluator.due`; one that is measures the
population state in :meth:`~Evaluator.run` and returns named ``[P]`` arrays
(one value per member) under the metrics split they belong to; the loop writes
them to metrics.jsonl and TensorBoard, logs :meth:`~Evaluator.summary`, and
gives the state to :meth:`~Evaluator.update` (for an evaluator that keeps a
record in the checkpointed state, such as ListOps's best epoch).

Adding a periodic metric is one class (in the experiment's package:
``experiments/vae/evaluation.py``, ``experiments/listops/evaluators.py``) and
the config field that says how often it runs; the experiment lists its classes
in its ``EVALUATORS``. The pattern is big_vision's ``evaluators/``.
"""

from __future__ import annotations

from typing import ClassVar, Mapping

import numpy as np

# {split: {name: [P] array}}: each member's value, under its metrics.jsonl split.
Values = Mapping[str, Mapping[str, np.ndarray]]


def describe(values: np.ndarray) -> str:
  """A member's value, or the best / median / worst of a population's."""
  if len(values) == 1:
    return f"{values[0]:.4f}"
  low, middle, high = np.nanmin(values), np.nanmedian(values), np.nanmax(values)
  return f"min {low:.4f} median {middle:.4f} max {high:.4f} ({len(values)} members)"


class Evaluator:
  """A measurement every ``every`` steps (0 = off).

  Subclasses set ``name`` (the log's label) and implement :meth:`run`; those
  whose measurement the final evaluation repeats set ``at_last_step = False``;
  those that also measure the untrained state (step 0, when a run starts) set
  ``at_start = True``.
  """

  name: ClassVar[str]
  at_last_step: ClassVar[bool] = True
  at_start: ClassVar[bool] = False

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
      f"{split} {name} {describe(np.asarray(v))}"
      for split, named in values.items()
      for name, v in named.items()
    )

  def update(self, state: dict, values: Values) -> dict:
    """The state to go on with (the evaluator's records in ``state["records"]``)."""
    del values
    return state
