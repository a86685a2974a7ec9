"""Two-stochastic-layer discrete VAE (240H~240H~784V) on binarized MNIST: 240 variables of arity
2 per layer."""

from configs.vae_common import two_layer_config


def get_config():
  return two_layer_config(arity=2, num_vars=240)
