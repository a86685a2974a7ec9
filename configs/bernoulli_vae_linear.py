"""The DisARM protocol's linear Bernoulli VAE (200 binary latents) on dynamically binarized
Fashion-MNIST; `--config=configs/bernoulli_vae_linear.py:DATASET` for mnist (dynamic) or
binarized_mnist (fixed)."""

from configs.vae_common import bernoulli_config


def get_config(dataset: str = "fashion_mnist"):
  return bernoulli_config("bernoulli_linear", dataset)
