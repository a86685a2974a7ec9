"""The toy quadratic program on the simplex (Paulus et al. 2021, section 5.1, Figure 1):
``experiment`` (variance maps and optimization curves; not a population)."""

from experiments.toy_qp.experiment import train_and_evaluate

__all__ = ["train_and_evaluate"]
