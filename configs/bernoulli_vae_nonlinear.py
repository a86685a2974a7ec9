"""The DisARM protocol's nonlinear Bernoulli VAE (200 binary latents) on dynamically binarized
Fashion-MNIST; `--config=configs/bernoulli_vae_nonlinear.py:DATASET` for mnist (dynamic) or
binarized_mnist (fixed).

Expected (the field study, configs/studies/field.py, 100,000 of the protocol's 10^6 steps, 3 seeds):
test IWAE-100 DisARM 242.79 ± 0.09 and ST-GS 243.44 ± 0.21 nats on Fashion-MNIST (records/field);
3.5-6.9 ms per DisARM step on the project's 2-core CPUs (records/bench_bernoulli.json: 6.9), so
1-2 h per 10^6 steps before the final evaluation.
"""

from configs.vae_common import bernoulli_config


def get_config(dataset: str = "fashion_mnist"):
  return bernoulli_config("bernoulli_nonlinear", dataset)
