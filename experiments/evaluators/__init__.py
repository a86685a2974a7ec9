"""Periodic measurements during training, as small classes built from config.

After a block of steps, the loop (:class:`experiments.population.Run`) asks
each evaluator whether it is :meth:`~Evaluator.due`; one that is measures the
population state in :meth:`~Evaluator.run` and returns named ``[P]`` arrays
(one value per member) under the metrics split they belong to; the loop writes
them to metrics.jsonl and TensorBoard, logs :meth:`~Evaluator.summary`, and
gives the state to :meth:`~Evaluator.update` (for an evaluator that keeps a
record in the checkpointed state, such as ListOps's best epoch).

Adding a periodic metric is one class (here, in the experiment's module) and the
config field that says how often it runs; the experiment lists its classes in
its ``EVALUATORS``. The pattern is big_vision's ``evaluators/``.
"""

from experiments.evaluators.base import Evaluator, Values

__all__ = ["Evaluator", "Values"]
