"""The DisARM protocol's linear Bernoulli VAE (200 binary latents) on dynamically binarized
Fashion-MNIST; `--config=configs/bernoulli_vae_linear.py:DATASET` for mnist (dynamic) or
binarized_mnist (fixed).

Expected (the field study, configs/studies/field.py, 100,000 of the protocol's 10^6 steps, 3 seeds):
test IWAE-100 DisARM 256.37 ± 0.24 and ST-GS 258.32 ± 0.07 nats on Fashion-MNIST (records/field);
2.2-4.4 ms per DisARM step on the project's 2-core CPUs (records/bench_bernoulli.json: 4.4).
"""

from configs.vae_common import bernoulli_config


def get_config(dataset: str = "fashion_mnist"):
  return bernoulli_config("bernoulli_linear", dataset)
