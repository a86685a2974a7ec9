"""The discrete VAE experiment (Paulus et al. 2021, section 5.3): ``experiment`` (the config checks,
the data, the paper's search, :class:`VAEExperiment` for the driver), ``task`` (a member's pure
functions), ``evaluation`` (IWAE bounds, the final evaluation, the periodic measurements),
``trained`` (a trained workdir read back)."""

from experiments.vae.experiment import VAEExperiment, train_and_evaluate
from experiments.vae.trained import load_trained, saved_config

__all__ = ["VAEExperiment", "load_trained", "saved_config", "train_and_evaluate"]
