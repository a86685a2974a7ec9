"""Two-stochastic-layer discrete VAE (240H~240H~784V) on binarized MNIST: 240 variables of arity
2 per layer.

Expected (the depth study, configs/studies/depth.py: lr 5e-3, momentum 0.4, 3 seeds, 50,000 steps,
IWAE M = 1000 on 500 test images, the 2-core CPU): GR-MC10 103.17 ± 0.08 at tau 0.64 and
101.65 ± 0.16 at tau 0.25 (records/depth).
"""

from configs.vae_common import two_layer_config


def get_config():
  return two_layer_config(arity=2, num_vars=240)
