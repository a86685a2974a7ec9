"""Two-stochastic-layer discrete VAE (240H~240H~784V) on binarized MNIST: 120 variables of arity
4 per layer.

Expected: not measured at this arity (the depth study ran arities 16 and 2).
"""

from configs.vae_common import two_layer_config


def get_config():
  return two_layer_config(arity=4, num_vars=120)
