"""Discrete VAE on binarized MNIST with 120 latent variables of arity 4."""

from configs.vae_common import vae_config


def get_config():
  return vae_config(arity=4, num_vars=120)
