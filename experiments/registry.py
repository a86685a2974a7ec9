"""The experiments by name (``config.experiment``): the one table that main, the merge of job-array
slices and the plots read. Each entry is the experiment's module: ``train_and_evaluate(config,
workdir)``; the population experiments also their driver class (``EXPERIMENT``), searched
``HYPERPARAMETERS`` and ``paper_search``."""

from experiments.listops import experiment as listops
from experiments.toy_qp import experiment as toy_qp
from experiments.vae import experiment as vae

EXPERIMENTS = {"vae": vae, "listops": listops, "toy_qp": toy_qp}
# The population experiments (trained as populations of members; merged from job-array slices).
POPULATION_EXPERIMENTS = {"vae": vae.VAEExperiment, "listops": listops.ListOpsExperiment}
