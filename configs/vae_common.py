"""Shared defaults of the discrete-VAE configs (vae_2ary.py ... vae_16ary.py)."""

import ml_collections

from configs.population import population_config


def vae_config(arity: int, num_vars: int) -> ml_collections.ConfigDict:
  """The VAE config for m = num_vars variables of the given arity (m log2 n = 240)."""
  config = ml_collections.ConfigDict()
  config.experiment = "vae"
  # Data: a directory with binarized_mnist.npz or the .amat files; "" = then
  # $GR_JAX_DATA/binarized_mnist, the cache, and (download=True) a verified download.
  config.dataset = "binarized_mnist"  # fashion_mnist, mnist (grey); synthetic[_grey] (tests)
  config.data_dir = ""
  config.download = True
  # Grey-scale datasets: "dynamic" (a fresh Bernoulli draw of every training pixel at each use, the
  # DisARM protocol's), "fixed" (once, seeded) or "none" (the grey levels as targets: model
  # "categorical"); binary datasets (binarized_mnist): "fixed".
  config.binarization = "fixed"
  # MNIST / Fashion-MNIST: "train" (the first 50,000 images; the last 10,000 validate) or
  # "train+valid" (all 60,000 train: the GST / ReinMax protocol, which has no validation split).
  config.train_split = "train"
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
  # The training bound's KL term (gr_jax.models.vae.kl_term): "sampled" (log q(D|x) - log p(D) at
  # the sample, its direct gradient included), "pathwise" (that direct part left out) or
  # "analytic" (the exact KL); the last two for one-layer models and single-evaluation estimators.
  config.kl_estimate = "sampled"
  # Choices of Maddison et al. 2017 the defaults do not make (model "concrete" only;
  # configs/studies/concrete_choices.py measures each): "one" logit per binary latent instead
  # of "two" (arity 2); the encoder's input "2x-1" instead of "x" (appendix D.4); GS's latent
  # term "concrete" (appendix C.2: the Binary Concrete densities, or the ExpConcrete ones on
  # n-ary latents) instead of "discrete", with the prior's temperature relaxed_prior_tau (0: the
  # posterior's tau).
  config.binary_logits = "two"
  config.encoder_input = "x"
  config.relaxed_kl = "discrete"
  config.relaxed_prior_tau = 0.0
  # The training loss over the batch: "mean", or "sum" (a B-times larger gradient).
  config.loss_reduction = "mean"
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
  # Optimization: "sgd_momentum" (the paper's), "adam" (the DisARM protocol's: Adam for the
  # networks at learning_rate, SGD for the prior's logits at prior_learning_rate), or
  # "torch_adam" / "torch_radam" (PyTorch's defaults, every parameter: GST's and ReinMax's).
  config.optimizer = "sgd_momentum"
  config.prior_learning_rate = 0.01
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
  # The DisARM code's variance column, logged every step as ema_grad_variance: moving averages
  # (this decay) of the encoder gradient and its square over training; 0 = off (0.999: theirs).
  config.variance_ema_decay = 0.0
  config.num_eval_samples = 5_000  # IWAE M of the final valid/test numbers
  # With several members: 0 = every member is evaluated with num_eval_samples;
  # M > 0 = every member is scored with this cheaper M (selection on valid), and
  # only the selected member is then evaluated with num_eval_samples.
  config.selection_eval_samples = 0
  config.num_eval_examples = -1  # -1 = the whole split
  config.extra_test_samples = ()  # further test bounds, one per IWAE M (e.g. (1000,))
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


# The dataset argument of the Bernoulli configs, and the binarization each takes.
BERNOULLI_DATASETS = {"fashion_mnist": "dynamic", "mnist": "dynamic", "binarized_mnist": "fixed"}


def bernoulli_config(model: str, dataset: str) -> ml_collections.ConfigDict:
  """The DisARM protocol's Bernoulli VAE (google-research disarm/binary): 200 binary latents, Adam
  1e-4 for the networks and SGD 1e-2 for the prior's logits, batch 50, 10^6 steps, the input
  demeaned and the output bias at the data's log-odds, a 100-sample test bound (and a
  1000-sample one beside it). LeakyReLU's slope is Keras' default, 0.3; momentum is unused by
  Adam; tau (1.0) is the relaxation-based estimators' temperature, searched by none here."""
  if dataset not in BERNOULLI_DATASETS:
    raise ValueError(f"dataset must be one of {tuple(BERNOULLI_DATASETS)}; got {dataset!r}.")
  config = vae_config(arity=2, num_vars=200)
  config.model = model
  config.dataset = dataset
  config.binarization = BERNOULLI_DATASETS[dataset]
  config.encoder_widths = (200, 200) if model == "bernoulli_nonlinear" else ()
  config.decoder_widths = (200, 200) if model == "bernoulli_nonlinear" else ()
  config.activation = "leaky_relu"
  config.center_inputs = "pixel_means"
  config.estimator = "disarm"
  config.tau = 1.0
  config.optimizer = "adam"
  config.learning_rate = 1e-4
  config.prior_learning_rate = 1e-2
  config.momentum = 0.0
  config.batch_size = 50
  config.num_steps = 1_000_000
  config.steps_per_call = 1000
  config.log_every = 1000
  config.checkpoint_every = 10_000
  config.eval_every = 0
  config.variance_every = 10_000
  config.num_eval_samples = 100  # the protocol's test bound
  config.extra_test_samples = (1000,)
  return config
