"""Discrete VAE on binarized MNIST with 120 latent variables of arity 4.

Expected: not measured at this arity (the paper: GR-MC100 97.5 nats at B = 20); about the 16-ary
model's time per step.
"""

from configs.vae_common import vae_config


def get_config():
  return vae_config(arity=4, num_vars=120)
