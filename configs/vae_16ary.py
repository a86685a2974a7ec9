"""Discrete VAE on binarized MNIST with 60 latent variables of arity 16 (the paper's Table 2 model).

The defaults train one run of the paper's protocol with GR-MC100 (50,000 SGD steps, then the IWAE
bound with M = 5000 on the full validation and test sets). Expected: about an hour on the 2-core CPU
(20 min of training at 24 ms per step, ~18 min for each final evaluation), minutes on a GPU; the
README's first try (2,000 steps, M = 100) gives valid 148.2 and test 147.1 nats in 2 min 7 s on the
2-core CPU. The Table 2 study's selected members (configs/studies/table2.py, one NVIDIA H100):
ST-GS 101.2, GR-MC10 101.0, GR-MC100 100.5 nats (records/table2_16ary_B20_h100.md).
"""

from configs.vae_common import vae_config


def get_config():
  return vae_config(arity=16, num_vars=60)
