"""Discrete VAE on binarized MNIST with 240 latent variables of arity 2."""

from configs.vae_common import vae_config


def get_config():
  return vae_config(arity=2, num_vars=240)
