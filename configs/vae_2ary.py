"""Discrete VAE on binarized MNIST with 240 latent variables of arity 2 (Table 2's binary column).

Expected: the Table 2 study's selected members (configs/studies/table2.py, 20 draws, the 2-core
CPU): GS 101.0, ST-GS 105.5, GR-MC10 104.9, gr_exact 104.6 nats (records/table2/2ary_B20); a
population of 20 trains in 40-70 min on both cores and evaluates in 1.5-4 h.
"""

from configs.vae_common import vae_config


def get_config():
  return vae_config(arity=2, num_vars=240)
