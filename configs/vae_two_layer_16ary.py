"""Two-stochastic-layer discrete VAE (240H~240H~784V) on binarized MNIST: 60 variables of arity
16 per layer.

Expected (the depth study, configs/studies/depth.py: lr 5e-3, momentum 0.4, 3 seeds, 50,000 steps,
IWAE M = 1000 on 500 test images, the 2-core CPU): GR-MC10 102.79 ± 0.19 at tau 0.64 and
102.34 ± 0.32 at tau 0.25 (records/depth); 20-60 min per population of 6 members.
"""

from configs.vae_common import two_layer_config


def get_config():
  return two_layer_config(arity=16, num_vars=60)
