"""Shared defaults of the discrete-VAE configs (vae_2ary.py ... vae_16ary.py)."""

import ml_collections

from configs.population import population_config


def vae_config(arity: int, num_vars: int) -> ml_collections.ConfigDict:
  """The VAE config for m = num_vars variables of the given arity (m log2 n = 240)."""
  config = ml_collections.ConfigDict()
  config.experiment = "vae"
  # Data: a directory with binarized_mnist.npz or the .amat files; "" = then
  # $GR_JAX_DATA/binarized_mnist, the cache, and (download=True) a verified download.
  config.dataset = "binarized_mnist"  # or "synthetic" (tests)
  config.data_dir = ""
  config.download = True
  # Model, by name (experiments/vae/models.py): "concrete", the Concrete paper's 240H~784V
  # (Maddison et al. 2017, section 5.1 and appendix D), each choice one field below;
  # "relu_mlp", the earlier ReLU 512/256 model (configs/vae_relu_mlp.py sets its choices);
  # "concrete_two_layer", the 240H~240H~784V model (configs/vae_two_layer_*.py).
  config.model = "concrete"
  config.arity = arity
  config.num_vars = num_vars
  config.encoder_widths = (240, 240)  # "~": two tanh layers as wide as the stochastic layer (D.1)
  config.decoder_widths = (240, 240)
  config.activation = "tanh"  # or "relu"
  config.kernel_init = "glorot_uniform"  # (D.5) or "lecun_normal"
  # The decoder's output bias at init: "data_log_odds" (the training pixels' log-odds, D.3) or
  # "zeros".
  config.decoder_output_bias = "data_log_odds"
  # The encoder's input minus: "running_average" (of the minibatch means, rate
  # centering_decay, frozen in evaluation; D.4), "pixel_means" (fixed) or "none".
  config.center_inputs = "running_average"
  config.centering_decay = 0.9
  config.prior = "learned"  # learned prior logits (zero init, section 5.1) or "uniform"
  # Estimator: a name accepted by gr_jax.estimators.get.
  config.estimator = "gr_mc100"
  config.tau = 0.5
  # Temperature schedule: "constant", or "exponential" decay to a floor,
  # tau_t = max(tau_min, tau * exp(-tau_decay_rate * t)), updated every tau_decay_every steps.
  config.tau_schedule = "constant"
  config.tau_min = 0.1
  config.tau_decay_rate = 1e-4
  config.tau_decay_every = 500
  config.baseline_decay = 0.99  # REINFORCE's running-mean baseline
  # Optimization: SGD with momentum.
  config.batch_size = 20
  config.num_steps = 50_000
  config.learning_rate = 1e-3
  config.momentum = 0.9
  config.weight_decay = 0.0
  config.seed = 0
  # Runs trained together in one program (experiments/population.py): seeds and
  # hyperparameter searches; steps_per_call steps per jitted call.
  config.population = population_config()
  config.steps_per_call = 500
  # Logging, evaluation, checkpoints (every N steps; 0 = off).
  config.log_every = 500
  config.eval_every = 5_000
  config.periodic_eval_samples = 100  # IWAE M of the periodic validation bound
  config.checkpoint_every = 5_000
  config.variance_every = 5_000  # log10 trace Cov of the encoder gradient (Figure 2a)
  config.variance_draws = 100
  config.mse_every = 0  # log10 MSE of the encoder gradient vs REINFORCE (Figure 2b); costly
  config.mse_reference_draws = 10_000  # REINFORCE draws of the reference gradient
  config.num_eval_samples = 5_000  # IWAE M of the final valid/test numbers
  # With several members: 0 = every member is evaluated with num_eval_samples;
  # M > 0 = every member is scored with this cheaper M (selection on valid), and
  # only the selected member is then evaluated with num_eval_samples.
  config.selection_eval_samples = 0
  config.num_eval_examples = -1  # -1 = the whole split
  config.eval_batch_size = 100
  config.iwae_chunk_size = 100
  return config


def two_layer_config(arity: int, num_vars: int) -> ml_collections.ConfigDict:
  """The two-stochastic-layer VAE (the Concrete paper's 240H~240H~784V): m variables of arity n
  in each layer (m log2 n = 240), every "~" two tanh layers of width 240."""
  config = vae_config(arity, num_vars)
  config.model = "concrete_two_layer"
  config.upper_encoder_widths = (240, 240)  # q(h2 | h1)'s "~"
  config.upper_decoder_widths = (240, 240)  # p(h1 | h2)'s "~"
  return config
