"""Discrete VAE on binarized MNIST with 80 latent variables of arity 8."""

from configs.vae_common import vae_config


def get_config():
  return vae_config(arity=8, num_vars=80)
