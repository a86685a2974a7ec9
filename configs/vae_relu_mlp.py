"""The earlier VAE (rounds 1-2): ReLU 784-512-256 / 256-512-784 MLPs, lecun-normal
kernels, zero output bias, no input centring, a uniform prior.

``--config=configs/vae_relu_mlp.py:16`` (the arity after the colon; 16 by
default) reproduces the results the README reports for "the ReLU 512/256 model".
"""

from configs.vae_common import vae_config

NUM_VARS = {2: 240, 4: 120, 8: 80, 16: 60}  # m log2 n = 240


def get_config(arity: str = "16"):
  config = vae_config(arity=int(arity), num_vars=NUM_VARS[int(arity)])
  config.model = "relu_mlp"
  config.encoder_widths = (512, 256)
  config.decoder_widths = (256, 512)
  config.activation = "relu"
  config.kernel_init = "lecun_normal"
  config.decoder_output_bias = "zeros"
  config.center_inputs = "none"
  config.prior = "uniform"
  return config
