"""Discrete VAE on binarized MNIST with 80 latent variables of arity 8.

Expected: not measured at this arity (the paper: GR-MC100 96.8 nats at B = 20); about the 16-ary
model's time per step.
"""

from configs.vae_common import vae_config


def get_config():
  return vae_config(arity=8, num_vars=80)
