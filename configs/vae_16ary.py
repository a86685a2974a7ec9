"""Discrete VAE on binarized MNIST with 60 latent variables of arity 16."""

from configs.vae_common import vae_config


def get_config():
  return vae_config(arity=16, num_vars=60)
