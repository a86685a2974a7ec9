"""Unsupervised parsing on ListOps with a Gumbel Tree-LSTM (Paulus et al. 2021, section 5.2):
``experiment`` (the config checks, the data, the paper's grid, :class:`ListOpsExperiment` for the
driver), ``task`` (a member's pure functions), ``evaluators`` (the epoch accuracies)."""

from experiments.listops.experiment import ListOpsExperiment, train_and_evaluate

__all__ = ["ListOpsExperiment", "train_and_evaluate"]
